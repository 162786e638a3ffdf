//! Recipient notifications on `PostgreSQL`: enqueued in the change's transaction in one
//! statement (the unique key (shipment, trigger, channel) drops a second copy, from a retried
//! change or another process), claimed by the sender with `FOR UPDATE SKIP LOCKED` and a
//! lease, and listed per shipment.

use crate::notifications::{
    Channels, ClaimedNotification, MessageState, NewNotification, NotificationClaim, NotificationOutcome,
    NotificationSettings, NotifyTenant, QUEUED_STATES, REPEAT_ERROR, StoredNotification, UNCERTAIN_ERROR,
    new_opt_out_token, plan, stored_settings,
};
use crate::postgres::sql::Sql;
use crate::postgres::{PgStore, column, in_tx, map_err, parsed};
use crate::{Channel, NotificationStore, Scope, StoreError, StoreResult, StoredEvent, StoredShipment, Trigger};
use async_trait::async_trait;
use dropslot_core::notifications::CRASH_REPEATS;
use jiff::Timestamp;
use std::sync::LazyLock;
use tokio_postgres::types::Type;

#[async_trait]
impl NotificationStore for PgStore {
    async fn notification_settings(&self, scope: Scope) -> StoreResult<crate::NotificationSettings> {
        settings(&self.conn().await?, scope).await
    }

    async fn set_notification_settings(
        &self,
        scope: Scope,
        settings: crate::NotificationSettings,
        now: Timestamp,
    ) -> StoreResult<()> {
        set_settings(&self.conn().await?, scope, &settings, now).await
    }

    async fn shipment_notifications(
        &self,
        scope: Scope,
        unique_id: &str,
    ) -> StoreResult<Vec<crate::StoredNotification>> {
        list(&self.conn().await?, scope, unique_id).await
    }

    async fn claim_notifications(
        &self,
        now_ms: i64,
        lease_until_ms: i64,
        limit: usize,
    ) -> StoreResult<crate::NotificationClaim> {
        Ok(in_tx!(self, |tx| claim(tx, now_ms, lease_until_ms, limit).await?))
    }

    async fn notifications_sending(&self, ids: Vec<i64>, lease_until_ms: i64) -> StoreResult<Vec<i64>> {
        sending(&self.conn().await?, &ids, lease_until_ms).await
    }

    async fn finish_notifications(&self, outcomes: Vec<crate::NotificationOutcome>) -> StoreResult<Vec<i64>> {
        finish(&self.conn().await?, &outcomes).await
    }

    async fn next_notification_due_ms(&self) -> StoreResult<Option<i64>> {
        next_due_ms(&self.conn().await?).await
    }

    async fn opt_out_state(&self, token: &str) -> StoreResult<Option<bool>> {
        opt_out_state(&self.conn().await?, token).await
    }

    async fn opt_out(&self, token: &str, now: Timestamp) -> StoreResult<bool> {
        opt_out(&self.conn().await?, token, now).await
    }
}

/// The tenants (and settings) of drop-off shipments, by id.
pub(crate) async fn tenants(c: &impl Sql, drop_offs: &[i64]) -> StoreResult<Vec<(i64, NotifyTenant)>> {
    let rows = c
        .query_typed(
            "SELECT d.id, d.client_id, d.mode, s.settings_json FROM drop_off_shipments d
             LEFT JOIN notification_settings s ON s.client_id = d.client_id AND s.mode = d.mode
             WHERE d.id = ANY($1)",
            &[(&drop_offs, Type::INT8_ARRAY)],
        )
        .await
        .map_err(map_err)?;
    rows.iter()
        .map(|r| {
            let json: Option<String> = column(r, 3)?;
            Ok((
                column(r, 0)?,
                NotifyTenant {
                    client: column(r, 1)?,
                    mode: column(r, 2)?,
                    settings: stored_settings(json.as_deref())?,
                },
            ))
        })
        .collect()
}

/// The planned rows as the insert's `unnest` columns.
#[derive(Default)]
struct Columns<'a> {
    clients: Vec<i64>,
    modes: Vec<&'a str>,
    drop_offs: Vec<i64>,
    shipments: Vec<&'a str>,
    triggers: Vec<&'static str>,
    channels: Vec<&'static str>,
    recipients: Vec<&'a str>,
    hashes: Vec<&'a str>,
    states: Vec<&'static str>,
    facts: Vec<&'a str>,
    message_ids: Vec<&'a str>,
    occasions: Vec<&'a str>,
}

