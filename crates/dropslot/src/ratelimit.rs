//! Rate limits (issue 12): token buckets (GCRA, the `governor` crate) per API token, one for
//! preview, one for order creation and one for the rest, and per client IP address for the
//! public label and tracking URLs. A client's negotiated terms may set its own buckets.
//!
//! The buckets run on the service's injectable clock, so tests refill them by moving the
//! clock, never by sleeping. Each process keeps its own buckets (docs/operations.md, "Rate
//! limits"): nothing is shared through the database, so a limit costs no I/O.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::num::NonZeroU32;
use std::sync::RwLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::extract::{ConnectInfo, FromRef, FromRequestParts};
use axum::http::HeaderValue;
use axum::http::request::Parts;
use governor::middleware::{NoOpMiddleware, StateInformationMiddleware};
use governor::state::keyed::HashMapStateStore;
use governor::state::{InMemoryState, NotKeyed};
use governor::{Quota, RateLimiter};

use crate::error::Error;
use crate::metrics::{ClassLabels, Metrics};
use dropslot_core::config::Bucket;
use dropslot_store::TokenHash;

/// What a request is counted as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Class {
    Preview,
    Orders,
    Other,
    /// A label or tracking URL, per client address.
    Public,
}

impl Class {
    /// The policy's name in the `RateLimit-Policy` and `RateLimit` headers.
    pub fn name(self) -> &'static str {
        match self {
            Class::Preview => "preview",
            Class::Orders => "orders",
            Class::Other => "other",
            Class::Public => "public",
        }
    }

    /// The class of an API route by its template.
    pub fn of_route(route: &str) -> Class {
        if route.ends_with("/requests/preview") {
            Class::Preview
        } else if route.ends_with("/requests/sync") || route.ends_with("/requests/async") {
            Class::Orders
        } else {
            Class::Other
        }
    }
}

/// The time buckets refill by: real time since start, plus how far a pinned clock was moved
/// (tests refill a bucket by moving the clock; a demo pinned with `DROPSLOT_NOW` still
/// refills with real time, so it never locks a token out for good).
#[derive(Clone)]
struct ServiceClock {
    clock: dropslot_core::clock::Clock,
    started: std::time::Instant,
    pinned_at: Option<jiff::Timestamp>,
}

impl ServiceClock {
    fn new(clock: dropslot_core::clock::Clock) -> ServiceClock {
        let pinned_at = clock.is_pinned().then(|| clock.now());
        ServiceClock { clock, started: std::time::Instant::now(), pinned_at }
    }
}

impl governor::clock::Clock for ServiceClock {
    type Instant = Duration;

    fn now(&self) -> Duration {
        let moved = self.pinned_at.map_or(Duration::ZERO, |at| {
            let us = self.clock.now().as_microsecond() - at.as_microsecond();
            Duration::from_micros(u64::try_from(us).unwrap_or(0))
        });
        self.started.elapsed() + moved
    }
}

type Keyed<K> = RateLimiter<K, HashMapStateStore<K>, ServiceClock, NoOpMiddleware<Duration>>;
/// A token's bucket reports what is left after each request (the `RateLimit` header).
type Direct = RateLimiter<NotKeyed, InMemoryState, ServiceClock, StateInformationMiddleware>;
/// One bucket per token (its SHA-256), class and terms. Checking one is a compare-and-swap;
/// the map is only written when a token is first seen (or its client's terms change).
/// Each with its `RateLimit-Policy` value, which depends only on the key's class and terms.
/// Keyed by the token's SHA-256 (uniform, and only of tokens that authenticated): a fast
/// hash of it is as good as a keyed one, and `SipHash` over its 32 bytes was a visible part of
/// a preview's cost (issue 49).
type TokenLimiters = HashMap<(Class, Bucket, [u8; 32]), (Direct, HeaderValue), rustc_hash::FxBuildHasher>;

/// A refusal: which bucket, and when a request would be let through again.
#[derive(Debug, Clone, Copy)]
pub struct Refused {
    pub class: Class,
    pub bucket: Bucket,
    pub retry_after: Duration,
}

/// The per-address limiter forgets idle addresses once it holds this many.
const MAX_ADDRESSES: usize = 100_000;
/// Token buckets kept at most.
const MAX_TOKEN_BUCKETS: usize = 100_000;

pub struct Limiters {
    clock: ServiceClock,
    /// The token buckets (read-locked to check one: requests of different tokens, or of one,
    /// never wait for each other).
    tokens: RwLock<TokenLimiters>,
    public: Option<(Bucket, Keyed<IpAddr>)>,
    public_checks: AtomicU64,
    /// Where refusals are counted.
    metrics: std::sync::Arc<Metrics>,
}

