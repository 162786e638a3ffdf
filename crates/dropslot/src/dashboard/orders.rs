//! Orders and shipments: the searchable list, a shipment's page (timeline, parcels, prices,
//! labels, tracking link), parcel deletion and, in test mode, the sandbox scenarios.

use askama::Template;
use axum::extract::{RawQuery, State};
use axum::http::StatusCode;

use super::{Frame, PageResult, Posted, Session, fail, page, see_other};
use crate::app::App;
use crate::error::{Error, FieldErrors};
use crate::http::PathParam;
use crate::http::page::{cursor, parse_cursor};
use crate::labels::LabelLink;
use dropslot_core::geo::LocatedBy;
use dropslot_core::ids::CustomCode;
use dropslot_core::money::Money;
use dropslot_core::shipments::{Scenario, Status};
use dropslot_core::time::{city_zone, local};
use dropslot_store::{LabelKind, OrderFilter, Selection, StoredShipment, Visibility};

const PAGE_SIZE: usize = 20;
const MAX_SEARCH: usize = 200;

#[derive(Template)]
#[template(path = "dashboard/orders.html")]
struct OrdersPage<'a> {
    frame: Option<Frame>,
    q: &'a str,
    status: &'a str,
    date: &'a str,
    statuses: Vec<(&'static str, &'static str)>,
    rows: Vec<OrderRow>,
    errors: Vec<(String, String)>,
    /// The query string of the next (older) page.
    next: Option<String>,
    /// The query string of the CSV export of every order these filters find.
    export: String,
}

struct OrderRow {
    order: String,
    created_at: String,
    tracking_code: String,
    receiver: String,
    status: &'static str,
    status_label: &'static str,
    scheduled_date: String,
    slot: String,
    price: String,
}

/// The list's query: `q`, `status`, `date` and `cursor`, each checked (an unknown status or a
/// malformed date is an error on the page, at its field, never ignored).
pub(super) fn filter(query: &str) -> (OrderFilter, Option<i64>, FieldErrors, [String; 3]) {
    let mut f = OrderFilter::default();
    let mut errors = FieldErrors::new();
    let (mut before, mut raw) = (None, [String::new(), String::new(), String::new()]);
    for (k, v) in url::form_urlencoded::parse(query.as_bytes()) {
        let v = v.trim().to_string();
        match k.as_ref() {
            // An empty filter field means "any".
            "status" | "date" | "cursor" if v.is_empty() => {}
            "q" if v.chars().count() > MAX_SEARCH => {
                errors.add("q", format!("Search for at most {MAX_SEARCH} characters."));
            }
            "q" => {
                f.text = (!v.is_empty()).then(|| v.clone());
                raw[0] = v;
            }
            "status" => match Status::ALL.into_iter().find(|s| s.as_str() == v) {
                Some(s) => {
                    f.status = Some(s);
                    raw[1] = v;
                }
                None => errors.add("status", "Choose a status from the list."),
            },
            "date" => {
                if v.len() == 10 && v.parse::<jiff::civil::Date>().is_ok() {
                    f.date = Some(v.clone());
                    raw[2] = v;
                } else {
                    errors.add("date", "The date must be a calendar date, YYYY-MM-DD.");
                }
            }
            "cursor" => match parse_cursor(&v, "o") {
                Some(id) => before = Some(id),
                None => errors.add("cursor", "This page link is not valid; start from the first page."),
            },
            _ => {}
        }
    }
    (f, before, errors, raw)
}

fn price(m: Money) -> String {
    format!("${m}")
}

/// Orders newest first, one row per drop-off shipment, filtered by status, scheduled date,
/// and a search by tracking code, order id, custom code or receiver name.
pub(super) async fn list(State(app): State<App>, session: Session, RawQuery(query): RawQuery) -> PageResult {
    let (filter, before, errors, [q, status, date]) = filter(query.as_deref().unwrap_or(""));
    let mut rows = Vec::new();
    let mut next = None;
    if errors.is_empty() {
        let mut orders = app
            .store
            .find_orders(session.scope, &filter, before, PAGE_SIZE + 1)
            .await
            .map_err(|e| fail(&session)(e.into()))?;
        if orders.len() > PAGE_SIZE {
            orders.truncate(PAGE_SIZE);
            next = orders.last().map(|o| {
                url::form_urlencoded::Serializer::new(String::new())
                    .append_pair("q", &q)
                    .append_pair("status", &status)
                    .append_pair("date", &date)
                    .append_pair("cursor", &cursor("o", o.id.0))
                    .finish()
            });
        }
        for o in orders {
            for s in &o.shipments {
                let (status_label, _) = crate::tracking::label(s.drop_off.status);
                rows.push(OrderRow {
                    order: o.unique_id.clone(),
                    created_at: o.created_at.clone(),
                    tracking_code: s.drop_off.unique_id.clone(),
                    receiver: s.drop_off.address.person_name.clone().unwrap_or_default(),
                    status: s.drop_off.status.as_str(),
                    status_label,
                    scheduled_date: s.drop_off.scheduled_date.clone(),
                    slot: s.drop_off.slot_name.clone(),
                    price: price(s.totals.price_with_tax),
                });
            }
        }
    }
    let statuses = Status::ALL.into_iter().map(|s| (s.as_str(), crate::tracking::label(s).0)).collect();
    let status_code = if errors.is_empty() { StatusCode::OK } else { StatusCode::UNPROCESSABLE_ENTITY };
    let export = url::form_urlencoded::Serializer::new(String::new())
        .append_pair("q", &q)
        .append_pair("status", &status)
        .append_pair("date", &date)
        .finish();
    let body = OrdersPage {
        frame: Some(session.frame("orders")),
        export,
        q: &q,
        status: &status,
        date: &date,
        statuses,
        rows,
        errors: super::field_list(&errors),
        next,
    };
    Ok(page(status_code, body.render()))
}

