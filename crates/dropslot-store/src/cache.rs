//! Read caches shared by both backends (issue 13): what every request reads and almost never
//! changes (a token's principal; which saved address a pick-up text is), each value tagged
//! with the backend's **epoch** read before the value's database read. Every change to such
//! data gives a new epoch in the same moment it commits (`SQLite`: the epoch file touched after
//! the commit, `sqlite/epoch.rs`; `PostgreSQL`: a counter row bumped in the change's own
//! transaction), so a cached value is stale from the very next epoch read, in every process.
//!
//! - A value lives at most `MAX_AGE`, which bounds what a hand edit of the database (or a
//!   process killed between commit and touch, on `SQLite`) can leave stale.
//! - Each cache is bounded; when full it starts over.
//! - Within one HTTP request (`request_scope`, installed by the composition root on the
//!   router), the epoch is read once, at the request's first cache lookup, and its later
//!   lookups reuse it: the request sees the caches as of that instant, as if it had arrived
//!   then. The next request reads the epoch afresh, so a revocation still fails it.

use std::cell::Cell;
use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The longest a cached value is used without reading the database again.
pub const MAX_AGE: Duration = Duration::from_secs(1);

/// An epoch: an opaque value that changes with every change to what the caches hold.
pub type Stamp = u128;

tokio::task_local! {
    /// The epoch this request has read, and the `Epoch` it is of.
    static REQUEST_EPOCH: Cell<Option<(usize, Stamp)>>;
}

/// Runs `request` so that its cache lookups read the epoch once (the router wraps every HTTP
/// request in it). Work outside it (workers, the dispatcher) reads the epoch at every lookup.
pub async fn request_scope<F: std::future::Future>(request: F) -> F::Output {
    REQUEST_EPOCH.scope(Cell::new(None), request).await
}

/// Tells `Epoch`s apart in `REQUEST_EPOCH`.
static NEXT_EPOCH_ID: AtomicUsize = AtomicUsize::new(0);

/// A new identity for a store's epoch in `REQUEST_EPOCH`.
pub fn epoch_id() -> usize {
    NEXT_EPOCH_ID.fetch_add(1, Ordering::Relaxed)
}

/// The epoch of store `id` this request has read, if it has.
pub fn request_epoch(id: usize) -> Option<Stamp> {
    REQUEST_EPOCH.try_with(Cell::get).ok().flatten().filter(|(of, _)| *of == id).map(|(_, e)| e)
}

/// Keeps `epoch` of store `id` for the rest of this request (outside a request: nowhere).
pub fn keep_request_epoch(id: usize, epoch: Stamp) {
    let _ = REQUEST_EPOCH.try_with(|m| m.set(Some((id, epoch))));
}

/// The key an address point lookup is cached by: the query's street, number and postal
/// prefix (its search box follows from the prefix, whose location is the dataset's).
pub type PointKey = (String, String, String);

pub fn point_key(q: &dropslot_core::geo::points::PointQuery) -> PointKey {
    (q.street.clone(), q.number.clone(), q.postal_prefix.clone())
}

/// Each query's candidates from `cache` where it holds them under `epoch`, the others read
/// by `read` (given only the queries it must answer, in order) and remembered.
pub async fn points_through<F, Fut, E>(
    cache: &EpochCache<PointKey, Vec<dropslot_core::geo::points::Candidate>>,
    epoch: Option<Stamp>,
    queries: &[dropslot_core::geo::points::PointQuery],
    read: F,
) -> Result<Vec<Vec<dropslot_core::geo::points::Candidate>>, E>
where
    F: FnOnce(Vec<dropslot_core::geo::points::PointQuery>) -> Fut,
    Fut: std::future::Future<Output = Result<Vec<Vec<dropslot_core::geo::points::Candidate>>, E>>,
{
    let mut found: Vec<Option<Vec<_>>> =
        queries.iter().map(|q| epoch.and_then(|e| cache.get(&point_key(q), e))).collect();
    let missing: Vec<usize> = (0..queries.len()).filter(|&i| found[i].is_none()).collect();
    if !missing.is_empty() {
        let read_now = read(missing.iter().map(|&i| queries[i].clone()).collect()).await?;
        for (&i, candidates) in missing.iter().zip(read_now) {
            if let Some(e) = epoch {
                cache.put(point_key(&queries[i]), e, candidates.clone());
            }
            found[i] = Some(candidates);
        }
    }
    Ok(found.into_iter().map(Option::unwrap_or_default).collect())
}

/// Values by key, each valid in the epoch it was read in, for at most `MAX_AGE`.
pub struct EpochCache<K, V> {
    capacity: usize,
    entries: Mutex<HashMap<K, Entry<V>>>,
}

struct Entry<V> {
    epoch: Stamp,
    read_at: Instant,
    value: V,
}

impl<K: Eq + Hash, V: Clone> EpochCache<K, V> {
    pub fn new(capacity: usize) -> Self {
        EpochCache { capacity, entries: Mutex::new(HashMap::new()) }
    }

    /// The value of `key`, if it was read in `epoch` and recently.
    pub fn get(&self, key: &K, epoch: Stamp) -> Option<V> {
        let entries = self.entries.lock().ok()?;
        let e = entries.get(key)?;
        (e.epoch == epoch && e.read_at.elapsed() < MAX_AGE).then(|| e.value.clone())
    }

    /// Remembers a value read from the database after `epoch` was read.
    pub fn put(&self, key: K, epoch: Stamp, value: V) {
        let Ok(mut entries) = self.entries.lock() else { return };
        if entries.len() >= self.capacity {
            entries.clear();
        }
        entries.insert(key, Entry { epoch, read_at: Instant::now(), value });
    }

