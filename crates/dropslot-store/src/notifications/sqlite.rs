//! Recipient notifications on `SQLite`: enqueued in the change's transaction (the unique key
//! (shipment, trigger, channel) drops a second copy), claimed with a lease by the sender
//! (the single writer makes a claim atomic), and listed per shipment.

use crate::notifications::{
    Channels, ClaimedNotification, MessageState, NewNotification, NotificationClaim, NotificationOutcome,
    NotificationSettings, NotifyTenant, QUEUED_STATES, REPEAT_ERROR, StoredNotification, UNCERTAIN_ERROR,
    new_opt_out_token, plan, stored_settings,
};
use crate::shipments::sqlite::shipment_without_events;
use crate::sqlite::{SqliteStore, map_err, parsed};
use crate::{Channel, NotificationStore, Scope, StoreError, StoreResult, StoredEvent, StoredShipment, Trigger};
use async_trait::async_trait;
use dropslot_core::notifications::CRASH_REPEATS;
use jiff::Timestamp;
use rusqlite::{Connection, OptionalExtension, params};
use std::sync::LazyLock;

#[async_trait]
impl NotificationStore for SqliteStore {
    async fn notification_settings(&self, scope: Scope) -> StoreResult<crate::NotificationSettings> {
        stored_settings(self.read(|c| settings_json(c, scope))?.as_deref())
    }

    async fn set_notification_settings(
        &self,
        scope: Scope,
        settings: crate::NotificationSettings,
        now: Timestamp,
    ) -> StoreResult<()> {
        self.writer.write(move |c| set_settings(c, scope, &settings, now)).await
    }

    async fn shipment_notifications(
        &self,
        scope: Scope,
        unique_id: &str,
    ) -> StoreResult<Vec<crate::StoredNotification>> {
        let unique_id = unique_id.to_string();
        self.read_blocking(move |c| list(c, scope, &unique_id)).await
    }

    async fn claim_notifications(
        &self,
        now_ms: i64,
        lease_until_ms: i64,
        limit: usize,
    ) -> StoreResult<crate::NotificationClaim> {
        self.writer.write(move |c| claim(c, now_ms, lease_until_ms, limit)).await
    }

    async fn notifications_sending(&self, ids: Vec<i64>, lease_until_ms: i64) -> StoreResult<Vec<i64>> {
        self.writer.write(move |c| sending(c, &ids, lease_until_ms)).await
    }

    async fn finish_notifications(&self, outcomes: Vec<crate::NotificationOutcome>) -> StoreResult<Vec<i64>> {
        self.writer.write(move |c| finish(c, &outcomes)).await
    }

    async fn next_notification_due_ms(&self) -> StoreResult<Option<i64>> {
        self.read(next_due_ms)
    }

    async fn opt_out_state(&self, token: &str) -> StoreResult<Option<bool>> {
        self.read(|c| opt_out_state(c, token))
    }

    async fn opt_out(&self, token: &str, now: Timestamp) -> StoreResult<bool> {
        let token = token.to_string();
        self.writer.write(move |c| opt_out(c, &token, now)).await
    }
}

/// The drop-off's tenant and its client's settings in that mode.
fn tenant(c: &Connection, drop_off: i64) -> Result<NotifyTenant, StoreError> {
    let (client, mode, json): (i64, String, Option<String>) = c
        .prepare_cached(
            "SELECT d.client_id, d.mode, s.settings_json FROM drop_off_shipments d
             LEFT JOIN notification_settings s ON s.client_id = d.client_id AND s.mode = d.mode WHERE d.id = ?1",
        )
        .and_then(|mut s| s.query_row([drop_off], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))))
        .map_err(map_err)?;
    Ok(NotifyTenant { client, mode, settings: stored_settings(json.as_deref())? })
}

