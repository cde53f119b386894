//! Open subscriptions: results shared by identical subscriptions, grouped by shape, with the
//! limits per visitor and per instance and the bookkeeping of when each shape is due.

use super::answer::{LiveAnswer, Written};
use super::LiveSettings;
use crate::pipeline::changes::{Changes, Moved, Stamp};
use crate::pipeline::prepare::{Client, Shaped};
use apijet_core::{Method, Visitor};
use apijet_plan::read::{Dependencies, ShapeKey};
use bytes::Bytes;
use serde_json::{Map, Value as Json};
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;
use tokio::sync::watch;

/// What a subscription asks, prepared once: the same request its GET would be.
#[derive(Debug, Clone)]
pub struct Query {
    /// GET, GETS, HEAD or HEADS.
    pub method: Method,
    /// Who asks.
    pub client: Client,
    /// The request as sent, for GETS and HEADS: prepared again on every refetch, since the
    /// `Request` structures that verify it may have changed.
    pub source: Option<Bytes>,
    /// The request's shape (its condition values in slots), verified by its `Request`
    /// structure for GETS and HEADS when it was subscribed, and its values.
    pub read: Shaped,
    /// The key of its plan: the results of one shape are refetched together.
    pub shape: ShapeKey,
}

/// What a result is kept under: identical subscriptions (one shape, the same values, the same
/// visitor) share one result.
pub type ResultKey = (ShapeKey, String);

impl Query {
    /// The query of `read`, prepared from `source` for `client`.
    pub fn new(read: Shaped, client: Client, source: Bytes) -> Query {
        let method = read.method;
        Query {
            method,
            shape: ShapeKey::of(&read.req, method, client.visitor.is_some()),
            source: matches!(method, Method::Gets | Method::Heads).then_some(source),
            client,
            read,
        }
    }

    /// The visitor who asks.
    pub fn visitor(&self) -> Option<&Visitor> {
        self.client.visitor.as_ref()
    }

    /// The key of its result.
    pub fn key(&self) -> ResultKey {
        let values = serde_json::to_string(&self.read.values).unwrap_or_default();
        // Everything the token carries decides what the visitor sees.
        (
            self.shape.clone(),
            format!("{:?}\u{0}{values}", self.client.visitor),
        )
    }
}

/// Who a per-visitor limit counts: a login, else the client's address.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Holder {
    /// A logged-in visitor.
    User(i64),
    /// An anonymous client.
    Address(IpAddr),
    /// An anonymous client whose address is unknown.
    Unknown,
}

/// One result, shared by the identical subscriptions that follow it.
pub struct Shared {
    /// The request.
    pub query: Query,
    /// The latest answer; each stream holds a receiver and sends only the newest it sees. Once
    /// every stream took it, only its id and size are kept.
    pub latest: watch::Sender<Arc<LiveAnswer>>,
    /// The latest answer's content, kept while some subscriber wants patches against it and
    /// it is within `patch_bytes`.
    content: Mutex<Option<Map<String, Json>>>,
    /// Subscribers that want patches.
    patchers: AtomicUsize,
    /// The most bytes of an answer kept as the base of the next patch (`live_patch_bytes`).
    patch_bytes: usize,
    /// The size of the content kept (0: none).
    content_bytes: AtomicUsize,
}

impl Shared {
    fn new(query: Query, written: &Written, patch_bytes: usize) -> Shared {
        // Its first subscriber sends its first answer itself.
        let first = LiveAnswer::sent(written.id.clone(), written.text.len());
        Shared {
            query,
            latest: watch::channel(Arc::new(first)).0,
            content: Mutex::new(None),
            patchers: AtomicUsize::new(0),
            patch_bytes,
            content_bytes: AtomicUsize::new(0),
        }
    }

    /// Whether some subscriber of it wants patches (its answers are read as JSON).
    pub fn wants_patches(&self) -> bool {
        self.patchers.load(Ordering::Relaxed) > 0
    }

    /// Makes `written` the latest answer when it differs from it; returns whether it did.
    pub fn publish(&self, written: Written) -> bool {
        let previous = {
            let latest = self.latest.borrow();
            if latest.is(&written) {
                return false;
            }
            latest.id.clone()
        };
        let mut content = self.content.lock().unwrap_or_else(|e| e.into_inner());
        let patch = match (self.wants_patches(), content.as_ref(), &written.content) {
            (true, Some(old), Some(new)) => {
                let mut ops = super::patch::diff(old, new);
                ops.push(
                    serde_json::json!({"op": "replace", "path": "/time", "value": written.time}),
                );
                Some((
                    previous,
                    bytes::Bytes::from(serde_json::to_vec(&ops).unwrap_or_default()),
                ))
            }
            _ => None,
        };
        let streams = self.latest.receiver_count();
        let answer = LiveAnswer::new(&written, patch, streams);
        *content = self.patch_base(written);
        self.content_bytes.store(
            content.as_ref().map_or(0, |_| answer.size),
            Ordering::Relaxed,
        );
        drop(content);
        self.latest.send_replace(Arc::new(answer));
        true
    }

