//! The injectable clock: the system clock in production, a pinned (and advanceable) instant
//! in tests and demos (`DROPSLOT_NOW`). Request handling reads the time only through it;
//! operator bookkeeping (CLI `created_at`, migration records) uses the system clock.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use jiff::{SignedDuration, Timestamp};

#[derive(Clone, Debug, Default)]
pub struct Clock {
    /// Microseconds since the epoch when pinned; `None` follows the system clock.
    pinned: Option<Arc<AtomicI64>>,
}

impl Clock {
    pub fn system() -> Self {
        Self { pinned: None }
    }

    pub fn pinned(at: Timestamp) -> Self {
        Self { pinned: Some(Arc::new(AtomicI64::new(at.as_microsecond()))) }
    }

    /// Whether the clock is pinned (tests and demos with `DROPSLOT_NOW`).
    pub fn is_pinned(&self) -> bool {
        self.pinned.is_some()
    }

    pub fn now(&self) -> Timestamp {
        match &self.pinned {
            None => Timestamp::now(),
            Some(us) => Timestamp::from_microsecond(us.load(Ordering::Relaxed)).unwrap_or(Timestamp::UNIX_EPOCH),
        }
    }

    /// Moves a pinned clock forward (tests); a system clock ignores it.
    pub fn advance(&self, by: SignedDuration) {
        if let Some(us) = &self.pinned {
            us.fetch_add(by.as_micros() as i64, Ordering::Relaxed);
        }
    }

    /// Pins a pinned clock to `at` (tests); a system clock ignores it.
    pub fn set(&self, at: Timestamp) {
        if let Some(us) = &self.pinned {
            us.store(at.as_microsecond(), Ordering::Relaxed);
        }
    }
}