/// The messages `events` of one drop-off shipment cause, written in the caller's transaction.
/// `shipment` is the shipment when the caller has it (a new order); else it is read, and
/// only when an event fires a trigger.
pub(crate) fn enqueue(
    c: &Connection,
    channels: Channels,
    drop_off: i64,
    shipment: Option<&StoredShipment>,
    events: &[StoredEvent],
    now: Timestamp,
) -> Result<usize, StoreError> {
    if !events.iter().any(|e| Trigger::of(e.to).is_some()) {
        return Ok(0);
    }
    let tenant = tenant(c, drop_off)?;
    let read;
    let shipment = if let Some(s) = shipment {
        s
    } else {
        read = shipment_without_events(c, drop_off).map_err(map_err)?;
        &read
    };
    let planned = plan(&tenant, channels, shipment, events, false, None);
    let mut queued = 0;
    for n in &planned {
        if insert(c, &tenant, n, now)? && n.state == MessageState::Pending {
            queued += 1;
        }
    }
    Ok(queued)
}

/// The `rescheduled` messages of drop-off `drop_off` (the service moved it to the slot it is in
/// now), written in the caller's transaction; how many are pending. At most one per channel
/// and shipment, ever (the rows' key).
pub(crate) fn enqueue_rescheduled(
    c: &Connection,
    channels: Channels,
    drop_off: i64,
    now: Timestamp,
) -> Result<usize, StoreError> {
    let tenant = tenant(c, drop_off)?;
    let shipment = shipment_without_events(c, drop_off).map_err(map_err)?;
    let mut queued = 0;
    for n in &plan(&tenant, channels, &shipment, &[], true, None) {
        if insert(c, &tenant, n, now)? && n.state == MessageState::Pending {
            queued += 1;
        }
    }
    Ok(queued)
}

/// What a route's re-timing tells its recipients (CONTRACT §16): for each shipment given a
/// live window that is on a published stop of `route_id`, the core's decision
/// ([`dropslot_core::notifications::new_time::decide`]) against the window it was last told;
/// the told window and the `new_time` / `next_stop` messages written in the caller's
/// transaction (the one that stores the ETAs). How many are pending.
pub(crate) fn retell(
    c: &Connection,
    channels: Channels,
    route_id: &str,
    etas: &[(String, crate::StoredEta)],
    next_stops: &[(String, u32)],
    now: Timestamp,
) -> Result<usize, StoreError> {
    use dropslot_core::notifications::new_time::{Told, decide};
    let mut queued = 0;
    for (u, e) in etas {
        let row = c
            .prepare_cached(
                "SELECT d.id, d.scheduled_date, d.status, t.from_ms, t.to_ms, t.new_times FROM drop_off_shipments d
                 LEFT JOIN told_etas t ON t.drop_off_id = d.id AND t.scheduled_date = d.scheduled_date
                 WHERE d.unique_id = ?1
                   AND EXISTS (SELECT 1 FROM published_stops WHERE shipment_unique_id = ?1 AND route_id = ?2)",
            )
            .and_then(|mut s| {
                s.query_row(params![u, route_id], |r| {
                    let told =
                        match (r.get::<_, Option<i64>>(3)?, r.get::<_, Option<i64>>(4)?, r.get::<_, Option<u32>>(5)?) {
                            (Some(from_ms), Some(to_ms), Some(new_times)) => Some(Told { from_ms, to_ms, new_times }),
                            _ => None,
                        };
                    Ok((
                        r.get::<_, i64>(0)?,
                        r.get::<_, String>(1)?,
                        parsed(r, 2, "status", dropslot_core::shipments::Status::parse)?,
                        told,
                    ))
                })
                .optional()
            })
            .map_err(map_err)?;
        let Some((drop_off, date, status, told)) = row else { continue };
        let next = next_stops.iter().find(|(n, _)| n == u).map(|(_, m)| *m);
        let decision = decide(told, (e.from_ms, e.to_ms), status, next);
        if let Some(t) = decision.told {
            c.prepare_cached(
                "INSERT INTO told_etas (drop_off_id, scheduled_date, from_ms, to_ms, new_times) VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (drop_off_id, scheduled_date) DO UPDATE SET from_ms = excluded.from_ms,
                    to_ms = excluded.to_ms, new_times = excluded.new_times",
            )
            .and_then(|mut s| s.execute(params![drop_off, date, t.from_ms, t.to_ms, t.new_times]))
            .map_err(map_err)?;
        }
        if decision.messages.is_empty() {
            continue;
        }
        let tenant = tenant(c, drop_off)?;
        let shipment = shipment_without_events(c, drop_off).map_err(map_err)?;
        for retimed in decision.messages {
            for n in &plan(&tenant, channels, &shipment, &[], false, Some(retimed)) {
                if insert(c, &tenant, n, now)? && n.state == MessageState::Pending {
                    queued += 1;
                }
            }
        }
    }
    Ok(queued)
}

