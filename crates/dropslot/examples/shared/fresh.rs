//! Fresh unique texts shaped like the service's, for the sync floors (`sync_floor.rs`,
//! `sync_floor_pg.rs`): the service's keys (tracking codes, label tokens, pick-up codes,
//! Message-IDs) begin with a time-ordered part and end with random characters, so each new key
//! lands at the right edge of its index. A fresh text keeps the template's first characters,
//! then a counter written most significant digit first (the clock), then random characters
//! (xorshift, seeded per run). A key of random characters alone dirtied twice the pages per
//! order on SQLite (15.5 page writes an order against the service's 6.9, `strace -c`).

/// The columns whose texts are unique and renewed in every copied row.
pub const UNIQUE: [&str; 4] = ["unique_id", "label_token", "pick_up_code", "message_id"];

pub struct Fresh {
    counter: u64,
    step: u64,
    rng: u64,
}

const ALPHABET: &[u8; 36] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ";

impl Fresh {
    /// Keys that no earlier run on the same database used: the counter starts at the clock's
    /// seconds, so a later run's keys sort after an earlier run's.
    /// Writer `index` of `of` writing at once: the writers' counters interleave (each takes
    /// every `of`-th value), so their keys share one right edge, as the service's do, and
    /// never meet.
    pub fn striped(seed: u64, index: u64, of: u64) -> Fresh {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
        let start = (now.as_secs() * 1_000_000).next_multiple_of(of.max(1)) + index;
        Fresh { counter: start, step: of.max(1), rng: (now.as_nanos() as u64 ^ seed) | 1 }
    }

    /// A new text of `old`'s length and shape.
    pub fn next(&mut self, old: &str) -> String {
        self.counter += self.step;
        // The template's first characters, then 8 counter digits (36^8 keys), then random.
        let keep = old.len().saturating_sub(8).min(old.len() / 2);
        let mut s = Vec::with_capacity(old.len());
        s.extend_from_slice(&old.as_bytes()[..keep]);
        for i in (0..8).rev() {
            if s.len() < old.len() {
                s.push(ALPHABET[((self.counter / 36u64.pow(i)) % 36) as usize]);
            }
        }
        while s.len() < old.len() {
            self.rng ^= self.rng << 13;
            self.rng ^= self.rng >> 7;
            self.rng ^= self.rng << 17;
            s.push(ALPHABET[(self.rng % 36) as usize]);
        }
        String::from_utf8(s).unwrap()
    }
}
