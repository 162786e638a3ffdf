//! The dashboard's side of failed deliveries (CONTRACT §15): the attempts policy page, and the
//! shipment page's decisions — another slot, a return, a cancellation — each through the API's
//! own store call, so the same rules, events and errors hold.

use askama::Template;
use axum::extract::State;
use axum::http::StatusCode;

use super::{Frame, PageResult, Posted, Session, fail, page, see_other};
use crate::app::App;
use crate::error::{Error, FieldErrors};
use crate::http::PathParam;
use dropslot_core::attempts::{AfterFailure, Changer, Policy};
use dropslot_store::{ChangeTarget, DeliveryChange, Visibility};

#[derive(Template)]
#[template(path = "dashboard/attempts.html")]
struct AttemptsPage {
    frame: Option<Frame>,
    policy: Policy,
    choices: Vec<(&'static str, &'static str)>,
    saved: bool,
}

fn choices() -> Vec<(&'static str, &'static str)> {
    AfterFailure::ALL
        .into_iter()
        .map(|a| {
            (
                a.as_str(),
                match a {
                    AfterFailure::Reattempt => "Book another attempt in the next slot with room",
                    AfterFailure::Return => "Send the parcel back to me",
                    AfterFailure::Hold => "Wait for my decision",
                },
            )
        })
        .collect()
}

async fn render(app: &App, session: &Session, saved: bool, status: StatusCode) -> PageResult {
    let policy = crate::attempts::policy(app, session.scope).await.map_err(fail(session))?;
    Ok(page(
        status,
        AttemptsPage { frame: Some(session.frame("attempts")), policy, choices: choices(), saved }.render(),
    ))
}

/// `GET /dashboard/attempts`.
pub(super) async fn settings(State(app): State<App>, session: Session) -> PageResult {
    render(&app, &session, false, StatusCode::OK).await
}

/// `POST /dashboard/attempts`: the API's rules, the policy replaced whole.
pub(super) async fn save(State(app): State<App>, Posted { session, fields }: Posted) -> PageResult {
    let mut errors = FieldErrors::new();
    let mut count = |name: &'static str| -> u32 {
        fields.get(name).and_then(|v| v.parse().ok()).unwrap_or_else(|| {
            errors.add(name, "A whole number from 1 to 10.");
            0
        })
    };
    let (max_attempts, max_return_attempts) = (count("max_attempts"), count("max_return_attempts"));
    let after_failure = fields.get("after_failure").and_then(AfterFailure::parse).unwrap_or_else(|| {
        errors.add("after_failure", "Choose what follows a failed attempt.");
        AfterFailure::Reattempt
    });
    let policy = Policy { max_attempts, after_failure, max_return_attempts };
    if errors.is_empty() {
        for (path, message) in policy.problems() {
            errors.add(path, message);
        }
    }
    errors.into_result().map_err(fail(&session))?;
    app.store.set_attempt_policy(session.scope, policy, app.clock.now()).await.map_err(|e| fail(&session)(e.into()))?;
    render(&app, &session, true, StatusCode::OK).await
}

/// `POST /dashboard/shipments/{code}/reschedule`: `slot` is `YYYY-MM-DD CODE`, one of the
/// page's offers.
pub(super) async fn reschedule(
    State(app): State<App>,
    PathParam(code): PathParam<String>,
    Posted { session, fields }: Posted,
) -> PageResult {
    let s = app
        .store
        .shipment(Visibility::Tenant(session.scope), &code)
        .await
        .map_err(|e| fail(&session)(e.into()))?
        .ok_or_else(|| fail(&session)(Error::NotFound))?;
    let chosen = fields.get("slot").unwrap_or_default();
    let (date, slot) = chosen.split_once(' ').unwrap_or((chosen, ""));
    let date = date.parse().map_err(|_| fail(&session)(Error::invalid("slot", "Choose a date and slot.")))?;
    let offer = crate::attempts::offer_for(&app, &s, date, slot)
        .map_err(fail(&session))?
        .map_err(|why| fail(&session)(Error::invalid("slot", crate::orders::asked_problem(why))))?;
    let change = DeliveryChange {
        slot: Some(offer),
        instruction: None,
        expect: Some((s.drop_off.scheduled_date.clone(), s.drop_off.slot_code.clone())),
    };
    let target = ChangeTarget::Tenant(session.scope, code.clone());
    let outcome = app
        .store
        .change_delivery(target, change, Changer::Merchant, app.clock.now())
        .await
        .map_err(|e| fail(&session)(e.into()))?;
    if let Some(e) = crate::attempts::refusal(&outcome) {
        return Err(fail(&session)(e));
    }
    Ok(see_other(&format!("/dashboard/shipments/{code}?done=rescheduled")))
}

/// `POST /dashboard/shipments/{code}/return`.
pub(super) async fn send_back(
    State(app): State<App>,
    PathParam(code): PathParam<String>,
    Posted { session, .. }: Posted,
) -> PageResult {
    let outcome = app
        .store
        .return_to_sender(session.scope, &code, app.clock.now())
        .await
        .map_err(|e| fail(&session)(e.into()))?;
    if let Some(e) = crate::attempts::refusal(&outcome) {
        return Err(fail(&session)(e));
    }
    Ok(see_other(&format!("/dashboard/shipments/{code}?done=returned")))
}

/// `POST /dashboard/shipments/{code}/cancel`.
pub(super) async fn cancel(
    State(app): State<App>,
    PathParam(code): PathParam<String>,
    Posted { session, .. }: Posted,
) -> PageResult {
    let outcome =
        app.store.cancel_shipment(session.scope, &code, app.clock.now()).await.map_err(|e| fail(&session)(e.into()))?;
    if let Some(e) = crate::attempts::refusal(&outcome) {
        return Err(fail(&session)(e));
    }
    Ok(see_other(&format!("/dashboard/shipments/{code}?done=cancelled")))
}
