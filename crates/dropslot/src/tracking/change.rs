//! The recipient's change page `/track/{tracking_code}/change/{token}` (CONTRACT §15): a plain
//! form, no script, offering the bookable drop-off slots of the shipment's zone (§10: a full
//! one is left out) and a delivery instruction, applied in one store transaction. The token is
//! the credential (`token.rs`): a wrong one gets the unknown code's 404.

use askama::Template;
use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use jiff::civil::Date;

use super::token;
use super::view::{CSS, Forms, clock, html, label, missing, plausible, secure};
use crate::app::App;
use crate::error::{ErrorEnvelope, Result};
use crate::http::{FormBody, PathParam};
use crate::ratelimit::PublicLimit;
use dropslot_core::attempts::{self, Changer, Offered};
use dropslot_store::{ChangeOutcome, ChangeTarget, DeliveryChange, Mode, StoredShipment};

pub fn routes() -> axum::Router<App> {
    axum::Router::new().route("/track/{tracking_code}/change/{token}", axum::routing::get(show).post(apply))
}

/// The change form's fields.
#[derive(Default, utoipa::ToSchema)]
struct ChangeForm {
    /// The new slot, `YYYY-MM-DD/<time_slot_code>` (one of the page's choices); absent, or the
    /// slot held now: the slot stays.
    slot: Option<String>,
    /// The delivery instruction (at most 500 characters, no line breaks or other control
    /// characters); empty clears it, absent leaves it.
    instruction: Option<String>,
    /// The slot the page showed, `YYYY-MM-DD/<time_slot_code>`: nothing is changed if the
    /// shipment has moved meanwhile.
    expect: Option<String>,
}

/// A slot as the form carries it.
fn slot_value(date: &str, code: &str) -> String {
    format!("{date}/{code}")
}

fn parse_slot(value: &str) -> Option<(Date, &str)> {
    let (date, code) = value.split_once('/')?;
    Some((date.parse().ok().filter(|_| date.len() == 10)?, code))
}

/// The shipment whose page this is, when the token is its own.
async fn shipment(app: &App, code: &str, given: &str) -> Result<Option<(Mode, StoredShipment)>> {
    if !plausible(code) {
        return Ok(None);
    }
    let found = app.store.shipment_by_code(code).await?;
    Ok(found.filter(|(_, s)| token::matches(&s.drop_off.label_token, code, given)))
}

#[utoipa::path(get, path = "/track/{tracking_code}/change/{token}", tag = "Tracking", operation_id = "change_delivery_page",
    summary = "The recipient's change page",
    description = "Public; the token (from the recipient's messages and the tracking page) is the credential. An HTML form, no script: the bookable drop-off slots of the shipment's zone from today within the booking horizon (full ones left out, with what remains in limited ones; not before the pick-up's date while the parcel is not picked up) while the shipment is not yet out for delivery, and a delivery instruction until it is served. Never a name, phone, street or price. `?saved` adds the confirmation shown after a change. Rate limited per client address.",
    params(("tracking_code" = String, Path, description = "The drop-off shipment's tracking code."),
        ("token" = String, Path, description = "The shipment's change token: 32 hex characters.")),
    responses(
        (status = 200, description = "The page.", content_type = "text/html", body = String,
            headers(("Cache-Control" = String, description = "`no-store`."))),
        (status = 404, description = "No such tracking code, or not its token: the tracking page's not-found page.", content_type = "text/html", body = String),
        (status = 429, description = "Over the rate limit of this client address.", body = ErrorEnvelope),
    ))]
#[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
async fn show(
    State(app): State<App>,
    _: PublicLimit,
    PathParam((code, given)): PathParam<(String, String)>,
    RawQuery(query): RawQuery,
) -> Result<Response> {
    let Some((mode, s)) = shipment(&app, &code, &given).await? else { return Ok(missing()) };
    let note = (query.as_deref() == Some("saved")).then_some(Note::Saved);
    render(&app, mode, &s, Said { note, ..Said::default() }, &ChangeForm::default()).await
}

#[utoipa::path(post, path = "/track/{tracking_code}/change/{token}", tag = "Tracking", operation_id = "change_delivery",
    summary = "Apply the recipient's change",
    description = "The change page's form. A new slot takes a place in it and gives the old one back in one transaction, and emits `same.shipment.rescheduled` (`changed_by`: `recipient`); the instruction is saved with it. Nothing is changed when the shipment is no longer in the slot `expect` names (two changes at once: one wins, the other is told it changed meanwhile).",
    params(("tracking_code" = String, Path, description = "The drop-off shipment's tracking code."),
        ("token" = String, Path, description = "The shipment's change token.")),
    request_body(content = ChangeForm, content_type = "application/x-www-form-urlencoded"),
    responses(
        (status = 303, description = "Changed: to the page with its confirmation (`?saved`)."),
        (status = 404, description = "No such tracking code, or not its token.", content_type = "text/html", body = String),
        (status = 409, description = "The page again, saying why in words: out for delivery (no new slot), served (no instruction), or changed meanwhile.", content_type = "text/html", body = String),
        (status = 415, description = "Not a form (`application/x-www-form-urlencoded`).", body = ErrorEnvelope),
        (status = 422, description = "The page again, naming the field: a slot that is full, closed or not offered; an instruction over 500 characters or with a control character.", content_type = "text/html", body = String),
        (status = 429, description = "Over the rate limit of this client address.", body = ErrorEnvelope),
    ))]
