//! Records crossing the storage seam: plain data, no SQL and no HTTP.

use dropslot_core::dispatch::Plan;
use dropslot_core::geo::LocatedBy;
use dropslot_core::ids::{
    ClientId, CustomCode, DropOffShipmentId, OrderId, ParcelId, PickUpShipmentId, SavedAddressId, ShipmentOrderId,
};
use dropslot_core::money::Money;
use dropslot_core::quote::{Milligrams, Totals};
use dropslot_core::shipments::{Actor, Proof, Status};
use jiff::Timestamp;
use serde::{Deserialize, Serialize};

/// Test and live data never mix: every tenant row carries its mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    Test,
    Live,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Test => "test",
            Mode::Live => "live",
        }
    }
    pub fn parse(s: &str) -> Option<Mode> {
        match s {
            "test" => Some(Mode::Test),
            "live" => Some(Mode::Live),
            _ => None,
        }
    }
}

/// The tenant partition a request may see.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Scope {
    pub client: ClientId,
    pub mode: Mode,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TokenKind {
    Test,
    Live,
    Ops,
}

impl TokenKind {
    pub fn as_str(self) -> &'static str {
        match self {
            TokenKind::Test => "test",
            TokenKind::Live => "live",
            TokenKind::Ops => "ops",
        }
    }
    pub fn parse(s: &str) -> Option<TokenKind> {
        match s {
            "test" => Some(TokenKind::Test),
            "live" => Some(TokenKind::Live),
            "ops" => Some(TokenKind::Ops),
            _ => None,
        }
    }
    /// The data a token of this kind works on (ops staff move live shipments).
    pub fn mode(self) -> Mode {
        match self {
            TokenKind::Test => Mode::Test,
            TokenKind::Live | TokenKind::Ops => Mode::Live,
        }
    }
}

/// SHA-256 of the token: what is stored and looked up; the token itself never is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TokenHash(pub [u8; 32]);

#[derive(Debug, Clone)]
pub struct NewToken {
    pub client: ClientId,
    pub kind: TokenKind,
    pub hash: TokenHash,
    /// Shown in listings and used to revoke: `ds_test_` plus 8 characters.
    pub prefix: String,
    pub last4: String,
}

/// A token as listed: never the token itself.
#[derive(Debug, Clone)]
pub struct TokenInfo {
    /// The kind prefix and the first 8 random characters: identifies the token.
    pub prefix: String,
    pub last4: String,
    pub kind: TokenKind,
    pub created_at: String,
    pub revoked_at: Option<String>,
}

/// Who a valid token speaks for.
#[derive(Debug, Clone)]
pub struct Principal {
    pub client: ClientId,
    pub kind: TokenKind,
    /// The client's negotiated overrides as JSON (`ClientSettings`), if any.
    pub settings_json: Option<String>,
}

/// A publishable key to store (`pk_test_…`, `pk_live_…`): the client's checkout key.
#[derive(Debug, Clone)]
pub struct NewPublishableKey {
    pub client: ClientId,
    pub mode: Mode,
    pub hash: TokenHash,
    /// Shown in listings and used to revoke: `pk_test_` plus 8 characters.
    pub prefix: String,
    pub last4: String,
    /// The origins allowed to use it, as the core normalised them.
    pub origins: Vec<String>,
}

/// Who a valid publishable key speaks for, and from where.
#[derive(Debug, Clone)]
pub struct PublishablePrincipal {
    pub client: ClientId,
    pub mode: Mode,
    pub origins: Vec<String>,
}

/// A publishable key as listed: never the key itself.
#[derive(Debug, Clone)]
pub struct PublishableKeyInfo {
    pub prefix: String,
    pub last4: String,
    pub mode: Mode,
    pub origins: Vec<String>,
    pub created_at: String,
    pub revoked_at: Option<String>,
}

#[derive(Debug, Clone)]
pub struct SavedAddress {
    pub id: SavedAddressId,
    pub text: String,
    pub use_count: i64,
    pub created_at: String,
    pub last_used_at: String,
}