    /// Drops every value (this process's own change; the touch tells the others).
    pub fn clear(&self) {
        if let Ok(mut entries) = self.entries.lock() {
            entries.clear();
        }
    }
}

/// Values kept for a fixed time: what may be a little stale by design (slot capacity as the
/// preview sees it: the order's own transaction decides), refreshed by the first read after
/// they expire, and dropped at once when this process changes what they show.
pub struct Ttl<K, V> {
    ttl: Duration,
    entries: Mutex<HashMap<K, (Instant, V)>>,
}

impl<K: Eq + Hash, V: Clone> Ttl<K, V> {
    pub fn new(ttl: Duration) -> Self {
        Self { ttl, entries: Mutex::new(HashMap::new()) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<K, (Instant, V)>> {
        self.entries.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The value, while it is younger than the time kept.
    pub fn get(&self, key: &K) -> Option<V> {
        self.lock().get(key).filter(|(at, _)| at.elapsed() < self.ttl).map(|(_, v)| v.clone())
    }

    pub fn put(&self, key: K, value: V) {
        self.lock().insert(key, (Instant::now(), value));
    }

    pub fn clear(&self) {
        self.lock().clear();
    }

    /// Changes every value kept, each as long as it was going to be kept anyway.
    pub fn modify(&self, mut f: impl FnMut(&K, &mut V)) {
        for (k, (_, v)) in self.lock().iter_mut() {
            f(k, v);
        }
    }
}

/// Parsed documents by id, each valid for the one version it was read at: every write of
/// such a document gives it a new version and ids are never reused, so a version's content
/// never changes and a hit needs neither an epoch nor an age (the caller reads the current
/// version from the database first). Used for published day plans (issue 33): a driver call
/// reads its plans' versions, a few bytes, and parses a plan's ~400 KB only when it changed.
/// Bounded; when full it starts over.
pub struct Versioned<V> {
    capacity: usize,
    entries: Mutex<HashMap<String, (i64, std::sync::Arc<V>)>>,
}

impl<V> Versioned<V> {
    pub fn new(capacity: usize) -> Self {
        Self { capacity, entries: Mutex::new(HashMap::new()) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (i64, std::sync::Arc<V>)>> {
        self.entries.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The document `id` as of `version`, if it is held at exactly that version.
    pub fn get(&self, id: &str, version: i64) -> Option<std::sync::Arc<V>> {
        self.lock().get(id).filter(|(v, _)| *v == version).map(|(_, d)| std::sync::Arc::clone(d))
    }

    /// Remembers `id` at `version`, replacing any other version of it.
    pub fn put(&self, id: &str, version: i64, document: std::sync::Arc<V>) {
        let mut entries = self.lock();
        if entries.len() >= self.capacity && !entries.contains_key(id) {
            entries.clear();
        }
        entries.insert(id.to_string(), (version, document));
    }
}

#[cfg(test)]
mod versioned_tests {
    use super::Versioned;
    use std::sync::Arc;

    #[test]
    fn a_document_is_held_for_its_one_version_only() {
        let c = Versioned::new(2);
        c.put("a", 1, Arc::new("a1"));
        assert_eq!(c.get("a", 1).as_deref(), Some(&"a1"));
        assert!(c.get("a", 2).is_none(), "another version is a miss");
        c.put("a", 2, Arc::new("a2"));
        assert!(c.get("a", 1).is_none(), "the newer version replaces the older");
        assert_eq!(c.get("a", 2).as_deref(), Some(&"a2"));
    }

    #[test]
    fn a_full_cache_starts_over() {
        let c = Versioned::new(2);
        c.put("a", 1, Arc::new(1));
        c.put("b", 1, Arc::new(2));
        c.put("a", 2, Arc::new(3));
        assert!(c.get("b", 1).is_some(), "replacing a held id makes no room");
        c.put("c", 1, Arc::new(4));
        assert!(c.get("a", 2).is_none() && c.get("b", 1).is_none());
        assert_eq!(c.get("c", 1).as_deref(), Some(&4));
    }
}

/// A value made on first use, of a type its holder does not name: a backend's store keeps a
/// domain's state in one (the `PostgreSQL` order and move batchers, started with the first
/// order or move, on the runtime) without importing the domain that owns the type, so the
/// backend's root stays below its domains.
#[derive(Default)]
pub(crate) struct Lazy(std::sync::OnceLock<Box<dyn std::any::Any + Send + Sync>>);

impl Lazy {
    /// The value, made by `init` the first time. Each `Lazy` is read as one type only (the
    /// domain that owns it); another type is an error, not a second value.
    pub(crate) fn get_or_init<T: std::any::Any + Send + Sync>(
        &self,
        init: impl FnOnce() -> T,
    ) -> crate::StoreResult<&T> {
        self.0
            .get_or_init(|| Box::new(init()))
            .downcast_ref::<T>()
            .ok_or_else(|| crate::StoreError::Corrupt(format!("a backend slot read as {}", std::any::type_name::<T>())))
    }
}

/// The parsed published plans a driver call reads, by id at their version (`cache::Versioned`).
pub(crate) type PlanCache = Versioned<crate::StoredPlan>;
/// How many plans [`PlanCache`] holds: a day's published plans (one per depot and kind), with
/// room for a few days; each parsed plan of 1,000 stops is about 1 MB.
pub(crate) const PLAN_CACHE_PLANS: usize = 16;