    /// Bytes it holds of its answers: the latest, until every stream took it, and the base of
    /// the next patch.
    pub fn held_bytes(&self) -> usize {
        self.latest.borrow().held_bytes() + self.content_bytes.load(Ordering::Relaxed)
    }

    /// What is kept of `written` as the base of the next patch: its content, while someone
    /// wants patches and it is within the budget.
    fn patch_base(&self, written: Written) -> Option<Map<String, Json>> {
        (self.wants_patches() && written.text.len() <= self.patch_bytes)
            .then_some(written.content)
            .flatten()
    }
}

/// The results of one shape, refetched together.
struct Shape {
    results: Vec<Arc<Shared>>,
    /// What its plan depends on.
    deps: Dependencies,
    /// The values of one of its results make it depend on the clock or chance.
    volatile: bool,
    last_started: Instant,
    dirty: bool,
    running: bool,
}

struct Entry {
    shared: Arc<Shared>,
    shape: ShapeKey,
    streams: usize,
}

#[derive(Default)]
struct Inner {
    results: HashMap<ResultKey, Entry>,
    shapes: HashMap<ShapeKey, Shape>,
    holders: HashMap<Holder, usize>,
    open: usize,
}

/// Every open subscription of an instance.
#[derive(Default)]
pub struct Registry {
    inner: Mutex<Inner>,
}

/// Why a subscription is refused before it starts.
#[derive(Debug)]
pub enum Refusal {
    /// `live_max_subscriptions` are open.
    Instance(usize),
    /// This visitor holds `live_max_per_visitor` open.
    Visitor(usize),
}

/// A place counted against the limits, given back when dropped.
pub struct Seat {
    registry: Arc<Registry>,
    holder: Holder,
}

impl Drop for Seat {
    fn drop(&mut self) {
        let mut inner = self.registry.lock();
        inner.open = inner.open.saturating_sub(1);
        if let Some(n) = inner.holders.get_mut(&self.holder) {
            *n -= 1;
            if *n == 0 {
                inner.holders.remove(&self.holder);
            }
        }
    }
}

/// One stream's hold on its result: dropping it ends the subscription.
pub struct Subscription {
    registry: Arc<Registry>,
    key: ResultKey,
    patch: bool,
    _seat: Seat,
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let mut inner = self.registry.lock();
        let Some(entry) = inner.results.get_mut(&self.key) else {
            return;
        };
        if self.patch {
            entry.shared.patchers.fetch_sub(1, Ordering::Relaxed);
        }
        entry.streams -= 1;
        if entry.streams > 0 {
            return;
        }
        let (shared, shape_key) = match inner.results.remove(&self.key) {
            Some(e) => (e.shared, e.shape),
            None => return,
        };
        if let Some(shape) = inner.shapes.get_mut(&shape_key) {
            shape.results.retain(|r| !Arc::ptr_eq(r, &shared));
            if shape.results.is_empty() {
                inner.shapes.remove(&shape_key);
            }
        }
    }
}

/// A subscription about to join its result.
pub struct Joining {
    /// Its place under the limits.
    pub seat: Seat,
    /// What it asks.
    pub query: Query,
    /// Its first answer.
    pub written: Written,
    /// What its plan depends on.
    pub deps: Dependencies,
    /// When that read started.
    pub read_at: Instant,
    /// The generations of what writes changed, when that read started.
    pub seen: Stamp,
    /// It wants patches.
    pub patch: bool,
}

/// A shape whose refetch is due: its key and its results.
pub struct Due {
    pub shape: ShapeKey,
    pub results: Vec<Arc<Shared>>,
}

impl Registry {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Counts a new subscription against the limits, or says which one it would pass.
    pub fn seat(
        self: &Arc<Self>,
        holder: Holder,
        settings: &LiveSettings,
    ) -> Result<Seat, Refusal> {
        let mut inner = self.lock();
        if inner.open >= settings.max_open {
            return Err(Refusal::Instance(settings.max_open));
        }
        let held = inner.holders.get(&holder).copied().unwrap_or(0);
        if held >= settings.max_per_visitor {
            return Err(Refusal::Visitor(settings.max_per_visitor));
        }
        inner.open += 1;
        *inner.holders.entry(holder.clone()).or_default() += 1;
        Ok(Seat {
            registry: Arc::clone(self),
            holder,
        })
    }