#[derive(Debug, Clone)]
pub struct StoredResponse {
    pub request_hash: String,
    pub status: u16,
    pub body: String,
}

/// The pick-up address as stored (`pick_up_shipments.address_json`). A storage struct of its
/// own, not the API's wire struct, so renaming an API field can never break old rows; its
/// JSON keys are frozen. Required keys that are missing make the row unreadable (an error,
/// never a default).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredPickUpAddress {
    pub text: String,
    pub postal_code: String,
    pub city: String,
    /// As the dataset gives them (decimal text).
    pub lat: String,
    pub lng: String,
    #[serde(default)]
    pub person_name: Option<String>,
    #[serde(default)]
    pub person_phone: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub saved_address_id: Option<i64>,
    /// How `lat`/`lng` were found (CONTRACT §11). Rows written before this key existed were
    /// all located by their postal code, which is what an absent key reads as.
    #[serde(default)]
    pub located_by: LocatedBy,
}

/// The drop-off address as stored (`drop_off_shipments.address_json`): the submitted fields
/// and the geocoded ones. Frozen JSON keys, like [`StoredPickUpAddress`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredDropOffAddress {
    pub text: String,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub person_name: Option<String>,
    #[serde(default)]
    pub person_phone: Option<String>,
    #[serde(default)]
    pub person_email: Option<String>,
    #[serde(default)]
    pub sender_person_name: Option<String>,
    #[serde(default)]
    pub sender_person_phone: Option<String>,
    #[serde(default)]
    pub sender_person_email: Option<String>,
    #[serde(default)]
    pub sender_name: Option<String>,
    #[serde(default)]
    pub sender_address_text: Option<String>,
    pub postal_code: String,
    pub lat: f64,
    pub lng: f64,
    pub region: String,
    pub location_service_postal_code: String,
    /// How `lat`/`lng` were found (CONTRACT §11); absent in rows written before it existed,
    /// which were all located by their postal code.
    #[serde(default)]
    pub located_by: LocatedBy,
}

/// Everything about a new order, computed before it reaches the store.
#[derive(Debug, Clone)]
pub struct NewOrder {
    pub unique_id: String,
    /// In the pick-up city's time zone (stored and shown with that offset).
    pub created_at: jiff::Zoned,
    pub pick_up: NewPickUp,
    pub shipments: Vec<NewShipment>,
    pub idempotency: Option<IdempotencyClaim>,
    /// Set when this order completes an asynchronous request: the request is marked
    /// completed (with the rendered response) in the order's own transaction, and only if
    /// this claim still holds it.
    pub completes: Option<super::RequestEnd>,
    /// The room it takes in its slots (CONTRACT §10), checked against the slots' limits and
    /// fill in its own transaction: an order that does not fit is not written
    /// (`CreateOrderError::SlotFull`).
    pub reservations: Vec<dropslot_core::quote::capacity::Reservation>,
}

/// A new order as a read loads it once written: the store answers every creation with it,
/// built from what it inserted and the ids it assigned, and renders the creation's webhooks
/// from it. The 201, the webhooks and a later read therefore cannot differ, and the service
/// never drafts stored rows of its own.
#[derive(Debug, Clone)]
pub struct WrittenOrder {
    pub ids: OrderIds,
    pub unique_id: String,
    /// In the pick-up city's time zone.
    pub created_at: jiff::Zoned,
    /// Its drop-off shipments (no events yet), in the order of the request.
    pub shipments: Vec<StoredShipment>,
}

impl WrittenOrder {
    pub(crate) fn new(o: &NewOrder, ids: OrderIds) -> WrittenOrder {
        let shipments = stored_shipments(o, &ids);
        WrittenOrder { ids, unique_id: o.unique_id.clone(), created_at: o.created_at.clone(), shipments }
    }
}

