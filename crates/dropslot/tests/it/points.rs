//! Addresses with real coordinates (CONTRACT §11): given `lat`/`lng` checked against the
//! postal code's location and kept; address points loaded by the real `dropslot addresses
//! import` into the test server's database, then matched by street number and name; and
//! `located_by` in the reads and on the dashboard, never in the interface's own answers.

use serde_json::{Value, json};

use crate::cli::dropslot;
use crate::common::{DROP_OFF, PICK_UP, Reply, TestServer, request};
use crate::dashboard_http::Visitor;

/// The dataset's location of M5V (the drop-off's postal code) and of M5X (the pick-up's).
const M5V: (&str, &str) = ("43.6525", "-79.3686");
const M5X: (&str, &str) = ("43.6492", "-79.3823");

/// Writes `text` to a file of its own; the directory lives as long as the returned guard.
fn file(name: &str, text: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    let shown = path.display().to_string();
    (dir, shown)
}

/// `dropslot addresses import FILE` against the server's own database: (exit code, stdout,
/// stderr).
fn import(s: &TestServer, path: &str, extra: &[&str]) -> (Option<i32>, String, String) {
    let mut args = vec!["addresses", "import", path];
    args.extend_from_slice(extra);
    let out = dropslot(&s.db.url(), &args);
    let text = |b: &[u8]| String::from_utf8_lossy(b).trim().to_string();
    (out.status.code(), text(&out.stdout), text(&out.stderr))
}

fn own(lat: &str, lng: &str) -> (String, String) {
    (lat.to_string(), lng.to_string())
}

fn preview_address(r: &Reply, which: &str) -> (String, String) {
    let r = &r.body;
    let a = match which {
        "pick_up" => &r["object"]["pick_ups"][0]["address"],
        _ => &r["object"]["pick_ups"][0]["drop_offs"][0]["address"],
    };
    let s = |v: &Value| v.as_str().unwrap_or_else(|| panic!("lat/lng are strings in a preview: {r}")).to_string();
    (s(&a["lat"]), s(&a["lng"]))
}

/// `GET /shipments/{tracking}`'s `located_by`, and its drop-off coordinates.
async fn read_back(s: &TestServer, order: &Value) -> (Value, f64, f64) {
    let tracking = order["object"]["shipments"][0]["drop_off_shipment"]["unique_id"].as_str().unwrap();
    let r = s.get(&format!("/shipments/{tracking}"), &s.token).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let o = &r.body["object"];
    let a = &o["drop_off_address"];
    (o["located_by"].clone(), a["lat"].as_f64().unwrap(), a["lng"].as_f64().unwrap())
}

#[tokio::test]
async fn given_coordinates_far_from_the_postal_code_or_alone_are_refused_at_their_path() {
    let s = TestServer::start().await;
    // Montréal's coordinates for a Toronto drop-off: 422 at its lat, saying how far and the rule.
    let mut body = request(&[500.0]);
    body["drop_offs"][0]["address"]["lat"] = json!(45.5017);
    body["drop_offs"][0]["address"]["lng"] = json!(-73.5673);
    for path in ["/requests/preview", "/requests/sync", "/requests/async"] {
        let r = s.post(path, &s.token, &body).await;
        crate::common::assert_envelope(&r, 422);
        let msg = r.error_at("drop_offs.0.address.lat").join(" ");
        assert!(msg.contains("50") && msg.contains(" km ") && msg.contains("within 10 km"), "{path}: {msg}");
    }
    // 10.5 km north of the pick-up's postal code: refused too, at the pick-up's path.
    let mut body = request(&[500.0]);
    body["pick_up_address"]["lat"] = json!(43.6492 + 0.0945);
    body["pick_up_address"]["lng"] = json!(-79.3823);
    let r = s.preview(&body).await;
    assert!(r.error_at("pick_up_address.lat")[0].contains("10.6 km"), "{}", r.body);
    // One without the other, at the missing one's path; out of range, at its own.
    for (given, path) in [
        (json!({"lat": 43.64}), "drop_offs.0.address.lng"),
        (json!({"lng": -79.38}), "drop_offs.0.address.lat"),
        (json!({"lat": 91, "lng": -79.38}), "drop_offs.0.address.lat"),
        (json!({"lat": 43.64, "lng": -181}), "drop_offs.0.address.lng"),
    ] {
        let mut body = request(&[500.0]);
        for (k, v) in given.as_object().unwrap() {
            body["drop_offs"][0]["address"][k] = v.clone();
        }
        let r = s.order(&body).await;
        crate::common::assert_envelope(&r, 422);
        assert_eq!(r.body["errors"].as_object().unwrap().len(), 1, "{}", r.body);
        r.error_at(path);
    }
    // A string is a wrong JSON type: 400 at its path, like every field.
    let mut body = request(&[500.0]);
    body["drop_offs"][0]["address"]["lat"] = json!("43.64");
    body["drop_offs"][0]["address"]["lng"] = json!(-79.38);
    let r = s.preview(&body).await;
    assert_eq!(r.status, 400, "{}", r.body);
    r.error_at("drop_offs.0.address.lat");
    // Nothing was written or queued.
    assert_eq!(s.scalar("SELECT count(*) FROM orders"), 0);
    assert_eq!(s.scalar("SELECT count(*) FROM order_requests"), 0);
}