/// Messages planned for a unit of work, written in one statement.
#[derive(Default)]
pub(crate) struct Planned {
    rows: Vec<(i64, String, NewNotification)>,
}

impl Planned {
    /// Plans the messages `events` of `shipment` cause.
    pub(crate) fn add(
        &mut self,
        tenant: &NotifyTenant,
        channels: Channels,
        shipment: &StoredShipment,
        events: &[StoredEvent],
    ) {
        for n in plan(tenant, channels, shipment, events, false, None) {
            self.rows.push((tenant.client, tenant.mode.clone(), n));
        }
    }

    /// Plans the `rescheduled` message of `shipment`: the service moved it to its slot now.
    pub(crate) fn add_rescheduled(&mut self, tenant: &NotifyTenant, channels: Channels, shipment: &StoredShipment) {
        for n in plan(tenant, channels, shipment, &[], true, None) {
            self.rows.push((tenant.client, tenant.mode.clone(), n));
        }
    }

    /// Plans the `rescheduled` messages of drop-off `drop_off` as it is stored now.
    pub(crate) async fn add_rescheduled_of(
        &mut self,
        c: &impl Sql,
        channels: Channels,
        drop_off: i64,
    ) -> StoreResult<()> {
        let tenants = tenants(c, &[drop_off]).await?;
        let shipment = crate::shipments::postgres::shipments_without_events(c, &[drop_off]).await?.pop();
        if let (Some((_, tenant)), Some(shipment)) = (tenants.first(), shipment) {
            self.add_rescheduled(tenant, channels, &shipment);
        }
        Ok(())
    }

    /// Writes them (a message whose key is taken is dropped); how many `pending` were written.
    pub(crate) async fn write(self, c: &impl Sql, now: Timestamp) -> StoreResult<usize> {
        if self.rows.is_empty() {
            return Ok(0);
        }
        let mut cols = Columns::default();
        for (client, mode, n) in &self.rows {
            cols.clients.push(*client);
            cols.modes.push(mode.as_str());
            cols.drop_offs.push(n.drop_off_id);
            cols.shipments.push(n.shipment_unique_id.as_str());
            cols.triggers.push(n.trigger.as_str());
            cols.channels.push(n.channel.as_str());
            cols.recipients.push(n.recipient.as_str());
            cols.hashes.push(n.recipient_hash.as_str());
            cols.states.push(n.state.as_str());
            cols.facts.push(n.facts_json.as_str());
            cols.message_ids.push(n.message_id.as_str());
            cols.occasions.push(n.occasion.as_str());
        }
        let rows = c
            .query_typed(
                "INSERT INTO notifications (client_id, mode, drop_off_id, shipment_unique_id, trigger_kind, channel,
                    recipient, recipient_hash, state, facts_json, message_id, occasion, next_attempt_ms, created_at)
                 SELECT t.*, $12, $13 FROM unnest($1::bigint[], $2::text[], $3::bigint[], $4::text[], $5::text[],
                    $6::text[], $7::text[], $8::text[], $9::text[], $10::text[], $11::text[], $14::text[]) AS t
                 ON CONFLICT (drop_off_id, trigger_kind, channel, occasion) DO NOTHING
                 RETURNING state",
                &[
                    (&cols.clients, Type::INT8_ARRAY),
                    (&cols.modes, Type::TEXT_ARRAY),
                    (&cols.drop_offs, Type::INT8_ARRAY),
                    (&cols.shipments, Type::TEXT_ARRAY),
                    (&cols.triggers, Type::TEXT_ARRAY),
                    (&cols.channels, Type::TEXT_ARRAY),
                    (&cols.recipients, Type::TEXT_ARRAY),
                    (&cols.hashes, Type::TEXT_ARRAY),
                    (&cols.states, Type::TEXT_ARRAY),
                    (&cols.facts, Type::TEXT_ARRAY),
                    (&cols.message_ids, Type::TEXT_ARRAY),
                    (&crate::queue_now_ms(), Type::INT8),
                    (&now.to_string(), Type::TEXT),
                    (&cols.occasions, Type::TEXT_ARRAY),
                ],
            )
            .await
            .map_err(map_err)?;
        let pending = MessageState::Pending.as_str();
        Ok(rows.iter().filter(|r| r.try_get::<_, &str>(0).is_ok_and(|s| s == pending)).count())
    }
}