/// `o`'s drop-off shipments as a read loads them, with the ids the store assigned.
fn stored_shipments(o: &NewOrder, ids: &OrderIds) -> Vec<StoredShipment> {
    use dropslot_core::shipments::Status;
    use dropslot_core::time::iso;
    let p = &o.pick_up;
    let pick_up = StoredPickUp {
        id: ids.pick_up,
        unique_id: p.unique_id.clone(),
        label_token: p.label_token.clone(),
        scheduled_date: p.scheduled_date.to_string(),
        start_at: iso(&p.start),
        end_at: iso(&p.end),
        status: Status::Scheduled,
        slot_name: p.slot_name.clone(),
        address_text: p.address.text.clone(),
        address_located_by: p.address.located_by,
    };
    o.shipments
        .iter()
        .zip(&ids.shipments)
        .enumerate()
        .map(|(i, (s, assigned))| {
            let d = &s.drop_off;
            StoredShipment {
                order_unique_id: o.unique_id.clone(),
                drop_off_index: i,
                shipment_order: assigned.shipment_order,
                shipment_order_unique_id: s.unique_id.clone(),
                totals: s.totals,
                pick_up: pick_up.clone(),
                drop_off: StoredDropOff {
                    id: assigned.drop_off,
                    unique_id: d.unique_id.clone(),
                    label_token: d.label_token.clone(),
                    scheduled_date: d.scheduled_date.to_string(),
                    slot_code: d.slot_code.clone(),
                    slot_name: d.slot_name.clone(),
                    start_at: iso(&d.start),
                    end_at: iso(&d.end),
                    city: d.city.clone(),
                    address: d.address.clone(),
                    status: Status::Scheduled,
                    attempts: 0,
                    max_attempts: d.max_attempts,
                    zone_code: d.zone_code.clone(),
                    instruction: None,
                    return_attempts: 0,
                    return_slot: None,
                },
                parcels: s
                    .parcels
                    .iter()
                    .map(|p| StoredParcel {
                        pick_up_code: p.pick_up_code.clone(),
                        custom_code: p.custom_code.as_ref().map(|c| c.as_str().to_string()),
                        size_code: p.size_code.clone(),
                        size_name: Some(p.size_name.clone()),
                        label_token: p.label_token.clone(),
                    })
                    .collect(),
                events: Vec::new(),
                eta: None,
            }
        })
        .collect()
}

#[derive(Debug, Clone)]
pub struct IdempotencyClaim {
    pub key: String,
    pub request_hash: String,
    /// Records created before this are expired and may be replaced.
    pub expired_before: jiff::Timestamp,
    pub now: jiff::Timestamp,
}

#[derive(Debug, Clone)]
pub struct NewPickUp {
    pub unique_id: String,
    pub label_token: String,
    pub scheduled_date: jiff::civil::Date,
    pub slot_code: String,
    pub slot_name: String,
    /// The slot, in the pick-up city's time zone.
    pub start: jiff::Zoned,
    pub end: jiff::Zoned,
    pub address: StoredPickUpAddress,
    pub saved_text: String,
    pub saved_normalized: String,
}

#[derive(Debug, Clone)]
pub struct NewShipment {
    pub unique_id: String,
    pub drop_off: NewDropOff,
    pub parcels: Vec<NewParcel>,
    pub min_price: Money,
    pub tax_bp: u32,
    pub totals: Totals,
}

#[derive(Debug, Clone)]
pub struct NewDropOff {
    /// Also the tracking code.
    pub unique_id: String,
    pub label_token: String,
    pub scheduled_date: jiff::civil::Date,
    pub slot_code: String,
    pub slot_name: String,
    /// The slot, in the drop-off zone's city's time zone.
    pub start: jiff::Zoned,
    pub end: jiff::Zoned,
    pub zone_code: String,
    pub warehouse: String,
    pub city: String,
    pub address: StoredDropOffAddress,
    /// The client's maximum of delivery attempts when the order was made.
    pub max_attempts: u32,
}

