//! When a failed delivery is tried again: the configured schedule with ±20 % jitter, pushed
//! later (never earlier) by the receiver's `Retry-After`, to at most an hour (a scheduled
//! delay of an hour or more is kept as it is).

use std::time::Duration;

use jiff::Timestamp;

/// The longest delay a `Retry-After` may ask for.
const RETRY_AFTER_CAP: Duration = Duration::from_secs(3600);

/// The delay after failed attempt `attempt` (1 = the first), or `None` when it was the last.
/// `unit` is a uniform random number in [0, 1) for the jitter.
pub fn next_delay(schedule: &[Duration], attempt: u32, retry_after: Option<Duration>, unit: f64) -> Option<Duration> {
    let base = *schedule.get(attempt.checked_sub(1)? as usize)?;
    let jittered = base.mul_f64(0.8 + 0.4 * unit.clamp(0.0, 1.0));
    Some(match retry_after {
        Some(asked) if asked > jittered => asked.min(jittered.max(RETRY_AFTER_CAP)),
        _ => jittered,
    })
}

/// `Retry-After`: delta-seconds or an HTTP date, as a delay from `now`.
pub fn parse_retry_after(value: &str, now: Timestamp) -> Option<Duration> {
    let v = value.trim();
    if let Ok(seconds) = v.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let at = jiff::fmt::rfc2822::parse(v).ok()?.timestamp();
    Some(Duration::try_from(at.duration_since(now)).unwrap_or(Duration::ZERO))
}

/// A uniform random number in [0, 1).
pub fn unit() -> f64 {
    (u64::from_le_bytes(dropslot_core::ids::random_bytes::<8>()) >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    #[test]
    fn schedule_with_jitter_then_failed() {
        let schedule = [s(5), s(300)];
        assert_eq!(next_delay(&schedule, 1, None, 0.0), Some(s(4)));
        assert_eq!(next_delay(&schedule, 1, None, 1.0), Some(s(6)));
        assert_eq!(next_delay(&schedule, 2, None, 0.5), Some(s(300)));
        assert_eq!(next_delay(&schedule, 3, None, 0.5), None, "the last attempt fails the delivery");
        assert_eq!(next_delay(&[], 1, None, 0.5), None, "an empty schedule: one attempt");
        for _ in 0..100 {
            let d = next_delay(&schedule, 1, None, unit()).unwrap();
            assert!(d >= s(4) && d <= s(6), "{d:?}");
        }
    }

    #[test]
    fn retry_after_postpones_within_bounds() {
        let schedule = [s(5), s(36_000)];
        assert_eq!(next_delay(&schedule, 1, Some(s(120)), 0.5), Some(s(120)));
        assert_eq!(next_delay(&schedule, 1, Some(s(1)), 0.5), Some(s(5)), "never earlier than scheduled");
        assert_eq!(next_delay(&schedule, 1, Some(s(999_999)), 0.5), Some(s(3600)), "capped at an hour");
        assert_eq!(next_delay(&schedule, 2, Some(s(999_999)), 0.5), Some(s(36_000)));
    }

    #[test]
    fn parses_both_retry_after_forms() {
        let now: Timestamp = "2026-11-23T12:00:00Z".parse().unwrap();
        assert_eq!(parse_retry_after("120", now), Some(s(120)));
        assert_eq!(parse_retry_after("Mon, 23 Nov 2026 12:01:00 GMT", now), Some(s(60)));
        assert_eq!(parse_retry_after("Mon, 23 Nov 2026 11:00:00 GMT", now), Some(Duration::ZERO));
        assert_eq!(parse_retry_after("soon", now), None);
    }
}