/// The told windows a re-timing writes, as the upsert's `unnest` columns.
#[derive(Default)]
struct ToldColumns {
    drop_offs: Vec<i64>,
    dates: Vec<String>,
    from: Vec<i64>,
    to: Vec<i64>,
    new_times: Vec<i32>,
}

/// What a route's re-timing tells its recipients (CONTRACT §16), in the caller's transaction
/// (the one that stores the ETAs): for each shipment given a live window that is on a
/// published stop of `route_id`, the core's decision
/// ([`dropslot_core::notifications::new_time::decide`]) against the window it was last told;
/// the told windows and the messages written. Re-timings of one route take turns (a
/// transaction lock on its id), so two processes never decide from the same told window; the
/// messages' key drops a copy all the same. How many are pending.
pub(crate) async fn retell(
    c: &impl Sql,
    channels: Channels,
    route_id: &str,
    etas: &[(String, crate::StoredEta)],
    next_stops: &[(String, u32)],
    now: Timestamp,
) -> StoreResult<usize> {
    use dropslot_core::notifications::new_time::{Told, decide};
    if etas.is_empty() {
        return Ok(0);
    }
    c.execute("SELECT pg_advisory_xact_lock(hashtext('told_etas:' || $1))", &[&route_id]).await.map_err(map_err)?;
    let ids: Vec<&str> = etas.iter().map(|(u, _)| u.as_str()).collect();
    let rows = c
        .query_typed(
            "SELECT d.unique_id, d.id, d.scheduled_date, d.status, t.from_ms, t.to_ms, t.new_times
             FROM drop_off_shipments d
             LEFT JOIN told_etas t ON t.drop_off_id = d.id AND t.scheduled_date = d.scheduled_date
             WHERE d.unique_id = ANY($1)
               AND EXISTS (SELECT 1 FROM published_stops s WHERE s.shipment_unique_id = d.unique_id AND s.route_id = $2)",
            &[(&ids, Type::TEXT_ARRAY), (&route_id, Type::TEXT)],
        )
        .await
        .map_err(map_err)?;
    let mut told_rows = ToldColumns::default();
    let mut planned = Planned::default();
    let mut speak: Vec<(i64, Vec<dropslot_core::notifications::Retimed>)> = Vec::new();
    for r in &rows {
        let u: String = column(r, 0)?;
        let drop_off: i64 = column(r, 1)?;
        let date: String = column(r, 2)?;
        let status = crate::postgres::status_column(r, 3)?;
        let told = match (column::<Option<i64>>(r, 4)?, column::<Option<i64>>(r, 5)?, column::<Option<i32>>(r, 6)?) {
            (Some(from_ms), Some(to_ms), Some(n)) => Some(Told {
                from_ms,
                to_ms,
                new_times: u32::try_from(n).map_err(|e| StoreError::Corrupt(e.to_string()))?,
            }),
            _ => None,
        };
        let Some((_, e)) = etas.iter().find(|(x, _)| *x == u) else { continue };
        let next = next_stops.iter().find(|(n, _)| *n == u).map(|(_, m)| *m);
        let decision = decide(told, (e.from_ms, e.to_ms), status, next);
        if let Some(t) = decision.told {
            told_rows.drop_offs.push(drop_off);
            told_rows.dates.push(date);
            told_rows.from.push(t.from_ms);
            told_rows.to.push(t.to_ms);
            told_rows.new_times.push(i32::try_from(t.new_times).unwrap_or(i32::MAX));
        }
        if !decision.messages.is_empty() {
            speak.push((drop_off, decision.messages));
        }
    }
    if !told_rows.drop_offs.is_empty() {
        c.execute(
            "INSERT INTO told_etas (drop_off_id, scheduled_date, from_ms, to_ms, new_times)
             SELECT * FROM unnest($1::bigint[], $2::text[], $3::bigint[], $4::bigint[], $5::int[])
             ON CONFLICT (drop_off_id, scheduled_date) DO UPDATE SET from_ms = excluded.from_ms,
                to_ms = excluded.to_ms, new_times = excluded.new_times",
            &[&told_rows.drop_offs, &told_rows.dates, &told_rows.from, &told_rows.to, &told_rows.new_times],
        )
        .await
        .map_err(map_err)?;
    }
    if speak.is_empty() {
        return Ok(0);
    }
    let drop_offs: Vec<i64> = speak.iter().map(|(d, _)| *d).collect();
    let tenants = tenants(c, &drop_offs).await?;
    let shipments = crate::shipments::postgres::shipments_without_events(c, &drop_offs).await?;
    for (drop_off, messages) in speak {
        let tenant = tenants.iter().find(|(d, _)| *d == drop_off).map(|(_, t)| t);
        let shipment = shipments.iter().find(|s| s.drop_off.id.0 == drop_off);
        let (Some(tenant), Some(shipment)) = (tenant, shipment) else { continue };
        for retimed in messages {
            for n in plan(tenant, channels, shipment, &[], false, Some(retimed)) {
                planned.rows.push((tenant.client, tenant.mode.clone(), n));
            }
        }
    }
    planned.write(c, now).await
}