#[derive(Debug, Clone)]
pub struct NewParcel {
    pub pick_up_code: String,
    pub custom_code: Option<CustomCode>,
    pub size_code: String,
    /// The size's name in the price list the order was priced with (the client's own, or
    /// the configuration's). Not stored: only the creation's webhooks show it.
    pub size_name: String,
    pub weight: Milligrams,
    pub price: Money,
    pub label_token: String,
}

/// Row ids assigned by the store, in the order of the `NewOrder`'s shipments and parcels.
#[derive(Debug, Clone)]
pub struct OrderIds {
    pub order: OrderId,
    pub pick_up: PickUpShipmentId,
    pub saved_address: SavedAddressId,
    pub shipments: Vec<ShipmentIds>,
}

#[derive(Debug, Clone)]
pub struct ShipmentIds {
    pub shipment_order: ShipmentOrderId,
    pub drop_off: DropOffShipmentId,
    pub parcels: Vec<ParcelId>,
}

/// Renders the response body from the order as written. The store calls it inside the
/// transaction only when an idempotency record or a completed request must hold the body.
pub type RenderFn = std::sync::Arc<dyn Fn(&WrittenOrder) -> Result<String, String> + Send + Sync>;

#[derive(Debug, Clone)]
pub struct CreatedOrder {
    pub order: WrittenOrder,
    /// The rendered body when the store had to render it (idempotency), else `None`.
    pub body: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum CreateOrderError {
    /// A parcel's custom code is held by a live parcel of this client and mode.
    #[error("custom code taken at drop_offs.{drop_off}.parcels.{parcel}")]
    CustomCodeTaken { drop_off: usize, parcel: usize },
    /// A concurrent request with the same idempotency key committed first.
    #[error("idempotency key already used")]
    IdempotencyKeyTaken,
    /// A slot it reserves in has no room left (the pick-up's when `drop_off` is `None`).
    #[error("no room left in the slot of {}", drop_off.map_or_else(|| "the pick-up".to_string(), |i| format!("drop_offs.{i}")))]
    SlotFull { drop_off: Option<usize> },
    #[error(transparent)]
    Store(#[from] super::StoreError),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeleteOutcome {
    NotFound,
    /// The drop-off shipment is past pick-up: its status.
    TooLate(dropslot_core::shipments::Status),
    Deleted {
        shipment_deleted: bool,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LabelKind {
    PickUp,
    DropOff,
    Parcel,
}

impl LabelKind {
    pub fn as_path(self) -> &'static str {
        match self {
            LabelKind::PickUp => "pick-up",
            LabelKind::DropOff => "drop-off",
            LabelKind::Parcel => "parcel",
        }
    }
    pub fn from_path(s: &str) -> Option<LabelKind> {
        match s {
            "pick-up" => Some(LabelKind::PickUp),
            "drop-off" => Some(LabelKind::DropOff),
            "parcel" => Some(LabelKind::Parcel),
            _ => None,
        }
    }
}

/// What a label shows, read back from the order's rows.
#[derive(Debug, Clone)]
pub struct LabelSource {
    pub kind: LabelKind,
    pub deleted: bool,
    pub pick_up_unique_id: String,
    pub pick_up_address: StoredPickUpAddress,
    pub pick_up_date: String,
    pub pick_up_slot_name: String,
    /// Every drop-off of the pick-up, with the sizes of its live parcels.
    pub drop_offs: Vec<LabelDropOff>,
    /// For parcel labels: which drop-off (index into `drop_offs`) and which parcel.
    pub parcel: Option<LabelParcel>,
    /// For drop-off labels: which drop-off.
    pub drop_off_index: usize,
}

#[derive(Debug, Clone)]
pub struct LabelDropOff {
    pub tracking_code: String,
    pub address: StoredDropOffAddress,
    pub scheduled_date: String,
    pub slot_name: String,
    pub zone_code: String,
    pub warehouse: String,
    pub parcel_sizes: Vec<String>,
}

#[derive(Debug, Clone)]
pub struct LabelParcel {
    pub pick_up_code: String,
    pub custom_code: Option<String>,
    pub size_code: String,
    /// 1-based position among the shipment's parcels, and their count.
    pub index: u32,
    pub count: u32,
}

/// A new dashboard session (issue 11): the SHA-256 of its cookie value (the value itself is
/// never stored), its CSRF token, and when it starts (Unix ms on the request clock).
#[derive(Debug, Clone)]
pub struct NewSession {
    pub hash: TokenHash,
    pub csrf: String,
    pub now_ms: i64,
}

/// A live dashboard session: who it speaks for (its token's principal; a revoked token ends
/// it), the CSRF token its forms carry, and its token's display prefix.
#[derive(Debug, Clone)]
pub struct SessionRecord {
    pub principal: Principal,
    pub csrf: String,
    pub token_prefix: String,
}

/// The dashboard's order search: every given condition holds for some drop-off shipment of
/// the order (`None` = any).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OrderFilter {
    /// A drop-off shipment's current status.
    pub status: Option<dropslot_core::shipments::Status>,
    /// A drop-off shipment's scheduled date, `YYYY-MM-DD`.
    pub date: Option<String>,
    /// The order's id, a drop-off's tracking code or a live parcel's custom code (exact,
    /// case-insensitive), or part of a receiver's name (case-insensitive).
    pub text: Option<String>,
}

// The shipment as stored: written by orders, moved by the lifecycle, read back by every
// domain that renders one (shipments, the outbox, recipient messages).

#[derive(Debug, Clone)]
pub struct StoredPickUp {
    pub id: PickUpShipmentId,
    pub unique_id: String,
    pub label_token: String,
    pub scheduled_date: String,
    pub start_at: String,
    pub end_at: String,
    pub status: Status,
    /// The pick-up slot's display name and the address text (for webhook bodies).
    pub slot_name: String,
    pub address_text: String,
    /// How the pick-up address was located (its stored `located_by`).
    pub address_located_by: dropslot_core::geo::LocatedBy,
}

/// A drop-off shipment with its shipment order, pick-up leg, live parcels and events.
#[derive(Debug, Clone)]
pub struct StoredShipment {
    pub order_unique_id: String,
    /// Its position among its order's drop-off shipments (`drop_off_index` of its parcels).
    pub drop_off_index: usize,
    pub shipment_order: ShipmentOrderId,
    pub shipment_order_unique_id: String,
    pub totals: Totals,
    pub pick_up: StoredPickUp,
    pub drop_off: StoredDropOff,
    /// Live parcels, in their order in the request.
    pub parcels: Vec<StoredParcel>,
    /// The drop-off shipment's events, oldest first.
    pub events: Vec<StoredEvent>,
    /// Its live ETA, while it is on a published delivery route (CONTRACT §14).
    pub eta: Option<StoredEta>,
}

/// A drop-off's live ETA (CONTRACT §14), Unix milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoredEta {
    pub arrival_ms: i64,
    pub from_ms: i64,
    pub to_ms: i64,
    /// The arrival is after the slot's end (the window is not clipped to it).
    pub late: bool,
    /// Stops of its route not served yet before its own.
    pub stops_before: u32,
}

#[derive(Debug, Clone)]
pub struct StoredDropOff {
    pub id: DropOffShipmentId,
    pub unique_id: String,
    pub label_token: String,
    pub scheduled_date: String,
    pub slot_code: String,
    pub slot_name: String,
    pub start_at: String,
    pub end_at: String,
    pub city: String,
    pub address: StoredDropOffAddress,
    pub status: Status,
    pub attempts: u32,
    pub max_attempts: u32,
    pub zone_code: String,
    /// The recipient's delivery instruction (CONTRACT §15).
    pub instruction: Option<String>,
    /// Failed return attempts so far.
    pub return_attempts: u32,
    /// The pick-up slot its return to the merchant is booked into.
    pub return_slot: Option<StoredReturn>,
}

/// A return stop's slot: a pick-up slot of the order's city (CONTRACT §15).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredReturn {
    pub date: String,
    pub slot_code: String,
    pub slot_name: String,
    pub start_at: String,
    pub end_at: String,
}