#[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
async fn apply(
    State(app): State<App>,
    _: PublicLimit,
    PathParam((code, given)): PathParam<(String, String)>,
    form: FormBody,
) -> Result<Response> {
    let Some((mode, s)) = shipment(&app, &code, &given).await? else { return Ok(missing()) };
    let sent = ChangeForm {
        slot: form.get("slot").map(str::to_string),
        instruction: form.get("instruction").map(str::to_string),
        expect: form.get("expect").map(str::to_string),
    };
    let not_before = crate::attempts::not_before(&s)?;
    let change = match asked(&app, &s, &sent, not_before) {
        Ok(change) => change,
        Err(said) => return render(&app, mode, &s, said, &sent).await,
    };
    let target = ChangeTarget::Code(code.clone());
    let said = match app.store.change_delivery(target, change, Changer::Recipient, app.clock.now()).await? {
        ChangeOutcome::Changed(_) => {
            // The fill moved: the next quote and page read it anew.
            crate::capacity::forget(&app);
            let to = format!("{}?saved", token::change_path(&code, &s.drop_off.label_token));
            return Ok(secure(Redirect::to(&to).into_response(), "no-store", Forms::ToItself));
        }
        ChangeOutcome::NotFound => return Ok(missing()),
        ChangeOutcome::Closed(status) => Said::refused(StatusCode::CONFLICT, attempts::closed_because(status)),
        ChangeOutcome::Stale(..) => Said::refused(StatusCode::CONFLICT, STALE.into()),
        ChangeOutcome::Refused(_) => Said::refused(StatusCode::CONFLICT, REFUSED.into()),
        ChangeOutcome::Full | ChangeOutcome::NoRoom => Said::on_slot(FULL.into()),
    };
    // The page as the shipment stands now, with the instruction as typed.
    let Some((mode, s)) = app.store.shipment_by_code(&code).await? else { return Ok(missing()) };
    render(&app, mode, &s, said, &ChangeForm { slot: None, ..sent }).await
}

const STALE: &str = "Your delivery was changed meanwhile, in another window or by the sender: here it is as it stands now. Check it and choose again.";
const REFUSED: &str = "This delivery cannot be booked again from here: the sender decides what happens next.";
const FULL: &str = "This time slot has just filled up. Choose another one.";
const NOT_OFFERED: &str = "This time slot cannot be chosen: it has closed, or it is not one of the times offered. Choose one of the times listed.";

/// The change the form asks for, checked by the core's rules; or the page saying what is wrong.
fn asked(app: &App, s: &StoredShipment, sent: &ChangeForm, not_before: Date) -> Result<DeliveryChange, Said> {
    let d = &s.drop_off;
    let instruction =
        sent.instruction.as_deref().map(attempts::instruction).transpose().map_err(Said::on_instruction)?;
    // The slot held now is no new slot (a form sent while out for delivery still saves its
    // instruction).
    let held = slot_value(&d.scheduled_date, &d.slot_code);
    let slot = match sent.slot.as_deref().filter(|v| *v != held) {
        None => None,
        Some(_) if !attempts::slot_change_open(d.status) => {
            return Err(Said::refused(StatusCode::CONFLICT, attempts::closed_because(d.status)));
        }
        Some(v) => {
            let (date, code) = parse_slot(v).ok_or_else(|| Said::on_slot(NOT_OFFERED.into()))?;
            let area = &app.settings.area;
            let offer = attempts::asked_offer(area, &d.zone_code, date, code, not_before, app.clock.now());
            Some(offer.map_err(|_| Said::on_slot(NOT_OFFERED.into()))?)
        }
    };
    let expect = sent.expect.as_deref().and_then(|v| v.split_once('/'));
    Ok(DeliveryChange { slot, instruction, expect: expect.map(|(d, s)| (d.to_string(), s.to_string())) })
}

/// What the page tells besides the shipment: a confirmation or a refusal (and at which
/// field), with its status.
#[derive(Default)]
struct Said {
    status: Option<StatusCode>,
    note: Option<Note>,
    slot_error: Option<String>,
    instruction_error: Option<String>,
}

enum Note {
    Saved,
    Refused(String),
}

impl Said {
    fn refused(status: StatusCode, why: String) -> Said {
        Said { status: Some(status), note: Some(Note::Refused(why)), ..Said::default() }
    }

    fn on_slot(why: String) -> Said {
        Said { slot_error: Some(why.clone()), ..Said::refused(StatusCode::UNPROCESSABLE_ENTITY, why) }
    }