    /// Joins the result of the new subscription's query (made from its first answer when no
    /// one follows it yet): the result, the stream's receiver of its answers (made before any
    /// later answer is published, so that each answer is held until this stream took it too)
    /// and the subscription. A write `changes` tell of after the first read started may have
    /// been missed by it: its shape is due at once. Looked at under the registry's lock, which
    /// [`Registry::apply_marks`] takes too, so that no write falls between the two.
    pub fn join(
        self: &Arc<Self>,
        new: Joining,
        changes: &Changes,
        patch_bytes: usize,
    ) -> (Arc<Shared>, watch::Receiver<Arc<LiveAnswer>>, Subscription) {
        let Joining {
            seat,
            query,
            written,
            deps,
            read_at,
            seen,
            patch,
        } = new;
        let key = query.key();
        let shape = query.shape.clone();
        let volatile = deps.volatile_with(&query.read.values);
        let mut inner = self.lock();
        let missed = changes.moved_since(seen, |t| deps.depends_on(t));
        let (shared, fresh) = match inner.results.get_mut(&key) {
            Some(entry) => {
                entry.streams += 1;
                (Arc::clone(&entry.shared), Some(written))
            }
            None => {
                let shared = Arc::new(Shared::new(query, &written, patch_bytes));
                if patch {
                    shared.patchers.fetch_add(1, Ordering::Relaxed);
                    let size = written.text.len();
                    let base = shared.patch_base(written);
                    shared
                        .content_bytes
                        .store(base.as_ref().map_or(0, |_| size), Ordering::Relaxed);
                    *shared.content.lock().unwrap_or_else(|e| e.into_inner()) = base;
                    shared.patchers.fetch_sub(1, Ordering::Relaxed);
                }
                inner.results.insert(
                    key.clone(),
                    Entry {
                        shared: Arc::clone(&shared),
                        shape: shape.clone(),
                        streams: 1,
                    },
                );
                let s = inner.shapes.entry(shape).or_insert_with(|| Shape {
                    results: Vec::new(),
                    deps: Dependencies::default(),
                    volatile: false,
                    last_started: read_at,
                    dirty: false,
                    running: false,
                });
                s.results.push(Arc::clone(&shared));
                s.deps.merge(&deps);
                s.volatile |= volatile;
                s.dirty |= missed;
                (shared, None)
            }
        };
        if patch {
            shared.patchers.fetch_add(1, Ordering::Relaxed);
        }
        let answers = shared.latest.subscribe();
        drop(inner);
        if let Some(written) = fresh {
            // This subscriber read just now: when that differs from what the others were last
            // sent, it is newer, and they get it too.
            shared.publish(written);
        }
        let subscription = Subscription {
            registry: Arc::clone(self),
            key,
            patch,
            _seat: seat,
        };
        (shared, answers, subscription)
    }

    /// Notes what moved: every shape that reads one of its tables is due.
    pub fn apply_marks(&self, moved: &Moved) {
        if moved.is_empty() {
            return;
        }
        let mut inner = self.lock();
        for shape in inner.shapes.values_mut() {
            if moved.every || moved.tables.iter().any(|t| shape.deps.depends_on(t)) {
                shape.dirty = true;
            }
        }
    }

    /// The shapes due at `now` (each marked as running), and when the next one will be.
    pub fn due(&self, now: Instant, settings: &LiveSettings) -> (Vec<Due>, Option<Instant>) {
        let mut inner = self.lock();
        let mut due = Vec::new();
        let mut next: Option<Instant> = None;
        for (key, shape) in inner.shapes.iter_mut() {
            if shape.running {
                continue;
            }
            let poll = if shape.volatile || shape.deps.volatile {
                Some(settings.interval)
            } else {
                settings.poll
            };
            let at = match (shape.dirty, poll) {
                (true, _) => Some(shape.last_started + settings.interval),
                (false, Some(p)) => Some(shape.last_started + p),
                (false, None) => None,
            };
            match at {
                Some(at) if at <= now => {
                    shape.running = true;
                    shape.dirty = false;
                    shape.last_started = now;
                    due.push(Due {
                        shape: key.clone(),
                        results: shape.results.clone(),
                    });
                }
                Some(at) => next = Some(next.map_or(at, |n| n.min(at))),
                None => {}
            }
        }
        (due, next)
    }

    /// A refetch of `shape` ended; `deps` is what the plans it ran depend on (the rules may
    /// have changed with a reload). What a shape depends on only grows.
    pub fn finished(&self, shape: &ShapeKey, deps: &Dependencies) {
        let mut inner = self.lock();
        if let Some(s) = inner.shapes.get_mut(shape) {
            s.running = false;
            s.deps.merge(deps);
        }
    }

    /// Open subscriptions and shapes, and the bytes of answers their results hold.
    pub fn counts(&self) -> (usize, usize, usize) {
        let inner = self.lock();
        let held = inner.results.values().map(|e| e.shared.held_bytes()).sum();
        (inner.open, inner.shapes.len(), held)
    }
}