fn quota(b: Bucket) -> Option<Quota> {
    let rate = NonZeroU32::new(b.per_second)?;
    let burst = NonZeroU32::new(b.burst).unwrap_or(NonZeroU32::MIN);
    Some(Quota::per_second(rate).allow_burst(burst))
}

impl Limiters {
    pub fn new(clock: dropslot_core::clock::Clock, public: Bucket, metrics: std::sync::Arc<Metrics>) -> Limiters {
        let clock = ServiceClock::new(clock);
        let public = quota(public).map(|q| (public, RateLimiter::hashmap_with_clock(q, clock.clone())));
        Limiters { clock, tokens: RwLock::default(), public, public_checks: AtomicU64::new(0), metrics }
    }

    /// A refusal as the 429 error, counted in `/metrics`.
    pub fn refuse(&self, r: Refused) -> Error {
        self.metrics.rate_limited.get_or_create(&ClassLabels { class: r.class.name() }).inc();
        Error::RateLimited { retry_after: r.retry_after_seconds(), policy: r.policy_header(), limit: r.limit_header() }
    }

    fn refused(&self, class: Class, bucket: Bucket, until: &governor::NotUntil<Duration>) -> Refused {
        use governor::clock::Clock as _;
        Refused { class, bucket, retry_after: until.wait_time_from(self.clock.now()) }
    }

    /// Takes one request of `class` from the token's bucket: what is left (`None` when the
    /// bucket is off), or the refusal.
    pub fn check_token(&self, class: Class, bucket: Bucket, token: &TokenHash) -> Result<Option<Allowed>, Refused> {
        let Some(q) = quota(bucket) else { return Ok(None) };
        let allowed = |s: governor::middleware::StateSnapshot, policy: &HeaderValue| {
            Some(Allowed { class, bucket, remaining: s.remaining_burst_capacity(), policy: policy.clone() })
        };
        let key = (class, bucket, token.0);
        // A poisoned map only means another request panicked while inserting: its contents
        // are still whole.
        {
            let map = self.tokens.read().unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Some((limiter, policy)) = map.get(&key) {
                return limiter
                    .check()
                    .map(|s| allowed(s, policy))
                    .map_err(|until| self.refused(class, bucket, &until));
            }
        }
        let mut map = self.tokens.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        // Only tokens that authenticated get here, so this grows with the live tokens (and
        // their terms); a map that still outgrows the bound starts over (every bucket full).
        if map.len() >= MAX_TOKEN_BUCKETS {
            map.clear();
        }
        let (limiter, policy) = map.entry(key).or_insert_with(|| {
            let limiter =
                RateLimiter::direct_with_clock(q, self.clock.clone()).with_middleware::<StateInformationMiddleware>();
            let policy = HeaderValue::try_from(policy(class, bucket)).unwrap_or(HeaderValue::from_static(""));
            (limiter, policy)
        });
        limiter.check().map(|s| allowed(s, policy)).map_err(|until| self.refused(class, bucket, &until))
    }

    /// Takes one request from the client address's bucket for public URLs.
    pub fn check_address(&self, ip: IpAddr) -> Result<(), Refused> {
        let Some((bucket, limiter)) = &self.public else { return Ok(()) };
        if self.public_checks.fetch_add(1, Ordering::Relaxed) % 1024 == 0 && limiter.len() > MAX_ADDRESSES {
            limiter.retain_recent();
        }
        limiter.check_key(&ip).map_err(|until| self.refused(Class::Public, *bucket, &until))
    }
}

/// A request let through, and what its bucket has left.
#[derive(Debug, Clone)]
pub struct Allowed {
    pub class: Class,
    pub bucket: Bucket,
    pub remaining: u32,
    /// `RateLimit-Policy`, as on a 429 (made once per bucket).
    pub policy: HeaderValue,
}

impl Allowed {
    /// `RateLimit`: what remains, and the seconds until the bucket is full again.
    pub fn limit_header(&self) -> HeaderValue {
        let missing = u64::from(self.bucket.burst.max(1).saturating_sub(self.remaining));
        let refill = missing.div_ceil(u64::from(self.bucket.per_second.max(1)));
        // Written by hand, as `"class";r=N;t=N`: `format!` was two thirds of what a rate limit
        // cost a preview (1,400 of 2,250 instructions under callgrind, issue 49).
        let (mut remaining, mut seconds) = (itoa::Buffer::new(), itoa::Buffer::new());
        let (class, r, t) = (self.class.name(), remaining.format(self.remaining), seconds.format(refill));
        let mut text = Vec::with_capacity(class.len() + r.len() + t.len() + 8);
        for part in ["\"", class, "\";r=", r, ";t=", t] {
            text.extend_from_slice(part.as_bytes());
        }
        HeaderValue::from_maybe_shared(bytes::Bytes::from(text)).unwrap_or(HeaderValue::from_static(""))
    }
}