/// One message row, unless its (shipment, trigger, channel) is already there; whether written.
fn insert(c: &Connection, tenant: &NotifyTenant, n: &NewNotification, now: Timestamp) -> Result<bool, StoreError> {
    let written = c
        .prepare_cached(
            "INSERT INTO notifications (client_id, mode, drop_off_id, shipment_unique_id, trigger_kind, channel,
                recipient, recipient_hash, state, facts_json, message_id, next_attempt_ms, created_at, occasion)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)
             ON CONFLICT (drop_off_id, trigger_kind, channel, occasion) DO NOTHING",
        )
        .and_then(|mut s| {
            s.execute(params![
                tenant.client,
                tenant.mode,
                n.drop_off_id,
                n.shipment_unique_id,
                n.trigger.as_str(),
                n.channel.as_str(),
                n.recipient,
                n.recipient_hash,
                n.state.as_str(),
                n.facts_json,
                n.message_id,
                crate::queue_now_ms(),
                now.to_string(),
                n.occasion,
            ])
        })
        .map_err(map_err)?;
    Ok(written == 1)
}

/// The client's stored settings in the scope's mode, as stored (`None`: none are).
pub(crate) fn settings_json(c: &Connection, scope: Scope) -> rusqlite::Result<Option<String>> {
    c.prepare_cached("SELECT settings_json FROM notification_settings WHERE client_id = ?1 AND mode = ?2")?
        .query_row(params![scope.client.0, scope.mode.as_str()], |r| r.get(0))
        .optional()
}

pub(crate) fn set_settings(
    c: &Connection,
    scope: Scope,
    settings: &NotificationSettings,
    now: Timestamp,
) -> Result<(), StoreError> {
    let json = serde_json::to_string(settings).map_err(|e| StoreError::Corrupt(e.to_string()))?;
    c.execute(
        "INSERT INTO notification_settings (client_id, mode, settings_json, updated_at) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (client_id, mode) DO UPDATE SET settings_json = excluded.settings_json,
            updated_at = excluded.updated_at",
        params![scope.client.0, scope.mode.as_str(), json, now.to_string()],
    )
    .map_err(map_err)?;
    Ok(())
}

pub(crate) fn list(c: &Connection, scope: Scope, unique_id: &str) -> rusqlite::Result<Vec<StoredNotification>> {
    c.prepare_cached(
        "SELECT id, trigger_kind, channel, recipient, state, attempts, last_error, created_at, sent_at,
            repeated_after_crash
         FROM notifications WHERE shipment_unique_id = ?1 AND client_id = ?2 AND mode = ?3 ORDER BY id",
    )?
    .query_map(params![unique_id, scope.client.0, scope.mode.as_str()], |r| {
        Ok(StoredNotification {
            id: r.get(0)?,
            trigger: parsed(r, 1, "trigger", Trigger::parse)?,
            channel: parsed(r, 2, "channel", Channel::parse)?,
            recipient: r.get(3)?,
            state: parsed(r, 4, "notification state", MessageState::parse)?,
            attempts: r.get(5)?,
            last_error: r.get(6)?,
            created_at: r.get(7)?,
            sent_at: r.get(8)?,
            repeated_after_crash: r.get(9)?,
        })
    })?
    .collect()
}

/// A `sending` message whose lease ended (its process died handing it over) is due again now,
/// one repeat more, while it has had fewer than ?5 (?3: `pending`, ?4: `sending`).
static REPEAT: LazyLock<String> = LazyLock::new(|| {
    format!(
        "UPDATE notifications SET state = ?3, last_error = ?2, next_attempt_ms = ?1,
            repeated_after_crash = repeated_after_crash + 1
         WHERE {} AND state = ?4 AND lease_until_ms <= ?1 AND repeated_after_crash < ?5",
        *QUEUED_STATES
    )
});