#[derive(Template)]
#[template(path = "dashboard/shipment.html")]
struct ShipmentPage {
    frame: Option<Frame>,
    code: String,
    order: String,
    status: &'static str,
    status_label: &'static str,
    pick_up_status: &'static str,
    scheduled_date: String,
    slot: String,
    window: String,
    city: String,
    receiver: String,
    phone: String,
    address: String,
    /// How the drop-off address was located (CONTRACT §11), its label and coordinates.
    located_by: &'static str,
    located_label: &'static str,
    coordinates: String,
    attempts: u32,
    max_attempts: u32,
    tracking_url: String,
    timeline: Vec<TimelineRow>,
    parcels: Vec<ParcelRow>,
    prices: Vec<(&'static str, String)>,
    labels: Vec<LabelGroup>,
    deletable: bool,
    scenarios: Vec<(&'static str, &'static str)>,
    notice: Option<String>,
    /// The recipient messages (CONTRACT §14), recipients masked.
    messages: Vec<MessageRow>,
    /// Failed deliveries (CONTRACT §15): what the merchant may decide now.
    decisions: Decisions,
}

/// What the merchant may decide on this shipment now, and what it shows of the failures.
struct Decisions {
    /// `failed` and nothing booked: the merchant decides.
    awaiting: bool,
    last_failure: String,
    instruction: String,
    /// The return stop, in words.
    return_stop: String,
    /// `(value, label)`: the zone's open slots, while the slot can change.
    offers: Vec<(String, String)>,
    can_return: bool,
    can_cancel: bool,
}

impl Decisions {
    /// The slots offered are the change page's: open, with room, not the one held.
    async fn of(app: &App, mode: dropslot_store::Mode, s: &StoredShipment) -> crate::error::Result<Decisions> {
        use dropslot_core::attempts;
        let d = &s.drop_off;
        let offers = if attempts::slot_change_open(d.status) {
            crate::attempts::offered(app, mode, s)
                .await?
                .into_iter()
                .filter(|o| !o.current)
                .map(|o| {
                    let o = o.offer;
                    (format!("{} {}", o.at.date, o.at.slot), format!("{} · {}", o.at.date, o.name))
                })
                .collect()
        } else {
            Vec::new()
        };
        let failed = dropslot_core::shipments::Status::Failed;
        Ok(Decisions {
            awaiting: d.status == failed,
            last_failure: s
                .events
                .iter()
                .rev()
                .find(|e| e.to == failed)
                .and_then(|e| e.reason.clone())
                .unwrap_or_default(),
            instruction: d.instruction.clone().unwrap_or_default(),
            return_stop: d
                .return_slot
                .as_ref()
                .map(|r| format!("{}, {} (failed return attempts: {})", r.date, r.slot_name, d.return_attempts))
                .unwrap_or_default(),
            offers,
            can_return: attempts::returnable(d.status),
            can_cancel: attempts::cancellable(d.status),
        })
    }