pub(crate) async fn settings(c: &impl Sql, scope: Scope) -> StoreResult<NotificationSettings> {
    let row = c
        .query_opt(
            "SELECT settings_json FROM notification_settings WHERE client_id = $1 AND mode = $2",
            &[&scope.client.0, &scope.mode.as_str()],
        )
        .await
        .map_err(map_err)?;
    let json: Option<String> = row.map(|r| column(&r, 0)).transpose()?;
    stored_settings(json.as_deref())
}

pub(crate) async fn set_settings(
    c: &impl Sql,
    scope: Scope,
    settings: &NotificationSettings,
    now: Timestamp,
) -> StoreResult<()> {
    let json = serde_json::to_string(settings).map_err(|e| StoreError::Corrupt(e.to_string()))?;
    c.execute(
        "INSERT INTO notification_settings (client_id, mode, settings_json, updated_at) VALUES ($1, $2, $3, $4)
         ON CONFLICT (client_id, mode) DO UPDATE SET settings_json = excluded.settings_json,
            updated_at = excluded.updated_at",
        &[&scope.client.0, &scope.mode.as_str(), &json, &now.to_string()],
    )
    .await
    .map_err(map_err)?;
    Ok(())
}

pub(crate) async fn list(c: &impl Sql, scope: Scope, unique_id: &str) -> StoreResult<Vec<StoredNotification>> {
    let rows = c
        .query(
            "SELECT id, trigger_kind, channel, recipient, state, attempts, last_error, created_at, sent_at,
                repeated_after_crash
             FROM notifications WHERE shipment_unique_id = $1 AND client_id = $2 AND mode = $3 ORDER BY id",
            &[&unique_id, &scope.client.0, &scope.mode.as_str()],
        )
        .await
        .map_err(map_err)?;
    rows.iter()
        .map(|r| {
            Ok(StoredNotification {
                id: column(r, 0)?,
                trigger: parsed(column(r, 1)?, "trigger", Trigger::parse)?,
                channel: parsed(column(r, 2)?, "channel", Channel::parse)?,
                recipient: column(r, 3)?,
                state: parsed(column(r, 4)?, "notification state", MessageState::parse)?,
                attempts: column(r, 5)?,
                last_error: column(r, 6)?,
                created_at: column(r, 7)?,
                sent_at: column(r, 8)?,
                repeated_after_crash: column(r, 9)?,
            })
        })
        .collect()
}

/// A `sending` message whose lease ended (its process died handing it over) is due again now,
/// one repeat more, while it has had fewer than $5 ($3: `pending`, $4: `sending`).
static REPEAT: LazyLock<String> = LazyLock::new(|| {
    format!(
        "UPDATE notifications SET state = $3, last_error = $2, next_attempt_ms = $1,
            repeated_after_crash = repeated_after_crash + 1
         WHERE {} AND state = $4 AND lease_until_ms <= $1 AND repeated_after_crash < $5",
        *QUEUED_STATES
    )
});