/// A `sending` message whose lease ended and that is not repeated ([`REPEAT`] ran first)
/// becomes `uncertain` (?3: `uncertain`, ?4: `sending`).
static UNCERTAIN: LazyLock<String> = LazyLock::new(|| {
    format!(
        "UPDATE notifications SET state = ?3, last_error = ?2
         WHERE {} AND state = ?4 AND lease_until_ms <= ?1",
        *QUEUED_STATES
    )
});

/// The earliest instant a queued message needs the sender (?1: `pending`).
static NEXT_DUE: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT min(CASE WHEN state = ?1 THEN max(next_attempt_ms, lease_until_ms) ELSE lease_until_ms END)
         FROM notifications WHERE {}",
        *QUEUED_STATES
    )
});

/// Up to `limit` due messages (?2: `pending`), in a constant `LIMIT` (see `limit_bucket`).
fn due(limit: usize) -> String {
    format!(
        "SELECT id FROM notifications
         WHERE {} AND state = ?2 AND next_attempt_ms <= ?1 AND lease_until_ms <= ?1
         ORDER BY next_attempt_ms, id LIMIT {}",
        *QUEUED_STATES,
        crate::sqlite::limit_bucket(limit)
    )
}

/// Claims up to `limit` due `pending` messages until `lease_until_ms`. Both statements repeat
/// the partial index's condition ([`QUEUED_STATES`]) as constant text: SQLite does not infer
/// it from `state = ?`, and without it each claim read the whole table (every message ever
/// sent; the profile of 700 e-mails/s was mostly these scans). First, a `sending`
/// message whose lease ended (its process died while handing it over) is due again with one
/// repeat more (at least once: it carries its Message-ID), or `uncertain` once it had
/// [`CRASH_REPEATS`]; a message made due here is claimed by this same call.
pub(crate) fn claim(
    c: &Connection,
    now_ms: i64,
    lease_until_ms: i64,
    limit: usize,
) -> Result<NotificationClaim, StoreError> {
    // Every statement here is prepared once per connection (the sender claims many times a
    // second under load).
    let repeated = c
        .prepare_cached(&REPEAT)
        .and_then(|mut s| {
            s.execute(params![
                now_ms,
                REPEAT_ERROR,
                MessageState::Pending.as_str(),
                MessageState::Sending.as_str(),
                CRASH_REPEATS
            ])
        })
        .map_err(map_err)?;
    let uncertain = c
        .prepare_cached(&UNCERTAIN)
        .and_then(|mut s| {
            s.execute(params![
                now_ms,
                UNCERTAIN_ERROR,
                MessageState::Uncertain.as_str(),
                MessageState::Sending.as_str()
            ])
        })
        .map_err(map_err)?;
    let mut ids: Vec<i64> = c
        .prepare_cached(&due(limit))
        .and_then(|mut s| s.query_map(params![now_ms, MessageState::Pending.as_str()], |r| r.get(0))?.collect())
        .map_err(map_err)?;
    ids.truncate(limit);
    let mut claimed = Vec::with_capacity(ids.len());
    for id in ids {
        c.prepare_cached("UPDATE notifications SET lease_until_ms = ?2 WHERE id = ?1")
            .and_then(|mut s| s.execute(params![id, lease_until_ms]))
            .map_err(map_err)?;
        let row = c
            .prepare_cached(
                "SELECT n.id, n.client_id, n.shipment_unique_id, n.trigger_kind, n.channel, n.recipient, n.facts_json,
                        n.message_id, n.attempts, n.recipient_hash, s.settings_json,
                        (SELECT d.label_token FROM drop_off_shipments d WHERE d.id = n.drop_off_id)
                 FROM notifications n
                 LEFT JOIN notification_settings s ON s.client_id = n.client_id AND s.mode = n.mode
                 WHERE n.id = ?1",
            )
            .and_then(|mut s| {
                s.query_row([id], |r| {
                    Ok((
                        (r.get::<_, i64>(0)?, r.get::<_, i64>(1)?, r.get::<_, String>(2)?),
                        (r.get::<_, String>(3)?, r.get::<_, String>(4)?, r.get::<_, String>(5)?),
                        (r.get::<_, String>(6)?, r.get::<_, String>(7)?, r.get::<_, i64>(8)?),
                        (r.get::<_, String>(9)?, r.get::<_, Option<String>>(10)?, r.get::<_, String>(11)?),
                    ))
                })
            })
            .map_err(map_err)?;
        let (
            (id, client, shipment),
            (trigger, channel, recipient),
            (facts_json, message_id, attempts),
            (hash, json, label_token),
        ) = row;
        c.prepare_cached(
            "INSERT INTO notification_recipients (recipient_hash, opt_out_token) VALUES (?1, ?2)
             ON CONFLICT (recipient_hash) DO NOTHING",
        )
        .and_then(|mut s| s.execute(params![hash, new_opt_out_token()]))
        .map_err(map_err)?;
        let (opt_out_token, opted_out): (String, Option<String>) = c
            .prepare_cached("SELECT opt_out_token, opted_out_at FROM notification_recipients WHERE recipient_hash = ?1")
            .and_then(|mut s| s.query_row([&hash], |r| Ok((r.get(0)?, r.get(1)?))))
            .map_err(map_err)?;
        claimed.push(ClaimedNotification {
            id,
            client,
            shipment_unique_id: shipment,
            trigger: Trigger::parse(&trigger).ok_or_else(|| StoreError::Corrupt(format!("trigger {trigger}")))?,
            channel: Channel::parse(&channel).ok_or_else(|| StoreError::Corrupt(format!("channel {channel}")))?,
            recipient,
            facts_json,
            message_id,
            attempts,
            lease_until_ms,
            opt_out_token,
            opted_out: opted_out.is_some(),
            settings: stored_settings(json.as_deref())?,
            label_token,
        });
    }
    Ok(NotificationClaim { messages: claimed, repeated: repeated as u64, uncertain: uncertain as u64 })
}

