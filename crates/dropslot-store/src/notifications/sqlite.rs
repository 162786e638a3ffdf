//! Recipient notifications on `SQLite`: enqueued in the change's transaction (the unique key
//! (shipment, trigger, channel) drops a second copy), claimed with a lease by the sender
//! (the single writer makes a claim atomic), and listed per shipment.

use crate::notifications::{
    Channels, ClaimedNotification, NewNotification, NotificationClaim, NotificationOutcome, NotificationSettings,
    NotifyTenant, StoredNotification, UNCERTAIN_ERROR, new_opt_out_token, plan,
};
use crate::shipments::sqlite::shipment_without_events;
use crate::sqlite::{SqliteStore, map_err};
use crate::{Channel, NotificationStore, Scope, StoreError, StoreResult, StoredEvent, StoredShipment, Trigger};
use async_trait::async_trait;
use jiff::Timestamp;
use rusqlite::{Connection, OptionalExtension, params};

#[async_trait]
impl NotificationStore for SqliteStore {
    async fn notification_settings(&self, scope: Scope) -> StoreResult<crate::NotificationSettings> {
        self.read(|c| settings(c, scope))
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
    c.prepare_cached(
        "SELECT d.client_id, d.mode, s.settings_json FROM drop_off_shipments d
         LEFT JOIN notification_settings s ON s.client_id = d.client_id AND s.mode = d.mode WHERE d.id = ?1",
    )
    .and_then(|mut s| {
        s.query_row([drop_off], |r| {
            let json: Option<String> = r.get(2)?;
            Ok(NotifyTenant {
                client: r.get(0)?,
                mode: r.get(1)?,
                settings: NotificationSettings::from_json(json.as_deref()),
            })
        })
    })
    .map_err(map_err)
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
    let planned = plan(&tenant, channels, shipment, events);
    let mut queued = 0;
    for n in &planned {
        if insert(c, &tenant, n, now)? && n.state == "pending" {
            queued += 1;
        }
    }
    Ok(queued)
}

/// One message row, unless its (shipment, trigger, channel) is already there; whether written.
fn insert(c: &Connection, tenant: &NotifyTenant, n: &NewNotification, now: Timestamp) -> Result<bool, StoreError> {
    let written = c
        .prepare_cached(
            "INSERT INTO notifications (client_id, mode, drop_off_id, shipment_unique_id, trigger_kind, channel,
                recipient, recipient_hash, state, facts_json, message_id, next_attempt_ms, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)
             ON CONFLICT (drop_off_id, trigger_kind, channel) DO NOTHING",
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
                n.state,
                n.facts_json,
                n.message_id,
                crate::queue_now_ms(),
                now.to_string(),
            ])
        })
        .map_err(map_err)?;
    Ok(written == 1)
}

pub(crate) fn settings(c: &Connection, scope: Scope) -> rusqlite::Result<NotificationSettings> {
    let json: Option<String> = c
        .prepare_cached("SELECT settings_json FROM notification_settings WHERE client_id = ?1 AND mode = ?2")?
        .query_row(params![scope.client.0, scope.mode.as_str()], |r| r.get(0))
        .optional()?;
    Ok(NotificationSettings::from_json(json.as_deref()))
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
        "SELECT id, trigger_kind, channel, recipient, state, attempts, last_error, created_at, sent_at
         FROM notifications WHERE shipment_unique_id = ?1 AND client_id = ?2 AND mode = ?3 ORDER BY id",
    )?
    .query_map(params![unique_id, scope.client.0, scope.mode.as_str()], |r| {
        let trigger: String = r.get(1)?;
        let channel: String = r.get(2)?;
        Ok(StoredNotification {
            id: r.get(0)?,
            trigger: Trigger::parse(&trigger).unwrap_or(Trigger::Scheduled),
            channel: Channel::parse(&channel).unwrap_or(Channel::Email),
            recipient: r.get(3)?,
            state: r.get(4)?,
            attempts: r.get(5)?,
            last_error: r.get(6)?,
            created_at: r.get(7)?,
            sent_at: r.get(8)?,
        })
    })?
    .collect()
}