impl StoredReturn {
    /// From the five nullable columns: all set, or none.
    pub(crate) fn of(cols: [Option<String>; 5]) -> Result<Option<StoredReturn>, String> {
        match cols {
            [Some(date), Some(slot_code), Some(slot_name), Some(start_at), Some(end_at)] => {
                Ok(Some(StoredReturn { date, slot_code, slot_name, start_at, end_at }))
            }
            [None, None, None, None, None] => Ok(None),
            _ => Err("a return slot with some of its columns missing".into()),
        }
    }
}

#[derive(Debug, Clone)]
pub struct StoredParcel {
    pub pick_up_code: String,
    pub custom_code: Option<String>,
    pub size_code: String,
    /// The size's name in the price list the order was priced with: known only for a parcel
    /// just created (`WrittenOrder`), whose `same.parcel.created` shows it. The name is not
    /// stored, so a read leaves it `None`.
    pub size_name: Option<String>,
    pub label_token: String,
}

/// One recorded change: `id` is stable and global, `seq` numbers a shipment's events 1, 2,
/// 3 … with no gaps.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredEvent {
    pub id: i64,
    pub seq: u32,
    pub from: Option<Status>,
    pub to: Status,
    pub at: Timestamp,
    pub actor: Actor,
    pub reason: Option<String>,
    pub attempt: Option<u32>,
    pub proof: Vec<Proof>,
}

