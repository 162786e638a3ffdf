//! `POST /requests/preview` end to end: every number of a preview checked by hand, size
//! classes at their boundaries, unit conversion, scheduling under the pinned clock.

use crate::common::{TestServer, assert_envelope, cents, request};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_small_parcels_are_charged_the_minimum_price() {
    let s = TestServer::start().await;
    let r = s.preview(&request(&[500.0, 500.0, 500.0])).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let b = &r.body;
    assert_eq!((b["status"].as_str(), b["code"].as_i64()), (Some("success"), Some(200)));
    let o = &b["object"];
    // 3 × 9.00 = 27.00; 13 % of 27.00 = 3.51; minimum 45.00; 13 % of 45.00 = 5.85.
    assert_eq!(cents(&o["actual_total_price"]), 2700);
    assert_eq!(cents(&o["actual_total_tax"]), 351);
    assert_eq!(cents(&o["actual_price_with_tax"]), 3051);
    assert_eq!(cents(&o["min_price"]), 4500);
    assert_eq!(cents(&o["total_price"]), 4500);
    assert_eq!(cents(&o["total_tax"]), 585);
    assert_eq!(cents(&o["price_with_tax"]), 5085);
    assert_eq!(o["payment_type"], json!({"id": 1, "code": "invoice", "name": "Monthly invoice"}));

    let pu = &o["pick_ups"][0];
    assert_eq!(pu["scheduled_date"], "2026-11-23");
    assert_eq!(pu["time_slot_code"], "TOR-PU-AM");
    assert_eq!(
        pu["time_slot"],
        json!({"city": "Toronto", "code": "TOR-PU-AM", "name": "09:00 - 12:00", "closing_margin": 60, "from_time": 540, "to_time": 720})
    );
    assert_eq!(pu["time_slot_datetime_start"], "2026-11-23T09:00:00-05:00");
    assert_eq!(pu["time_slot_datetime_end"], "2026-11-23T12:00:00-05:00");
    for field in ["drop_offs_total_price", "parcels_total_price", "price", "total_price"] {
        assert_eq!(cents(&pu[field]), 2700, "{field}");
    }
    assert_eq!(cents(&pu["additional_parameters_total_price"]), 0);
    let a = &pu["address"];
    assert_eq!(a["postal_code"], "m5x 1a9");
    assert_eq!(a["city"], "Toronto");
    assert!(a["lat"].is_string() && a["lng"].is_string(), "preview lat/lng are strings: {a}");
    assert!(a["saved_address_id"].is_null());
    for k in ["person_name", "person_phone_country_code", "person_phone", "plate_number", "unit_number", "description"]
    {
        assert!(a.get(k).is_some(), "pick-up address lacks {k}");
    }
    let summary = &pu["parcel_summary"]["SAME"]["small"];
    assert_eq!(summary["count"], 3);
    assert_eq!(summary["code"], "small");
    let icon = summary["icon_url"].as_str().unwrap();
    let res = s.http.get(icon).send().await.unwrap();
    assert_eq!(res.status(), 200, "the icon is served by the service itself");
    assert_eq!(res.headers()["content-type"], "image/svg+xml");

    let d = &pu["drop_offs"][0];
    assert_eq!(d["pick_up_shipment_type"], "SAME");
    assert_eq!(d["scheduled_date"], "2026-11-23");
    assert_eq!(d["pick_up_scheduled_date"], "2026-11-23");
    assert_eq!(d["time_slot_code"], "TOR-DT-PM");
    assert_eq!(
        d["time_slot"],
        json!({"city": "Toronto", "code": "TOR-DT-PM", "warehouse_service_zone_code": "TOR-DT", "closing_margin": 0, "from_time": 840, "to_time": 1080})
    );
    assert_eq!(d["time_slot_datetime_start"], "2026-11-23T14:00:00-05:00");
    assert_eq!(cents(&d["price"]), 2700);
    assert_eq!(d["address"]["postal_code"], "m5v 3l9");
    assert_eq!(d["address"]["region"], "ON");
    assert_eq!(d["address"]["location_service_postal_code"], "M5V");
    assert!(d["address"]["lat"].is_string());
    assert_eq!(d["parcels"][0], json!({"unit": "g", "values": 500.0, "parcel_size_code": "small", "price": 9.0}));
    assert_eq!(d["parcel_summary"]["SAME"]["small"]["count"], 3);
    // A preview writes nothing.
    assert_eq!(s.scalar("SELECT count(*) FROM orders"), 0);
    assert_eq!(s.scalar("SELECT count(*) FROM saved_addresses"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn size_classes_at_their_boundaries_and_units() {
    let s = TestServer::start().await;
    let cases = [
        (json!({"unit": "g", "values": 2000}), "small", 900),
        (json!({"unit": "g", "values": 2000.5}), "medium", 1200),
        (json!({"unit": "kg", "values": 5}), "medium", 1200),
        (json!({"unit": "g", "values": 5001}), "large", 1600),
        (json!({"unit": "kg", "values": 10}), "large", 1600),
        (json!({"unit": "kg", "values": 10.001}), "xlarge", 2400),
        (json!({"unit": "kg", "values": 25}), "xlarge", 2400),
        (json!({"unit": "lb", "values": 4.4}), "small", 900), // 1995.8 g
        (json!({"unit": "lb", "values": 4.5}), "medium", 1200), // 2041.2 g
        (json!({"unit": "oz", "values": 70}), "small", 900),  // 1984.5 g
        (json!({"unit": "oz", "values": 71}), "medium", 1200), // 2012.8 g
    ];
    let mut body = request(&[1.0]);
    body["drop_offs"][0]["parcels"] = json!(cases.iter().map(|c| c.0.clone()).collect::<Vec<_>>());
    let r = s.preview(&body).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let parcels = &r.body["object"]["pick_ups"][0]["drop_offs"][0]["parcels"];
    let mut total = 0;
    for (i, (input, size, price)) in cases.iter().enumerate() {
        assert_eq!(parcels[i]["parcel_size_code"], *size, "parcel {i}: {input}");
        assert_eq!(cents(&parcels[i]["price"]), *price, "parcel {i}");
        assert_eq!(parcels[i]["unit"], input["unit"], "unit echoed");
        total += price;
    }
    let o = &r.body["object"];
    assert_eq!(cents(&o["actual_total_price"]), total);
    assert_eq!(cents(&o["total_price"]), total, "above the minimum: no adjustment");
    assert_eq!(cents(&o["total_tax"]), (total * 13 + 50) / 100);
    let summary = &o["pick_ups"][0]["parcel_summary"]["SAME"];
    assert_eq!(summary["small"]["count"], 3);
    assert_eq!(summary["medium"]["count"], 4);
    assert_eq!(summary["large"]["count"], 2);
    assert_eq!(summary["xlarge"]["count"], 2);

    let mut heavy = request(&[25_000.001]);
    heavy["drop_offs"][0]["parcels"][0]["unit"] = json!("g");
    let r = s.preview(&heavy).await;
    assert_eq!(r.status, 422);
    assert!(r.error_at("drop_offs.0.parcels.0.values")[0].contains("largest size class"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_drop_offs_are_summed_and_scheduled_per_zone() {
    let s = TestServer::start().await;
    let body = json!({
        "pick_up_address": {"text": crate::common::PICK_UP},
        "drop_offs": [
            {"address": {"text": "290 Bremner Blvd, Toronto M5V 3L9"}, "parcels": [{"unit": "kg", "values": 3}, {"unit": "kg", "values": 1}]},
            {"address": {"text": "1 Danforth Ave, Toronto M4K 1M8"}, "parcels": [{"unit": "kg", "values": 8}]},
            {"address": {"text": "Scarborough M1B 1A1"}, "parcels": [{"unit": "kg", "values": 20}, {"unit": "g", "values": 10}]}
        ]
    });
    let r = s.preview(&body).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let pu = &r.body["object"]["pick_ups"][0];
    let d = &pu["drop_offs"];
    assert_eq!((cents(&d[0]["price"]), cents(&d[1]["price"]), cents(&d[2]["price"])), (2100, 1600, 3300));
    assert_eq!(d[0]["time_slot"]["warehouse_service_zone_code"], "TOR-DT");
    assert_eq!(d[1]["time_slot"]["warehouse_service_zone_code"], "TOR-E");
    assert_eq!(d[1]["time_slot_datetime_start"], "2026-11-23T15:00:00-05:00");
    assert_eq!(cents(&pu["price"]), 7000);
    let o = &r.body["object"];
    assert_eq!(cents(&o["actual_total_price"]), 7000);
    assert_eq!(cents(&o["total_price"]), 7000);
    assert_eq!(cents(&o["total_tax"]), 910);
    assert_eq!(cents(&o["price_with_tax"]), 7910);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pinned_clock_moves_the_schedule() {
    let s = TestServer::start().await;
    // 10:30 Toronto: the AM slot closed at 08:00, the PM slot (12:00, margin 60) is open.
    s.app.clock.set("2026-11-23T15:30:00Z".parse().unwrap());
    let r = s.preview(&request(&[500.0])).await;
    assert_eq!(r.body["object"]["pick_ups"][0]["time_slot_code"], "TOR-PU-PM", "{}", r.body);
    assert_eq!(r.body["object"]["pick_ups"][0]["drop_offs"][0]["time_slot_code"], "TOR-DT-EV");
    // Saturday evening: Sunday is closed → Monday.
    s.app.clock.set("2026-11-28T23:00:00Z".parse().unwrap());
    let r = s.preview(&request(&[500.0])).await;
    assert_eq!(r.body["object"]["pick_ups"][0]["scheduled_date"], "2026-11-30");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn negotiated_prices_apply_to_their_client_only() {
    let s = TestServer::start().await;
    let (id, test, _, _) = s.new_client("Bulk Co").await;
    let settings = json!({"pricing": {"min_price": "20.00", "payment_type": {"id": 2, "code": "card", "name": "Card"},
        "sizes": [{"code": "small", "name": "Small", "max_grams": 3000, "price": "7.50", "note": "Up to 3 kg"}]}});
    let put = |body: serde_json::Value| {
        s.send(
            s.http
                .put(s.url(&format!("/admin/clients/{id}/settings")))
                .bearer_auth(crate::common::ADMIN_TOKEN)
                .json(&body),
        )
    };
    // Invalid terms are refused at the door, with the configuration's own checks.
    let mut bad = settings.clone();
    bad["pricing"]["sizes"] = json!([]);
    let r = put(bad).await;
    assert_eq!(r.status, 422, "{}", r.body);
    assert!(!r.error_at("pricing").is_empty());
    // Incomplete limits: every field left out is named, at its path.
    let r = put(json!({"limits": {"order_drop_offs": 0}})).await;
    assert_envelope(&r, 422);
    for field in ["order_parcels_per_drop_off", "preview_drop_offs", "preview_parcels_per_drop_off"] {
        assert_eq!(r.error_at(&format!("limits.{field}")), ["This field is required."], "{}", r.body);
    }
    let r = put(settings.clone()).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let r = s.post("/requests/preview", &test, &request(&[2500.0, 2500.0])).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let o = &r.body["object"];
    assert_eq!(cents(&o["actual_total_price"]), 1500);
    assert_eq!(cents(&o["total_price"]), 2000);
    assert_eq!(o["payment_type"]["code"], "card");
    // The demo client still pays the defaults: 2.5 kg is medium at 12.00.
    let r = s.preview(&request(&[2500.0, 2500.0])).await;
    assert_eq!(cents(&r.body["object"]["actual_total_price"]), 2400);
    // Negotiated limits: this client may order 2 drop-offs at once.
    let limits = json!({"order_drop_offs": 2, "order_parcels_per_drop_off": 5, "preview_drop_offs": 100, "preview_parcels_per_drop_off": 50});
    assert_eq!(put(json!({"pricing": settings["pricing"], "limits": limits})).await.status, 200);
    let mut two = request(&[500.0]);
    two["drop_offs"] = json!([two["drop_offs"][0].clone(), two["drop_offs"][0].clone()]);
    let r = s.post("/requests/sync", &test, &two).await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.body["object"]["shipments"].as_array().unwrap().len(), 2, "one shipment order per drop-off");
    assert_eq!(s.order(&two).await.status, 422, "the demo client keeps the default limit");
    // Back to the configuration's terms.
    assert_eq!(put(json!({})).await.status, 200);
    let r = s.post("/requests/preview", &test, &request(&[2500.0, 2500.0])).await;
    assert_eq!(cents(&r.body["object"]["actual_total_price"]), 2400);
    assert_eq!(
        s.send(
            s.http.put(s.url("/admin/clients/999/settings")).bearer_auth(crate::common::ADMIN_TOKEN).json(&json!({}))
        )
        .await
        .status,
        404
    );
}