/// Claims up to `limit` due `pending` messages until `lease_until_ms`. Both statements repeat
/// the partial index's `state IN ('pending', 'sending')`: SQLite does not infer it from
/// `state = 'pending'`, and without it each claim read the whole table (every message ever
/// sent; the profile of 700 e-mails/s was mostly these scans). First, a `sending`
/// message whose lease ended (its process died while handing it over) becomes `uncertain`:
/// it may have been delivered, so it is never sent again.
pub(crate) fn claim(
    c: &Connection,
    now_ms: i64,
    lease_until_ms: i64,
    limit: usize,
) -> Result<NotificationClaim, StoreError> {
    // Every statement here is prepared once per connection (the sender claims many times a
    // second under load).
    let uncertain = c
        .prepare_cached(
            "UPDATE notifications SET state = 'uncertain', last_error = ?2
         WHERE state IN ('pending', 'sending') AND state = 'sending' AND lease_until_ms <= ?1",
        )
        .and_then(|mut s| s.execute(params![now_ms, UNCERTAIN_ERROR]))
        .map_err(map_err)?;
    let mut ids: Vec<i64> = c
        .prepare_cached(&format!(
            "SELECT id FROM notifications
             WHERE state IN ('pending', 'sending') AND state = 'pending' AND next_attempt_ms <= ?1 AND lease_until_ms <= ?1
             ORDER BY next_attempt_ms, id LIMIT {}",
            crate::sqlite::limit_bucket(limit)
        ))
        .and_then(|mut s| s.query_map(params![now_ms], |r| r.get(0))?.collect())
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
                        n.message_id, n.attempts, n.recipient_hash, s.settings_json
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
                        (r.get::<_, String>(9)?, r.get::<_, Option<String>>(10)?),
                    ))
                })
            })
            .map_err(map_err)?;
        let ((id, client, shipment), (trigger, channel, recipient), (facts_json, message_id, attempts), (hash, json)) =
            row;
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
            settings: NotificationSettings::from_json(json.as_deref()),
        });
    }
    Ok(NotificationClaim { messages: claimed, uncertain: uncertain as u64 })
}

/// Marks claimed messages `sending` (one attempt more each) just before they are handed
/// over; the ids whose claim still held.
pub(crate) fn sending(c: &Connection, ids: &[i64], lease_until_ms: i64) -> Result<Vec<i64>, StoreError> {
    let mut st = c
        .prepare_cached(
            "UPDATE notifications SET state = 'sending', attempts = attempts + 1
             WHERE id = ?1 AND state = 'pending' AND lease_until_ms = ?2",
        )
        .map_err(map_err)?;
    let mut held = Vec::with_capacity(ids.len());
    for &id in ids {
        if st.execute(params![id, lease_until_ms]).map_err(map_err)? == 1 {
            held.push(id);
        }
    }
    Ok(held)
}

/// Records how claimed attempts ended, each while its claim holds; the ids written.
pub(crate) fn finish(c: &Connection, outcomes: &[NotificationOutcome]) -> Result<Vec<i64>, StoreError> {
    let mut st = c
        .prepare_cached(
            "UPDATE notifications SET state = ?3, last_error = COALESCE(?4, last_error),
                next_attempt_ms = COALESCE(?5, next_attempt_ms), sent_at = ?6, lease_until_ms = 0
             WHERE id = ?1 AND lease_until_ms = ?2 AND state IN ('pending', 'sending')",
        )
        .map_err(map_err)?;
    let mut written = Vec::with_capacity(outcomes.len());
    for o in outcomes {
        let (state, error, next_ms, sent_at) = o.columns();
        if st.execute(params![o.id, o.lease_until_ms, state, error, next_ms, sent_at]).map_err(map_err)? == 1 {
            written.push(o.id);
        }
    }
    Ok(written)
}

pub(crate) fn next_due_ms(c: &Connection) -> rusqlite::Result<Option<i64>> {
    c.prepare_cached(
        "SELECT min(CASE WHEN state = 'pending' THEN max(next_attempt_ms, lease_until_ms) ELSE lease_until_ms END)
         FROM notifications WHERE state IN ('pending', 'sending')",
    )?
    .query_row([], |r| r.get(0))
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