/// A `sending` message whose lease ended and that is not repeated ([`REPEAT`] ran first)
/// becomes `uncertain` ($3: `uncertain`, $4: `sending`).
static UNCERTAIN: LazyLock<String> = LazyLock::new(|| {
    format!(
        "UPDATE notifications SET state = $3, last_error = $2 WHERE {} AND state = $4 AND lease_until_ms <= $1",
        *QUEUED_STATES
    )
});

/// Leases up to $3 due messages ($4: `pending`) until $2.
static CLAIM: LazyLock<String> = LazyLock::new(|| {
    format!(
        "WITH due AS (
            SELECT id FROM notifications
            WHERE {} AND state = $4 AND next_attempt_ms <= $1 AND lease_until_ms <= $1
            ORDER BY next_attempt_ms, id LIMIT $3 FOR UPDATE SKIP LOCKED
         )
         UPDATE notifications n SET lease_until_ms = $2 FROM due WHERE n.id = due.id
         RETURNING n.id, n.client_id, n.shipment_unique_id, n.trigger_kind, n.channel, n.recipient,
            n.facts_json, n.message_id, n.attempts, n.recipient_hash, n.mode,
            (SELECT d.label_token FROM drop_off_shipments d WHERE d.id = n.drop_off_id)",
        *QUEUED_STATES
    )
});

/// The earliest instant a queued message needs the sender ($1: `pending`).
static NEXT_DUE: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT min(CASE WHEN state = $1 THEN greatest(next_attempt_ms, lease_until_ms)
            ELSE lease_until_ms END)::bigint
         FROM notifications WHERE {}",
        *QUEUED_STATES
    )
});

/// Claims due `pending` messages (`FOR UPDATE SKIP LOCKED`: two processes never take the
/// same one); first, a `sending` message past its lease is due again with one repeat more
/// (at least once, with its Message-ID), or `uncertain` once it had [`CRASH_REPEATS`]; one
/// made due here is claimed by this same call (the transaction sees its own update). The statements
/// repeat the partial index's condition ([`QUEUED_STATES`]) as constant text: a cached
/// statement's generic plan cannot infer it from a bound state, and would scan the table.
pub(crate) async fn claim(
    c: &impl Sql,
    now_ms: i64,
    lease_until_ms: i64,
    limit: usize,
) -> StoreResult<NotificationClaim> {
    let repeated = c
        .execute(
            &REPEAT,
            &[&now_ms, &REPEAT_ERROR, &MessageState::Pending.as_str(), &MessageState::Sending.as_str(), &CRASH_REPEATS],
        )
        .await
        .map_err(map_err)?;
    let uncertain = c
        .execute(
            &UNCERTAIN,
            &[&now_ms, &UNCERTAIN_ERROR, &MessageState::Uncertain.as_str(), &MessageState::Sending.as_str()],
        )
        .await
        .map_err(map_err)?;
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let rows =
        c.query(&CLAIM, &[&now_ms, &lease_until_ms, &limit, &MessageState::Pending.as_str()]).await.map_err(map_err)?;
    let mut claimed = Vec::with_capacity(rows.len());
    for r in &rows {
        let hash: String = column(r, 9)?;
        let mode: String = column(r, 10)?;
        let client: i64 = column(r, 1)?;
        let recipient = c
            .query_one(
                "WITH new AS (
                    INSERT INTO notification_recipients (recipient_hash, opt_out_token) VALUES ($1, $2)
                    ON CONFLICT (recipient_hash) DO NOTHING RETURNING opt_out_token, opted_out_at
                 )
                 SELECT opt_out_token, opted_out_at FROM new
                 UNION ALL SELECT opt_out_token, opted_out_at FROM notification_recipients WHERE recipient_hash = $1
                 LIMIT 1",
                &[&hash, &new_opt_out_token()],
            )
            .await
            .map_err(map_err)?;
        let opted_out: Option<String> = column(&recipient, 1)?;
        let settings =
            settings(c, Scope { client: dropslot_core::ids::ClientId(client), mode: parse_mode(&mode)? }).await?;
        claimed.push(ClaimedNotification {
            id: column(r, 0)?,
            client,
            shipment_unique_id: column(r, 2)?,
            trigger: parsed(column(r, 3)?, "trigger", Trigger::parse)?,
            channel: parsed(column(r, 4)?, "channel", Channel::parse)?,
            recipient: column(r, 5)?,
            facts_json: column(r, 6)?,
            message_id: column(r, 7)?,
            attempts: column(r, 8)?,
            lease_until_ms,
            opt_out_token: column(&recipient, 0)?,
            opted_out: opted_out.is_some(),
            settings,
            label_token: column(r, 11)?,
        });
    }
    Ok(NotificationClaim { messages: claimed, repeated, uncertain })
}