#[tokio::test]
async fn given_coordinates_are_shown_stored_and_read_back_as_given() {
    let s = TestServer::start().await;
    // Without coordinates, nothing changes: the postal codes' locations.
    let plain = s.preview(&request(&[500.0])).await;
    assert_eq!(plain.status, 200, "{}", plain.body);
    assert_eq!(preview_address(&plain, "drop_off"), own(M5V.0, M5V.1));
    assert_eq!(preview_address(&plain, "pick_up"), own(M5X.0, M5X.1));

    let mut body = request(&[500.0]);
    body["drop_offs"][0]["address"]["lat"] = json!(43.641_938);
    body["drop_offs"][0]["address"]["lng"] = json!(-79.386_012);
    body["pick_up_address"]["lat"] = json!(43.6487);
    body["pick_up_address"]["lng"] = json!(-79.3817);
    let r = s.preview(&body).await;
    assert_eq!(r.status, 200, "{}", r.body);
    // Strings in a preview, as the interface shows lat/lng there; the same prices as before.
    assert_eq!(preview_address(&r, "drop_off"), own("43.641938", "-79.386012"));
    assert_eq!(preview_address(&r, "pick_up"), own("43.6487", "-79.3817"));
    assert_eq!(r.body["object"]["price_with_tax"], plain.body["object"]["price_with_tax"]);
    assert!(!r.body.to_string().contains("located_by"), "the preview's shape is the interface's");

    let o = s.order(&body).await;
    assert_eq!(o.status, 201, "{}", o.body);
    let a = &o.body["object"]["shipments"][0]["drop_off_address"];
    assert_eq!((a["lat"].as_f64(), a["lng"].as_f64()), (Some(43.641_938), Some(-79.386_012)), "numbers in an order");
    assert!(a.get("located_by").is_none() && !o.body.to_string().contains("located_by"), "{}", o.body);

    let (by, lat, lng) = read_back(&s, &o.body).await;
    assert_eq!(by, json!({"pick_up_address": "given", "drop_off_address": "given"}));
    assert_eq!((lat, lng), (43.641_938, -79.386_012));
    let unique = o.body["object"]["unique_id"].as_str().unwrap();
    let one = s.get(&format!("/orders/{unique}"), &s.token).await;
    assert_eq!(one.body["object"]["shipments"][0]["located_by"]["drop_off_address"], "given", "{}", one.body);
    // An order without coordinates reads as located by its postal codes.
    let plain = s.order(&request(&[500.0])).await;
    let list = s.get("/orders", &s.token).await;
    let bys: Vec<&Value> =
        list.body["object"]["orders"].as_array().unwrap().iter().map(|o| &o["shipments"][0]["located_by"]).collect();
    assert_eq!(bys, [&json!({"pick_up_address": "postal_code", "drop_off_address": "postal_code"}), &by]);
    assert_eq!(read_back(&s, &plain.body).await.1.to_string(), "43.6525");
}