    fn any(&self) -> bool {
        !self.offers.is_empty() || self.can_return || self.can_cancel
    }
}

struct MessageRow {
    trigger: &'static str,
    channel: &'static str,
    recipient: String,
    state: String,
    attempts: i64,
    last_error: String,
    sent_at: String,
}

struct TimelineRow {
    seq: u32,
    status: &'static str,
    label: &'static str,
    at: String,
    actor: String,
    reason: String,
    attempt: String,
    proof: Vec<ProofRow>,
}

/// One proof of delivery: an image when its value is a proof URL of this service (shown from
/// `/dashboard/proofs/…`, which the session's cookie reaches), else its text as given.
struct ProofRow {
    kind: String,
    value: String,
    image: Option<String>,
    alt: &'static str,
}

fn proof_row(base_url: &str, p: &dropslot_core::shipments::Proof) -> ProofRow {
    use dropslot_core::shipments::ProofKind;
    let (kind, alt) = match p.kind {
        ProofKind::ReceiverName => ("receiver name", ""),
        ProofKind::Signature => ("signature", "Signature of the receiver"),
        ProofKind::Photo => ("photo", "Photo taken at the delivery"),
    };
    let image = match p.kind {
        ProofKind::ReceiverName => None,
        ProofKind::Signature | ProofKind::Photo => {
            crate::proofs::token_of(base_url, &p.value).map(|t| format!("/dashboard/proofs/{t}"))
        }
    };
    ProofRow { kind: kind.into(), value: p.value.clone(), image, alt }
}

/// `GET /dashboard/proofs/{token}`: a proof image of one of the session's shipments (the same
/// rule as `GET /proofs/{token}`: anything else is the 404 page).
pub(super) async fn proof(
    State(app): State<App>,
    session: Session,
    PathParam(token): PathParam<String>,
    headers: axum::http::HeaderMap,
) -> PageResult {
    let file = crate::proofs::readable(&app, session.scope, &token).await.map_err(fail(&session))?;
    Ok(crate::proofs::image_response(file, &headers))
}

struct ParcelRow {
    pick_up_code: String,
    custom_code: String,
    size: String,
}

struct LabelGroup {
    name: String,
    links: Vec<LabelLink>,
}

/// How an address was located, for a person: how precise its coordinates are.
fn located_label(by: LocatedBy) -> &'static str {
    match by {
        LocatedBy::Point => "Address point (street number and name matched)",
        LocatedBy::Given => "Coordinates given with the order",
        LocatedBy::PostalCode => "Postal code (approximate: the area's centre)",
    }
}

fn scenario_name(s: Scenario) -> &'static str {
    match s {
        Scenario::Happy => "Delivered (happy path)",
        Scenario::Reattempt => "Failed once, then delivered",
        Scenario::Fail => "Failed every attempt, returned",
        Scenario::BundlePickUpShipments => "Bundled for pick-up",
        Scenario::PickedPickUpShipments => "Picked up",
        Scenario::DeliveringDropOffShipments => "Out for delivery",
    }
}

async fn shipment_of(app: &App, session: &Session, code: &str) -> Result<StoredShipment, axum::response::Response> {
    let found = if code.len() <= 64 && code.bytes().all(|b| b.is_ascii_alphanumeric()) {
        app.store.shipment(Visibility::Tenant(session.scope), code).await.map_err(|e| fail(session)(e.into()))?
    } else {
        None
    };
    found.ok_or_else(|| fail(session)(Error::NotFound))
}

