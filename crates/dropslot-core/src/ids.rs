//! Identifiers: typed integer ids for rows, and opaque random unique ids / tokens.
//! Unique ids are Crockford base32 (no I, L, O, U) so they read aloud and scan cleanly.

use serde::{Deserialize, Serialize};

macro_rules! int_id {
    ($($name:ident),* $(,)?) => {$(
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
        #[serde(transparent)]
        pub struct $name(pub i64);
        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result { self.0.fmt(f) }
        }
    )*};
}
int_id!(ClientId, OrderId, ShipmentOrderId, PickUpShipmentId, DropOffShipmentId, ParcelId, SavedAddressId);

/// A parcel's custom code, given by the client: 16 to 20 ASCII letters or digits,
/// case-sensitive. The one place the rule lives; a `CustomCode` that breaks it cannot exist.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct CustomCode(String);

impl CustomCode {
    /// The rule, as a client reads it.
    pub const RULE: &'static str = "The custom code must be 16 to 20 letters or digits.";

    pub fn parse(s: &str) -> Option<CustomCode> {
        ((16..=20).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_alphanumeric()))
            .then(|| CustomCode(s.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for CustomCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

const CROCKFORD: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/// Bytes drawn from the operating system's CSPRNG this many at a time, per thread: an order
/// takes about ten draws (its ids, label tokens and webhook ids), and a `getrandom` system
/// call each was 4 % of the service's CPU under sync (docs/performance.md, "Issue 49").
const POOL: usize = 512;

/// One thread's unused random bytes: `buf[used..]`, each handed out once and zeroed then.
struct Pool {
    buf: [u8; POOL],
    used: usize,
}

thread_local! {
    static RANDOM: std::cell::RefCell<Pool> = const { std::cell::RefCell::new(Pool { buf: [0; POOL], used: POOL }) };
}

/// The OS RNG failing is not recoverable and never happens on supported platforms.
fn os_random(buf: &mut [u8]) {
    getrandom::fill(buf).expect("operating system random source");
}

/// `n` bytes from the operating system's CSPRNG (through the thread's pool: every byte comes
/// from it and is used once).
pub fn random_bytes<const N: usize>() -> [u8; N] {
    let mut out = [0u8; N];
    if N > POOL {
        os_random(&mut out);
        return out;
    }
    RANDOM.with_borrow_mut(|p| {
        if POOL - p.used < N {
            os_random(&mut p.buf);
            p.used = 0;
        }
        let taken = &mut p.buf[p.used..p.used + N];
        out.copy_from_slice(taken);
        taken.fill(0);
        p.used += N;
    });
    out
}

/// Lower-case hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[usize::from(b >> 4)] as char);
        s.push(DIGITS[usize::from(b & 15)] as char);
    }
    s
}

/// A prefixed opaque id: `prefix` + `len` Crockford characters (5 random bits each).
pub fn unique_id(prefix: &str, len: usize) -> String {
    let bytes = random_bytes::<32>();
    let mut s = String::with_capacity(prefix.len() + len);
    s.push_str(prefix);
    for b in bytes.iter().take(len.min(32)) {
        s.push(CROCKFORD[usize::from(b & 31)] as char);
    }
    s
}

fn unix_millis() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// `prefix` + 10 Crockford characters of the millisecond clock + `random` random ones. New
/// ids sort by creation, so their unique-index inserts land on the index's last page instead
/// of a random one (measured: the random keys cost most of an order's write; see
/// docs/performance.md).
pub fn sortable_id(prefix: &str, random: usize) -> String {
    let ms = unix_millis();
    let mut s = String::with_capacity(prefix.len() + 10 + random);
    s.push_str(prefix);
    for i in (0..10).rev() {
        s.push(CROCKFORD[((ms >> (5 * i)) & 31) as usize] as char);
    }
    s.push_str(&unique_id("", random));
    s
}

/// Driver ids: `DRV` + 10 time + 10 random characters (50 random bits).
pub fn driver_id() -> String {
    sortable_id("DRV", 10)
}
/// Order ids: `ORD` + 10 time + 10 random characters (50 random bits).
pub fn order_unique_id() -> String {
    sortable_id("ORD", 10)
}
/// Shipment order ids: `SO` + 10 time + 10 random characters.
pub fn shipment_order_unique_id() -> String {
    sortable_id("SO", 10)
}
/// Asynchronous order requests: `RQ` + 10 time + 12 random characters (60 random bits).
pub fn request_id() -> String {
    sortable_id("RQ", 12)
}
/// Characters of the cyclic clock in a `cyclic_id`.
const CYCLE_CHARS: u32 = 5;
/// Milliseconds one step of the cyclic clock lasts (a power of two).
const CYCLE_STEP_MS: u64 = 64;

/// `prefix`, then 5 Crockford characters of a 64 ms clock that wraps every 2^25 steps (24.8
/// days), then `random` random ones: the short codes people read, scan or type. Every code made within
/// one 64 ms step shares its first characters, so a batch of new codes lands on one or two
/// pages of the unique index instead of one random page each, however large the index has
/// grown (each step's part of the index holds only the codes of that step in earlier cycles);
/// the random characters keep the code unguessable from its neighbours (docs/api.md,
/// "Identifiers").
pub fn cyclic_id(prefix: &str, random: usize) -> String {
    cyclic_id_at(prefix, random, unix_millis())
}

/// [`cyclic_id`] at `millis` since the Unix epoch.
fn cyclic_id_at(prefix: &str, random: usize, millis: u64) -> String {
    let step = millis / CYCLE_STEP_MS;
    let mut s = String::with_capacity(prefix.len() + CYCLE_CHARS as usize + random);
    s.push_str(prefix);
    for i in (0..CYCLE_CHARS).rev() {
        s.push(CROCKFORD[((step >> (5 * i)) & 31) as usize] as char);
    }
    s.push_str(&unique_id("", random));
    s
}

/// Pick-up shipment ids: `PU` + 5 cyclic clock + 12 random characters (60 random bits).
pub fn pick_up_unique_id() -> String {
    cyclic_id("PU", 12)
}
/// Drop-off unique ids are the tracking codes: `DS` + 5 cyclic clock + 12 random characters
/// (60 random bits), unique per table.
pub fn tracking_code() -> String {
    cyclic_id("DS", 12)
}
/// Parcel codes printed on labels: `P` + 5 cyclic clock + 11 random characters (55 random bits).
pub fn pick_up_code() -> String {
    cyclic_id("P", 11)
}

/// Length of a `url_token`.
pub const URL_TOKEN_LEN: usize = 30;

/// An unguessable URL token: 48 bits of the millisecond clock (for index locality, as in
/// `sortable_id`) then 128 random bits, base64url without padding: 30 characters.
pub fn url_token() -> String {
    use base64::Engine;
    let mut bytes = [0u8; 22];
    bytes[..6].copy_from_slice(&unix_millis().to_be_bytes()[2..]);
    bytes[6..].copy_from_slice(&random_bytes::<16>());
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unique_ids_have_prefix_length_and_alphabet() {
        let t = tracking_code();
        assert_eq!(t.len(), 19);
        assert!(t.starts_with("DS"));
        assert!(t[2..].bytes().all(|b| CROCKFORD.contains(&b)));
        assert_ne!(tracking_code(), tracking_code());
        assert_eq!(pick_up_code().len(), 17);
        assert_eq!(pick_up_unique_id().len(), 19);
        assert_eq!(url_token().len(), URL_TOKEN_LEN);
        assert_ne!(url_token(), url_token());
        let (a, b) = (order_unique_id(), order_unique_id());
        // Codes of one 64 ms step share their clock characters and sort after the step
        // before; the clock wraps after 2^25 steps; the random part differs.
        let at = 1_795_000_000_000; // 2026-11-18, a multiple of 64 ms
        let (x, y) = (cyclic_id_at("DS", 12, at), cyclic_id_at("DS", 12, at + 63));
        assert_eq!(x[..7], y[..7], "one step, one prefix");
        assert_ne!(x[7..], y[7..], "random part");
        let next = cyclic_id_at("DS", 12, at + 64);
        assert!(next[..7] > x[..7] || x[2..7] == *"ZZZZZ", "the next step sorts after");
        assert_eq!(cyclic_id_at("DS", 12, at)[..7], cyclic_id_at("DS", 12, at + 64 * (1 << 25))[..7], "wraps");
        assert_eq!(a.len(), 23);
        assert!(a[..8] <= b[..8], "time-ordered prefix");
    }

    /// Draws through the pool never repeat bytes across a refill, and a draw larger than the
    /// pool comes straight from the OS.
    #[test]
    fn pooled_draws_are_distinct_across_refills() {
        let mut seen = std::collections::HashSet::new();
        for _ in 0..200 {
            assert!(seen.insert(random_bytes::<32>()), "a 32-byte draw repeated");
        }
        let big = random_bytes::<1024>();
        assert!(big.iter().any(|&b| b != 0));
        assert_ne!(random_bytes::<16>(), [0u8; 16], "a draw of zeroed (used) bytes");
    }
}