/// A plan as stored, with the version a later write must name.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredPlan {
    pub plan: Plan,
    pub version: i64,
}

/// The outcome of an ops move or a pick-up scan: by default with the moved drop-off
/// shipment's tracking code (to read it back); an ops move returns the shipment itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MoveOutcome<T = String> {
    NotFound,
    Refused(dropslot_core::shipments::Refusal),
    Moved(T),
}

/// A date and slot, old or new, as the `same.shipment.rescheduled` event shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotRef {
    pub date: String,
    pub slot_code: String,
    pub slot_name: String,
    pub start_at: String,
    pub end_at: String,
}

impl SlotRef {
    pub fn of(o: &dropslot_core::attempts::Offer) -> SlotRef {
        SlotRef {
            date: o.at.date.to_string(),
            slot_code: o.at.slot.clone(),
            slot_name: o.name.clone(),
            start_at: dropslot_core::time::iso(&o.start),
            end_at: dropslot_core::time::iso(&o.end),
        }
    }
}

/// A change of date and slot (CONTRACT §15: `same.shipment.rescheduled`): a delivery's, or a
/// return's (`ret`), by whom, and why when the service made it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rescheduled {
    pub from: SlotRef,
    pub to: SlotRef,
    pub by: dropslot_core::attempts::Changer,
    pub ret: bool,
    pub reason: Option<String>,
    pub at: Timestamp,
}

/// A drop-off's progress as a route's re-timing reads it (`ShipmentStore::progress_of`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredProgress {
    pub unique_id: String,
    pub status: Status,
    /// Its newest event.
    pub at: Timestamp,
    /// The delivery slot it is booked into now, Unix seconds (from, to).
    pub window: (i64, i64),
}

impl StoredProgress {
    /// From its columns; a slot time that does not parse is corrupt.
    pub(crate) fn of(unique_id: String, status: Status, at: Timestamp, start: &str, end: &str) -> Result<Self, String> {
        let t = |v: &str| {
            v.parse::<Timestamp>()
                .map(Timestamp::as_second)
                .map_err(|e| format!("shipment {unique_id}: slot time {v:?}: {e}"))
        };
        let window = (t(start)?, t(end)?);
        Ok(StoredProgress { unique_id, status, at, window })
    }
}
