//! The rules of a signed-in session, the merchant dashboard's and the dispatcher's alike: how
//! often its last use is written. How long one lasts is the service's (`dashboard::IDLE`).

/// A session's `last_seen` is rewritten at most once a minute: a request within a minute of
/// the last write only reads the session (no write on every page view).
pub const TOUCH_EVERY_MS: i64 = 60_000;

/// Whether a session last marked seen at `last_seen_ms` is marked seen again by a request at
/// `now_ms`.
pub fn needs_touch(last_seen_ms: i64, now_ms: i64) -> bool {
    last_seen_ms < now_ms.saturating_sub(TOUCH_EVERY_MS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_is_marked_seen_once_a_minute() {
        assert!(!needs_touch(1_000_000, 1_000_000 + TOUCH_EVERY_MS));
        assert!(needs_touch(1_000_000, 1_000_001 + TOUCH_EVERY_MS));
        assert!(!needs_touch(i64::MIN, i64::MIN), "no overflow at the edge");
    }
}
