//! Webhooks (CONTRACT §5, docs/webhooks.md): the events a shipment's changes cause are
//! rendered into the outbox in the changing transaction ([`Renderer`]), a dispatcher sends
//! them signed, in order per shipment and endpoint, with retries ([`dispatcher`]), and
//! clients manage their endpoints and read the delivery log over the API ([`routes`]).

pub mod dispatcher;
pub mod payload;
pub mod retry;
pub(crate) mod routes;
pub mod signing;
pub mod target;

use std::sync::Arc;

use jiff::Timestamp;
use tokio::sync::Notify;

pub use routes::routes;

use crate::metrics::Metrics;
use dropslot_core::config::Settings;
use dropslot_core::shipments::Status;
use dropslot_store::{Outbox, StoredEvent, StoredParcel, StoredShipment};

/// Every event kind an endpoint may subscribe to (or `*` for all).
pub fn event_kinds() -> Vec<String> {
    let mut kinds: Vec<String> = Status::ALL.iter().map(|s| dropslot_core::webhooks::shipment_event(*s)).collect();
    kinds.push(dropslot_core::webhooks::PARCEL_CREATED.into());
    kinds.push(dropslot_core::webhooks::RESCHEDULED.into());
    kinds.push(dropslot_store::COMPLETED_EVENT.into());
    kinds
}

/// The outbox's renderer and the dispatcher's doorbell.
pub struct Renderer {
    base_url: String,
    area: dropslot_core::config::ServiceArea,
    wake: Arc<Notify>,
    metrics: Arc<Metrics>,
    /// Rung when recipient notifications were queued (wakes their sender).
    notify_wake: Arc<Notify>,
    channels: dropslot_core::notifications::Channels,
    /// What follows a failed delivery (CONTRACT §15), decided in the failure's transaction.
    attempts: dropslot_core::attempts::Rules,
    /// The fleet depots' tentative plans (issue 45); `None` while no depot books on its fleet.
    fleet: Option<dropslot_store::Fleet>,
}

impl Renderer {
    pub fn new(settings: &Settings, metrics: Arc<Metrics>) -> Renderer {
        Renderer {
            base_url: settings.base_url.clone(),
            area: settings.area.clone(),
            attempts: dropslot_core::attempts::Rules {
                area: Arc::new(settings.area.clone()),
                default: settings.attempts,
            },
            fleet: settings.area.depots().iter().any(|d| settings.capacity.fleet(&d.code)).then(|| {
                dropslot_store::Fleet::new(dropslot_core::dispatch::tentative::Rules {
                    area: Arc::new(settings.area.clone()),
                    routing: settings.routing.clone(),
                    capacity: settings.capacity.clone(),
                    unplaced: settings.dispatch.unplaced,
                })
            }),
            wake: Arc::new(Notify::new()),
            metrics,
            notify_wake: Arc::new(Notify::new()),
            channels: dropslot_core::notifications::Channels {
                email: settings.notifications.smtp.is_some(),
                sms: settings.notifications.sms.is_some(),
            },
        }
    }

    /// Resolves when deliveries were queued since the last call.
    pub fn wake(&self) -> Arc<Notify> {
        self.wake.clone()
    }

    /// Resolves when recipient notifications were queued since the last call.
    pub fn notify_wake(&self) -> Arc<Notify> {
        self.notify_wake.clone()
    }

    fn context(&self) -> payload::Context<'_> {
        payload::Context { base_url: &self.base_url, area: &self.area }
    }
}

impl Outbox for Renderer {
    fn shipment_event(&self, shipment: &StoredShipment, event: &StoredEvent) -> Result<String, String> {
        payload::shipment_event(&self.context(), shipment, event)
    }

    fn parcel_created(
        &self,
        shipment: &StoredShipment,
        parcel: &StoredParcel,
        at: Timestamp,
    ) -> Result<String, String> {
        payload::parcel_created(&self.context(), shipment, parcel, at)
    }

    fn attempts(&self) -> Option<&dropslot_core::attempts::Rules> {
        Some(&self.attempts)
    }

    fn fleet(&self) -> Option<&dropslot_store::Fleet> {
        self.fleet.as_ref()
    }

    fn rescheduled(&self, shipment: &StoredShipment, change: &dropslot_store::Rescheduled) -> Result<String, String> {
        payload::rescheduled(&self.context(), shipment, change)
    }

    fn queued(&self, n: usize) {
        self.metrics.webhook_queued.inc_by(n as u64);
        self.wake.notify_one();
    }

    fn channels(&self) -> dropslot_core::notifications::Channels {
        self.channels
    }

    fn notified(&self, _n: usize) {
        self.notify_wake.notify_one();
    }
}