/// A bucket as a quota of `burst` requests over the seconds it takes to refill
/// (draft-ietf-httpapi-ratelimit-headers).
fn policy(class: Class, bucket: Bucket) -> String {
    let window = u64::from(bucket.burst.max(1)).div_ceil(u64::from(bucket.per_second.max(1)));
    format!("\"{}\";q={};w={}", class.name(), bucket.burst, window.max(1))
}

impl Refused {
    /// Whole seconds to wait, at least 1 (`Retry-After`).
    pub fn retry_after_seconds(&self) -> u64 {
        let whole = self.retry_after.as_secs() + u64::from(self.retry_after.subsec_nanos() > 0);
        whole.max(1)
    }

    /// `RateLimit-Policy` (draft-ietf-httpapi-ratelimit-headers): the bucket as a quota of
    /// `burst` requests over the seconds it takes to refill.
    pub fn policy_header(&self) -> String {
        policy(self.class, self.bucket)
    }

    /// `RateLimit`: nothing remains until the reset.
    pub fn limit_header(&self) -> String {
        format!("\"{}\";r=0;t={}", self.class.name(), self.retry_after_seconds())
    }
}

/// A label or tracking URL's caller, counted against its address's bucket (a 429 over it).
pub struct PublicLimit;

impl<S> FromRequestParts<S> for PublicLimit
where
    S: Send + Sync,
    std::sync::Arc<Limiters>: FromRef<S>,
{
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Error> {
        let Some(ConnectInfo(peer)) = parts.extensions.get::<ConnectInfo<SocketAddr>>().copied() else {
            return Ok(PublicLimit);
        };
        let limiters = std::sync::Arc::<Limiters>::from_ref(state);
        limiters.check_address(peer.ip()).map_err(|r| limiters.refuse(r))?;
        Ok(PublicLimit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_empties_and_refills_on_the_clock() {
        let clock = dropslot_core::clock::Clock::pinned("2026-11-23T12:00:00Z".parse().unwrap());
        let limiters = Limiters::new(clock.clone(), Bucket { per_second: 0, burst: 0 }, std::sync::Arc::default());
        let b = Bucket { per_second: 2, burst: 3 };
        let t = TokenHash([7; 32]);
        for _ in 0..3 {
            assert!(limiters.check_token(Class::Preview, b, &t).is_ok());
        }
        let refused = limiters.check_token(Class::Preview, b, &t).unwrap_err();
        assert_eq!(refused.retry_after_seconds(), 1);
        assert_eq!(refused.policy_header(), "\"preview\";q=3;w=2");
        assert!(limiters.check_token(Class::Orders, b, &t).is_ok(), "another class has its own bucket");
        assert!(limiters.check_token(Class::Preview, b, &TokenHash([8; 32])).is_ok(), "another token too");
        clock.advance(jiff::SignedDuration::from_millis(500));
        assert!(limiters.check_token(Class::Preview, b, &t).is_ok(), "half a second refills one");
        assert!(limiters.check_token(Class::Preview, b, &t).is_err());
        assert!(limiters.check_address("127.0.0.1".parse().unwrap()).is_ok(), "0 = no limit");
    }

    #[test]
    fn the_ratelimit_header_says_what_remains_and_when_the_bucket_is_full() {
        let header = |class, per_second, burst, remaining| {
            let a = Allowed {
                class,
                bucket: Bucket { per_second, burst },
                remaining,
                policy: HeaderValue::from_static(""),
            };
            a.limit_header().to_str().unwrap().to_string()
        };
        assert_eq!(header(Class::Preview, 2, 3, 3), "\"preview\";r=3;t=0");
        assert_eq!(header(Class::Orders, 2, 3, 0), "\"orders\";r=0;t=2");
        assert_eq!(
            header(Class::Other, 1_000_000, u32::MAX, 7),
            format!("\"other\";r=7;t={}", (u64::from(u32::MAX) - 7).div_ceil(1_000_000))
        );
    }

    #[test]
    fn routes_map_to_their_class() {
        assert_eq!(Class::of_route("/scheduled-service/api/v1/requests/preview"), Class::Preview);
        assert_eq!(Class::of_route("/scheduled-service/api/v1/requests/sync"), Class::Orders);
        assert_eq!(Class::of_route("/scheduled-service/api/v1/orders"), Class::Other);
    }
}