    fn on_instruction(why: String) -> Said {
        let whole = format!("Delivery instruction: {why}");
        Said { instruction_error: Some(why), ..Said::refused(StatusCode::UNPROCESSABLE_ENTITY, whole) }
    }
}

#[derive(Template)]
#[template(path = "track_change.html")]
struct ChangePage<'a> {
    css: &'a str,
    tracking_code: &'a str,
    status: &'static str,
    status_label: &'static str,
    current_day: String,
    current_time: String,
    instruction_now: &'a str,
    /// ("done" or "error", the text).
    note: Option<(&'static str, String)>,
    days: Vec<Day>,
    /// Why no slot can be chosen, when none can.
    slots_closed: Option<String>,
    slot_error: Option<String>,
    /// Whether anything can still be changed (the instruction, at least).
    form: bool,
    instruction: &'a str,
    instruction_error: Option<String>,
    max: usize,
    expect: String,
    tracking_path: String,
}

/// One day's slots on the page.
struct Day {
    label: String,
    choices: Vec<Choice>,
}

struct Choice {
    value: String,
    time: String,
    /// The slot's name, where it says more than the times.
    name: String,
    /// What remains ("3 places left"), empty when unlimited.
    left: String,
    current: bool,
    checked: bool,
}

/// The offers by day; `chosen` is checked, else the slot held.
fn days(offered: Vec<Offered>, chosen: Option<&str>) -> Vec<Day> {
    let chosen =
        chosen.filter(|c| offered.iter().any(|o| slot_value(&o.offer.at.date.to_string(), &o.offer.at.slot) == *c));
    let mut out: Vec<Day> = Vec::new();
    for o in offered {
        let value = slot_value(&o.offer.at.date.to_string(), &o.offer.at.slot);
        let left = match o.remaining {
            Some((Some(1), _)) => "1 place left".to_string(),
            Some((Some(n), _)) => format!("{n} places left"),
            Some((None, Some(p))) => format!("room for {p} parcels"),
            _ => String::new(),
        };
        let start = o.offer.start.strftime("%H:%M").to_string();
        let choice = Choice {
            checked: chosen.map_or(o.current, |c| c == value),
            time: format!("{start}–{}", o.offer.end.strftime("%H:%M")),
            name: named(o.offer.name, &start),
            current: o.current,
            left,
            value,
        };
        let label = o.offer.start.strftime("%A %B %-d").to_string();
        match out.last_mut() {
            Some(day) if day.label == label => day.choices.push(choice),
            _ => out.push(Day { label, choices: vec![choice] }),
        }
    }
    out
}

/// A slot's name where it says more than its times ("Evening"), else nothing.
fn named(name: String, start: &str) -> String {
    if name.contains(start) { String::new() } else { name }
}

/// The page for the shipment as it stands, with what was sent (a refused form's instruction
/// and slot are shown again).
async fn render(app: &App, mode: Mode, s: &StoredShipment, said: Said, sent: &ChangeForm) -> Result<Response> {
    let d = &s.drop_off;
    let slots_open = attempts::slot_change_open(d.status);
    let days =
        if slots_open { days(crate::attempts::offered(app, mode, s).await?, sent.slot.as_deref()) } else { Vec::new() };
    let slots_closed = if !slots_open {
        Some(attempts::closed_because(d.status))
    } else if days.is_empty() {
        Some(format!("No other time has room within the next {} days.", app.settings.area.horizon_days()))
    } else {
        None
    };
    let current_day = d
        .scheduled_date
        .parse::<Date>()
        .map_or_else(|_| d.scheduled_date.clone(), |date| date.strftime("%A %B %-d, %Y").to_string());
    let start = clock(&d.start_at);
    let current_time = match named(d.slot_name.clone(), start) {
        name if name.is_empty() => format!("{start}–{}", clock(&d.end_at)),
        name => format!("{start}–{} ({name})", clock(&d.end_at)),
    };
    let note = said.note.map(|n| match n {
        Note::Saved => ("done", format!("Saved. Your delivery is on {current_day}, {current_time}.")),
        Note::Refused(why) => ("error", why),
    });
    let (status_label, _) = label(d.status);
    let page = ChangePage {
        css: CSS,
        tracking_code: &d.unique_id,
        status: d.status.as_str(),
        status_label,
        current_day,
        current_time,
        instruction_now: d.instruction.as_deref().unwrap_or_default(),
        note,
        days,
        slots_closed,
        slot_error: said.slot_error,
        form: attempts::instruction_open(d.status),
        instruction: sent.instruction.as_deref().or(d.instruction.as_deref()).unwrap_or_default(),
        instruction_error: said.instruction_error,
        max: attempts::INSTRUCTION_MAX_CHARS,
        expect: slot_value(&d.scheduled_date, &d.slot_code),
        tracking_path: format!("/track/{}", d.unique_id),
    };
    let status = said.status.unwrap_or(StatusCode::OK);
    Ok(secure(html(status, page.render()), "no-store", Forms::ToItself))
}