#[tokio::test]
async fn an_imported_point_beats_the_postal_code_and_a_re_import_adds_nothing() {
    let s = TestServer::start().await;
    let before = s.preview(&request(&[500.0])).await;
    assert_eq!(preview_address(&before, "drop_off"), own(M5V.0, M5V.1));
    // The drop-off's street folded another way; a point of the same street in another FSA
    // (never taken), and a unit of the same building (the plain point wins).
    let (_dir, path) = file(
        "points.csv",
        "number,street,unit,city,postal_code,lat,lng\n\
         290,BREMNER BOULEVARD,,Toronto,M5V 3L9,43.642566,-79.387057\n\
         290,Bremner Blvd,Suite 5,Toronto,M5V 3L9,43.6427,-79.3872\n\
         290,Bremner Blvd.,,Toronto,M4W 1A1,43.66,-79.38\n\
         \n\
         12,Élan Crescent,,,,43.7,-79.4\n",
    );
    let (code, out, err) = import(&s, &path, &[]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out, "4 points read, 4 new, 0 skipped");
    assert!(err.contains("address points (CSV): 4 read, 4 new, 0 skipped"), "progress on stderr: {err}");
    assert_eq!(s.scalar("SELECT count(*) FROM address_points"), 4);

    // The very next request sees the import (the CLI moved the cache epoch).
    let r = s.preview(&request(&[500.0])).await;
    assert_eq!(preview_address(&r, "drop_off"), own("43.642566", "-79.387057"), "{}", r.body);
    assert_eq!(preview_address(&r, "pick_up"), own(M5X.0, M5X.1), "no point for 100 King St W here");
    let o = s.order(&request(&[500.0])).await;
    assert_eq!(o.status, 201, "{}", o.body);
    let (by, lat, lng) = read_back(&s, &o.body).await;
    assert_eq!(by, json!({"pick_up_address": "postal_code", "drop_off_address": "point"}));
    assert_eq!((lat, lng), (43.642_566, -79.387_057));

    // Another number on the street keeps the postal code's location; given coordinates beat
    // a point.
    let mut other = request(&[500.0]);
    other["drop_offs"][0]["address"]["text"] = json!("300 Bremner Blvd, Toronto, ON M5V 3L9");
    assert_eq!(preview_address(&s.preview(&other).await, "drop_off"), own(M5V.0, M5V.1));
    // That miss was remembered; a later import that adds the address ends it at once.
    let (_more, more) =
        file("more.csv", "number,street,unit,city,postal_code,lat,lng\n300,Bremner Blvd,,,M5V,43.6417,-79.3855\n");
    assert_eq!(import(&s, &more, &[]).1, "1 points read, 1 new, 0 skipped");
    assert_eq!(preview_address(&s.preview(&other).await, "drop_off"), own("43.6417", "-79.3855"));
    let mut given = request(&[500.0]);
    given["drop_offs"][0]["address"]["lat"] = json!(43.65);
    given["drop_offs"][0]["address"]["lng"] = json!(-79.37);
    assert_eq!(preview_address(&s.preview(&given).await, "drop_off"), own("43.65", "-79.37"));

    // Again: nothing new.
    let (code, out, _) = import(&s, &path, &["--batch-size", "2"]);
    assert_eq!((code, out.as_str()), (Some(0), "4 points read, 0 new, 0 skipped"));
    assert_eq!(s.scalar("SELECT count(*) FROM address_points"), 5);

    // The dashboard's shipment page says how the address was located.
    let tracking = o.body["object"]["shipments"][0]["drop_off_shipment"]["unique_id"].as_str().unwrap();
    let mut v = Visitor::new(&s);
    v.sign_in(&s.token).await;
    let page = v.get(&format!("/dashboard/shipments/{tracking}")).await;
    assert!(page.body.contains(r#"data-located-by="point""#), "{}", page.body);
    assert!(page.body.contains("Address point") && page.body.contains("43.642566, -79.387057"));
}

#[tokio::test]
async fn a_malformed_line_fails_with_its_line_number_and_earlier_batches_stay() {
    let s = TestServer::start().await;
    let (_dir, path) = file(
        "bad.csv",
        "number,street,unit,city,postal_code,lat,lng\n\
         1,Maple St,,,M5V,43.65,-79.37\n\
         3,Maple St,,,M5V,43.65,-79.37\n\
         5,Maple St,,,M5V,43.65,-79.37\n\
         7,Maple St,,,M5V,north,-79.37\n",
    );
    let (code, out, err) = import(&s, &path, &["--batch-size", "2"]);
    assert_eq!(code, Some(1), "{out} {err}");
    let last = err.lines().last().unwrap_or_default();
    assert_eq!(last, format!("dropslot: {path}:5: lat \"north\" is not a number"));
    // The first batch (lines 2 and 3) committed; the one holding the bad line did not.
    assert_eq!(s.scalar("SELECT count(*) FROM address_points"), 2);
    // Not an address-point file at all: line 1, and nothing written.
    let (_d, other) = file("other.csv", "\n\nid,lat,lon\n1,2,3\n");
    let (code, _, err) = import(&s, &other, &[]);
    assert_eq!(code, Some(1));
    assert!(err.contains(&format!("{other}:3: not an address-point file")), "{err}");
    assert_eq!(s.scalar("SELECT count(*) FROM address_points"), 2);
}

#[tokio::test]
async fn geojson_lines_import_like_openaddresses_writes_them() {
    let s = TestServer::start().await;
    let line = |n: &str, street: &str, post: &str, lng: f64, lat: f64| {
        json!({"type": "Feature", "properties": {"hash": "0", "number": n, "street": street, "unit": "", "city": "",
            "district": "", "region": "ON", "postcode": post, "id": ""},
            "geometry": {"type": "Point", "coordinates": [lng, lat]}})
        .to_string()
    };
    let text = [
        line("100", "KING ST W", "", -79.381_71, 43.648_72),
        line("", "KING ST W", "", -79.38, 43.65),
        line("290", "Bremner Boulevard", "M5V", -79.3871, 43.6426),
    ]
    .join("\n");
    let (_dir, path) = file("points.geojson", &text);
    let (code, out, err) = import(&s, &path, &[]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out, "3 points read, 2 new, 1 skipped");
    assert!(err.contains("(GeoJSON lines)"), "{err}");
    let r = s.preview(&request(&[500.0])).await;
    assert_eq!(preview_address(&r, "pick_up"), own("43.64872", "-79.38171"), "{}", r.body);
    assert_eq!(preview_address(&r, "drop_off"), own("43.6426", "-79.3871"));
}

#[tokio::test]
async fn the_shipped_sample_places_the_demo_addresses() {
    let s = TestServer::start().await;
    let sample = concat!(env!("CARGO_MANIFEST_DIR"), "/../dropslot-core/data/address-points-sample.csv");
    let (code, out, err) = import(&s, sample, &[]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.starts_with("2052 points read, 2052 new"), "{out}");
    let body = json!({
        "pick_up_address": {"text": PICK_UP},
        "drop_offs": [
            {"address": {"text": DROP_OFF}, "parcels": [{"unit": "g", "values": 500}]},
            {"address": {"text": "1 Maple St, Toronto, ON M5V 2T6"}, "parcels": [{"unit": "g", "values": 500}]},
        ]
    });
    let r = s.preview(&body).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(preview_address(&r, "pick_up"), own("43.6487", "-79.3817"));
    assert_eq!(preview_address(&r, "drop_off"), own("43.6426", "-79.3871"));
    let generated = &r.body["object"]["pick_ups"][0]["drop_offs"][1]["address"];
    assert_ne!((generated["lat"].as_str(), generated["lng"].as_str()), (Some(M5V.0), Some(M5V.1)));
}

/// Rows written before `located_by` existed hold no such key: they read as `postal_code`.
#[tokio::test]
async fn stored_addresses_without_located_by_read_as_postal_code() {
    let s = TestServer::start().await;
    let mut body = request(&[500.0]);
    body["drop_offs"][0]["address"]["lat"] = json!(43.6419);
    body["drop_offs"][0]["address"]["lng"] = json!(-79.386);
    let o = s.order(&body).await;
    assert_eq!(o.status, 201);
    assert_eq!(read_back(&s, &o.body).await.0["drop_off_address"], "given");
    let strip = |table: &str| match s.sqlite_file() {
        Some(c) => {
            c.execute(&format!("UPDATE {table} SET address_json = json_remove(address_json, '$.located_by')"), [])
                .unwrap();
        }
        None => {
            crate::common::psql(
                &s.db.url(),
                &format!("UPDATE {table} SET address_json = (address_json::jsonb - 'located_by')::text"),
            );
        }
    };
    strip("drop_off_shipments");
    strip("pick_up_shipments");
    assert_eq!(s.scalar("SELECT count(*) FROM drop_off_shipments WHERE address_json LIKE '%located_by%'"), 0);
    let (by, lat, _) = read_back(&s, &o.body).await;
    assert_eq!(by, json!({"pick_up_address": "postal_code", "drop_off_address": "postal_code"}));
    assert_eq!(lat.to_string(), "43.6419", "the coordinates stay as stored");
}