/// ?3: `sending`, ?4: `pending`.
const SENDING: &str = "UPDATE notifications SET state = ?3, attempts = attempts + 1
    WHERE id = ?1 AND state = ?4 AND lease_until_ms = ?2";

/// Marks claimed messages `sending` (one attempt more each) just before they are handed
/// over; the ids whose claim still held.
pub(crate) fn sending(c: &Connection, ids: &[i64], lease_until_ms: i64) -> Result<Vec<i64>, StoreError> {
    let mut st = c.prepare_cached(SENDING).map_err(map_err)?;
    let (sending, pending) = (MessageState::Sending.as_str(), MessageState::Pending.as_str());
    let mut held = Vec::with_capacity(ids.len());
    for &id in ids {
        if st.execute(params![id, lease_until_ms, sending, pending]).map_err(map_err)? == 1 {
            held.push(id);
        }
    }
    Ok(held)
}

/// ?7, ?8: the queued states (`pending`, `sending`).
const FINISH: &str = "UPDATE notifications SET state = ?3, last_error = COALESCE(?4, last_error),
        next_attempt_ms = COALESCE(?5, next_attempt_ms), sent_at = ?6, lease_until_ms = 0
    WHERE id = ?1 AND lease_until_ms = ?2 AND state IN (?7, ?8)";

/// Records how claimed attempts ended, each while its claim holds; the ids written.
pub(crate) fn finish(c: &Connection, outcomes: &[NotificationOutcome]) -> Result<Vec<i64>, StoreError> {
    let mut st = c.prepare_cached(FINISH).map_err(map_err)?;
    let [pending, sending] = MessageState::QUEUED.map(MessageState::as_str);
    let mut written = Vec::with_capacity(outcomes.len());
    for o in outcomes {
        let (state, error, next_ms, sent_at) = o.columns();
        let row = params![o.id, o.lease_until_ms, state.as_str(), error, next_ms, sent_at, pending, sending];
        if st.execute(row).map_err(map_err)? == 1 {
            written.push(o.id);
        }
    }
    Ok(written)
}

pub(crate) fn next_due_ms(c: &Connection) -> rusqlite::Result<Option<i64>> {
    c.prepare_cached(&NEXT_DUE)?.query_row([MessageState::Pending.as_str()], |r| r.get(0))
}

/// Whether the opt-out token is known, and whether it opted out already.
pub(crate) fn opt_out_state(c: &Connection, token: &str) -> rusqlite::Result<Option<bool>> {
    c.prepare_cached("SELECT opted_out_at IS NOT NULL FROM notification_recipients WHERE opt_out_token = ?1")?
        .query_row([token], |r| r.get(0))
        .optional()
}