/// One drop-off shipment: its status timeline with actor, reason and proof; its parcels and
/// their labels; the price breakdown; the public tracking link.
pub(super) async fn shipment(
    State(app): State<App>,
    session: Session,
    PathParam(code): PathParam<String>,
    RawQuery(query): RawQuery,
) -> PageResult {
    let s = shipment_of(&app, &session, &code).await?;
    let base = &app.settings.base_url;
    let tz = city_zone(&app.settings.area, &s.drop_off.city);
    let d = &s.drop_off;
    let (status_label, _) = crate::tracking::label(d.status);
    let timeline = s
        .events
        .iter()
        .map(|e| TimelineRow {
            seq: e.seq,
            status: e.to.as_str(),
            label: crate::tracking::label(e.to).0,
            at: local(e.at, &tz),
            actor: e.actor.as_str().to_string(),
            reason: e.reason.clone().unwrap_or_default(),
            attempt: e.attempt.map(|a| a.to_string()).unwrap_or_default(),
            proof: e.proof.iter().map(|p| proof_row(base, p)).collect(),
        })
        .collect();
    let mut labels = vec![
        LabelGroup {
            name: format!("Pick-up {}", s.pick_up.unique_id),
            links: crate::labels::links(base, LabelKind::PickUp, &s.pick_up.label_token).0,
        },
        LabelGroup {
            name: format!("Drop-off {}", d.unique_id),
            links: crate::labels::links(base, LabelKind::DropOff, &d.label_token).0,
        },
    ];
    for p in &s.parcels {
        labels.push(LabelGroup {
            name: format!("Parcel {}", p.custom_code.as_deref().unwrap_or(&p.pick_up_code)),
            links: crate::labels::links(base, LabelKind::Parcel, &p.label_token).0,
        });
    }
    let t = &s.totals;
    let prices = vec![
        ("Parcels", price(t.actual_total_price)),
        ("Tax on the parcels", price(t.actual_total_tax)),
        ("Parcels with tax", price(t.actual_price_with_tax)),
        ("Price charged (the order's minimum applied)", price(t.total_price)),
        ("Tax charged", price(t.total_tax)),
        ("Total charged", price(t.price_with_tax)),
    ];
    let notice = query.as_deref().and_then(|q| {
        url::form_urlencoded::parse(q.as_bytes()).find(|(k, _)| k == "done").map(|(_, v)| match v.as_ref() {
            "deleted" => "Parcel deleted.".to_string(),
            "scenario" => "Scenario applied.".to_string(),
            "rescheduled" => "Delivery moved to the new slot.".to_string(),
            "returned" => "Return to you booked.".to_string(),
            "cancelled" => "Shipment cancelled.".to_string(),
            _ => String::new(),
        })
    });
    let messages = crate::notifications::views(&app, session.scope, &d.unique_id)
        .await
        .map_err(fail(&session))?
        .into_iter()
        .map(|m| MessageRow {
            trigger: m.trigger.as_str(),
            channel: m.channel.as_str(),
            recipient: m.recipient,
            state: m.state,
            attempts: m.attempts,
            last_error: m.last_error.unwrap_or_default(),
            sent_at: m.sent_at.unwrap_or_default(),
        })
        .collect();
    let decisions = Decisions::of(&app, session.scope.mode, &s).await.map_err(fail(&session))?;
    let body = ShipmentPage {
        decisions,
        messages,
        frame: Some(session.frame("orders")),
        code: d.unique_id.clone(),
        order: s.order_unique_id.clone(),
        status: d.status.as_str(),
        status_label,
        pick_up_status: s.pick_up.status.as_str(),
        scheduled_date: d.scheduled_date.clone(),
        slot: d.slot_name.clone(),
        window: format!("{} – {}", d.start_at, d.end_at),
        city: d.city.clone(),
        receiver: d.address.person_name.clone().unwrap_or_default(),
        phone: d.address.person_phone.clone().unwrap_or_default(),
        address: d.address.text.clone(),
        located_by: d.address.located_by.as_str(),
        located_label: located_label(d.address.located_by),
        coordinates: format!("{}, {}", d.address.lat, d.address.lng),
        attempts: d.attempts,
        max_attempts: d.max_attempts,
        tracking_url: crate::labels::tracking_url(base, &d.unique_id),
        timeline,
        parcels: s
            .parcels
            .iter()
            .map(|p| ParcelRow {
                pick_up_code: p.pick_up_code.clone(),
                custom_code: p.custom_code.clone().unwrap_or_default(),
                size: p.size_code.clone(),
            })
            .collect(),
        prices,
        labels,
        deletable: d.status.allows_parcel_deletion(),
        scenarios: if session.scope.mode == dropslot_store::Mode::Test {
            Scenario::ALL.into_iter().map(|s| (s.slug(), scenario_name(s))).collect()
        } else {
            Vec::new()
        },
        notice: notice.filter(|n| !n.is_empty()),
    };
    Ok(page(StatusCode::OK, body.render()))
}

/// Deletes a parcel by its custom code, through the API's own deletion.
pub(super) async fn delete_parcel(
    State(app): State<App>,
    PathParam((code, custom)): PathParam<(String, String)>,
    Posted { session, .. }: Posted,
) -> PageResult {
    let s = shipment_of(&app, &session, &code).await?;
    let custom = CustomCode::parse(&custom)
        .filter(|c| s.parcels.iter().any(|p| p.custom_code.as_deref() == Some(c.as_str())))
        .ok_or_else(|| fail(&session)(Error::NotFound))?;
    crate::orders::delete::delete_parcel(&app, session.scope, &custom).await.map_err(fail(&session))?;
    // With its last parcel the shipment is deleted too; its page still shows it, as deleted.
    Ok(see_other(&format!("/dashboard/shipments/{code}?done=deleted")))
}

/// Runs a sandbox scenario on this one shipment (test mode only), through the sandbox's own
/// code; a shipment the scenario cannot move says why.
pub(super) async fn scenario(
    State(app): State<App>,
    PathParam((code, slug)): PathParam<(String, String)>,
    Posted { session, .. }: Posted,
) -> PageResult {
    let scenario = Scenario::from_slug(&slug).ok_or_else(|| fail(&session)(Error::NotFound))?;
    let s = shipment_of(&app, &session, &code).await?;
    let selection = Selection { unique_ids: vec![s.drop_off.unique_id.clone()], ids: Vec::new(), date: None };
    let outcome = crate::sandbox::run(&app, session.scope, scenario, selection).await.map_err(fail(&session))?;
    if outcome.affected.is_empty() {
        let why = outcome.skipped.first().map_or("No shipment matched.".to_string(), |s| s.reason.clone());
        return Err(fail(&session)(Error::Conflict(format!("The scenario could not move this shipment: {why}"))));
    }
    Ok(see_other(&format!("/dashboard/shipments/{code}?done=scenario")))
}