fn parse_mode(mode: &str) -> StoreResult<crate::Mode> {
    crate::Mode::parse(mode).ok_or_else(|| StoreError::Corrupt(format!("mode {mode}")))
}

/// Marks claimed messages `sending` (one attempt more each), in one statement; the ids whose
/// claim still held.
pub(crate) async fn sending(c: &impl Sql, ids: &[i64], lease_until_ms: i64) -> StoreResult<Vec<i64>> {
    let rows = c
        .query(
            "UPDATE notifications SET state = $3, attempts = attempts + 1
             WHERE id = ANY($1) AND state = $4 AND lease_until_ms = $2 RETURNING id",
            &[&ids, &lease_until_ms, &MessageState::Sending.as_str(), &MessageState::Pending.as_str()],
        )
        .await
        .map_err(map_err)?;
    rows.iter().map(|r| column(r, 0)).collect()
}

/// Records how claimed attempts ended, each while its claim holds, in one statement; the ids
/// written.
pub(crate) async fn finish(c: &impl Sql, outcomes: &[NotificationOutcome]) -> StoreResult<Vec<i64>> {
    let [pending, sending] = MessageState::QUEUED.map(MessageState::as_str);
    let n = outcomes.len();
    let (mut ids, mut leases, mut states) = (Vec::with_capacity(n), Vec::with_capacity(n), Vec::with_capacity(n));
    let (mut errors, mut next, mut sent) = (Vec::with_capacity(n), Vec::with_capacity(n), Vec::with_capacity(n));
    for o in outcomes {
        let (state, error, next_ms, sent_at) = o.columns();
        ids.push(o.id);
        leases.push(o.lease_until_ms);
        states.push(state.as_str());
        errors.push(error.map(str::to_string));
        next.push(next_ms);
        sent.push(sent_at);
    }
    let rows = c
        .query(
            "UPDATE notifications n SET state = u.state, last_error = COALESCE(u.error, n.last_error),
                next_attempt_ms = COALESCE(u.next_ms, n.next_attempt_ms), sent_at = u.sent_at, lease_until_ms = 0
             FROM UNNEST($1::bigint[], $2::bigint[], $3::text[], $4::text[], $5::bigint[], $6::text[])
                AS u(id, lease, state, error, next_ms, sent_at)
             WHERE n.id = u.id AND n.lease_until_ms = u.lease AND n.state IN ($7, $8)
             RETURNING n.id",
            &[&ids, &leases, &states, &errors, &next, &sent, &pending, &sending],
        )
        .await
        .map_err(map_err)?;
    rows.iter().map(|r| column(r, 0)).collect()
}

pub(crate) async fn next_due_ms(c: &impl Sql) -> StoreResult<Option<i64>> {
    let row = c.query_one(&NEXT_DUE, &[&MessageState::Pending.as_str()]).await.map_err(map_err)?;
    column(&row, 0)
}

pub(crate) async fn opt_out_state(c: &impl Sql, token: &str) -> StoreResult<Option<bool>> {
    let row = c
        .query_opt("SELECT opted_out_at IS NOT NULL FROM notification_recipients WHERE opt_out_token = $1", &[&token])
        .await
        .map_err(map_err)?;
    row.map(|r| column(&r, 0)).transpose()
}

pub(crate) async fn opt_out(c: &impl Sql, token: &str, now: Timestamp) -> StoreResult<bool> {
    let n = c
        .execute(
            "UPDATE notification_recipients SET opted_out_at = COALESCE(opted_out_at, $2) WHERE opt_out_token = $1",
            &[&token, &now.to_string()],
        )
        .await
        .map_err(map_err)?;
    Ok(n == 1)
}