/// Opts the token's recipient out; false when the token is unknown.
pub(crate) fn opt_out(c: &Connection, token: &str, now: Timestamp) -> Result<bool, StoreError> {
    c.execute(
        "UPDATE notification_recipients SET opted_out_at = COALESCE(opted_out_at, ?2) WHERE opt_out_token = ?1",
        params![token, now.to_string()],
    )
    .map(|n| n == 1)
    .map_err(map_err)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::notifications::NotificationEnd;
    use rusqlite::StatementStatus;

    fn queue(c: &Connection, n: i64) {
        // Bare drop-off shipments, without their orders: what a claim reads of them is the label
        // token the change link is made of.
        c.execute_batch("PRAGMA foreign_keys = OFF").unwrap();
        for id in 1..=n {
            c.execute(
                "INSERT INTO drop_off_shipments (id, unique_id, shipment_order_id, pick_up_shipment_id, client_id, mode,
                    status, scheduled_date, slot_code, slot_name, start_at, end_at, zone_code, warehouse, city,
                    address_json, label_token)
                 VALUES (?1, 'DROP' || ?1, 1, 1, 1, 'live', 'scheduled', '2026-11-23', 'PM', 'PM', 's', 'e', 'Z', 'W',
                    'C', '{}', 'label' || ?1)",
                [id],
            )
            .unwrap();
            c.execute(
                "INSERT INTO notifications (id, client_id, mode, drop_off_id, shipment_unique_id, trigger_kind, channel,
                    recipient, recipient_hash, state, facts_json, message_id, next_attempt_ms, created_at)
                 VALUES (?1, 1, 'live', ?1, 'DROP', 'scheduled', 'email', 'a@b.c', 'h', 'pending', '{}', 'm', 0, 'now')",
                [id],
            )
            .unwrap();
        }
    }

    /// The statements over the queue read through the partial index `notifications_due`, and a
    /// state bound as a parameter keeps each prepared once: SQLite prepares a statement again
    /// at every execution when a bound value decides whether a partial index applies.
    #[test]
    fn the_queue_statements_use_the_partial_index_and_stay_prepared() {
        let c = Connection::open_in_memory().unwrap();
        crate::sqlite::migrate(&c).unwrap();
        queue(&c, 6);
        for sql in [REPEAT.as_str(), UNCERTAIN.as_str(), due(4).as_str(), NEXT_DUE.as_str()] {
            let mut st = c.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
            let plan: Vec<String> = st.raw_query().mapped(|r| r.get(3)).collect::<Result<_, _>>().unwrap();
            assert!(plan.iter().any(|p| p.contains("notifications_due")), "{sql}: {plan:?}");
        }
        for round in 0..3 {
            let lease = 1_000 + round;
            let claim = claim(&c, 10 + round, lease, 4).unwrap();
            let ids: Vec<i64> = claim.messages.iter().map(|m| m.id).collect();
            assert_eq!(ids.len(), 4.min(6 - 2 * usize::try_from(round).unwrap()), "round {round}");
            let held = sending(&c, &ids, lease).unwrap();
            assert_eq!(held, ids);
            let now = Timestamp::UNIX_EPOCH;
            let outcomes: Vec<_> = ids
                .iter()
                .enumerate()
                .map(|(i, &id)| NotificationOutcome {
                    id,
                    lease_until_ms: lease,
                    end: if i % 2 == 0 {
                        NotificationEnd::Sent
                    } else {
                        NotificationEnd::Retry { error: "busy".into(), next_ms: 0 }
                    },
                    now,
                })
                .collect();
            assert_eq!(finish(&c, &outcomes).unwrap(), ids);
            next_due_ms(&c).unwrap();
        }
        let states: Vec<String> = c
            .prepare("SELECT state FROM notifications ORDER BY id")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert!(states.iter().all(|s| MessageState::parse(s).is_some()), "{states:?}");
        for sql in [REPEAT.as_str(), UNCERTAIN.as_str(), due(4).as_str(), SENDING, FINISH, NEXT_DUE.as_str()] {
            let st = c.prepare_cached(sql).unwrap();
            assert_eq!(st.get_status(StatementStatus::RePrepare), 0, "{sql}");
        }
    }
}
