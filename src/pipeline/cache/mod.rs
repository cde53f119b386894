//! Answers kept in memory while nothing they read changed: a follower of the generations of
//! what writes changed ([`Changes`](super::changes::Changes)).
//!
//! An answer is kept under its plan's shape, its slot values and exactly the parts of the
//! visitor the plan reads ([`ReadPlan::answer_cache`]), with the stamp of the generations taken
//! *before* its read started. It is given again while no table the plan depends on moved after
//! that stamp (and, where writes of other programs cannot be heard, for at most
//! `answer_cache_ttl_ms`); an answer whose read overlapped a write is dead at its first look.
//! The store is bounded in bytes (quick_cache's S3-FIFO with a weigher): one answer may hold at
//! most an eighth of it, so a streamed answer past that is forwarded but not kept.
//!
//! A miss is read once however many readers miss it together (single flight): the first reads
//! ([`Leading`]), the others wait until its answer is kept or known not to be (an error, a
//! streamed answer past the entry limit, a client that left) and look again; a reader that
//! still misses reads on its own. Waiting is bounded by the reader's statement timeout.
//! quick_cache's placeholder guards would coalesce too, but a guard borrows the store (a
//! streamed answer is kept from a task of its own) and hands an answer that was not kept to
//! one waiter at a time, which would read one after another.

use super::answer::Answer;
use crate::metrics::CacheCounters;
use apijet_core::Visitor;
use apijet_plan::read::{Mode, ReadPlan, VisitorParts};
use apijet_response::stream::Chunk;
use bytes::{Bytes, BytesMut};
use serde_json::Value as Json;
use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, watch};

/// The bytes of a successful envelope up to `time`'s value: a kept body is cut there, and a
/// hit gets the time of its own answer.
const UNTIL_TIME: &[u8] = b"\"ok\":true,\"code\":200,\"msg\":\"success\",\"time\":";

/// The TTL of kept answers where other programs' writes are not heard, unless one is set.
pub const UNHEARD_TTL_MS: u64 = 1000;

/// What an entry costs beyond its bytes (the key, the entry, the store's slot).
const ENTRY_OVERHEAD: usize = 160;

/// Whether a hit or a miss answered (`x-apijet-cache`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheOutcome {
    /// A kept answer.
    Hit,
    /// A fresh read (kept when it could be).
    Miss,
}

impl CacheOutcome {
    /// The header value.
    pub fn as_str(self) -> &'static str {
        match self {
            CacheOutcome::Hit => "hit",
            CacheOutcome::Miss => "miss",
        }
    }
}

/// The canonical key of an answer: one spelling per plan shape, values and visitor parts.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Key(Box<[u8]>);

impl Key {
    /// The key of `plan` run with `values` for `visitor`, of whom `parts` decide the answer.
    ///
    /// Written so that no two different inputs give one key: the method ends at a NUL, the
    /// shape (UTF-8) at 0xFF, which UTF-8 never holds, the values are counted and each has a
    /// tag and a width or length ([`write_values`]), and each visitor part has a tag and a
    /// length.
    pub fn of(
        plan: &ReadPlan,
        values: &[Json],
        visitor: Option<&Visitor>,
        parts: VisitorParts,
    ) -> Key {
        let shape = plan.shape().shape();
        let visitor_len = visitor.map_or(0, |v| 9 + 9 + 8 * v.contacts.len());
        let method = plan.method.name();
        // Sized for what is written (a key grown or shrunk was reallocated on every lookup).
        let mut out =
            Vec::with_capacity(method.len() + 4 + shape.len() + values_len(values) + visitor_len);
        out.extend_from_slice(method.as_bytes());
        out.push(0);
        out.push(visitor.is_some() as u8);
        out.push(match plan.mode {
            Mode::Point => b'p',
            Mode::List => b'l',
            Mode::Nested => b'n',
            Mode::General => b'g',
        });
        out.extend_from_slice(shape.as_bytes());
        out.push(0xFF);
        write_values(values, &mut out);
        if let Some(v) = visitor {
            if parts.id {
                out.push(b'i');
                out.extend_from_slice(&v.id.to_le_bytes());
            }
            if parts.contacts {
                out.push(b'c');
                out.extend_from_slice(&(v.contacts.len() as u64).to_le_bytes());
                for c in &v.contacts {
                    out.extend_from_slice(&c.to_le_bytes());
                }
            }
        }
        Key(out.into_boxed_slice())
    }

    fn bytes(&self) -> usize {
        self.0.len()
    }
}

/// `values` as a key holds them: their count, then each with a tag and its width or length,
/// so that two lists give the same bytes only when they are equal. Not their JSON text: a
/// lookup's values are mostly strings, which serde_json escapes a byte at a time, and writing
/// them was a quarter of a hit's own work.
fn write_values(values: &[Json], out: &mut Vec<u8>) {
    let length = |out: &mut Vec<u8>, n: usize| out.extend_from_slice(&(n as u64).to_le_bytes());
    length(out, values.len());
    for v in values {
        match v {
            Json::Null => out.push(b'z'),
            Json::Bool(b) => out.push(if *b { b't' } else { b'f' }),
            Json::String(s) => {
                out.push(b's');
                length(out, s.len());
                out.extend_from_slice(s.as_bytes());
            }
            Json::Number(n) => {
                if let Some(u) = n.as_u64() {
                    out.push(b'u');
                    out.extend_from_slice(&u.to_le_bytes());
                } else if let Some(i) = n.as_i64() {
                    out.push(b'i');
                    out.extend_from_slice(&i.to_le_bytes());
                } else {
                    let text = n.to_string();
                    out.push(b'n');
                    length(out, text.len());
                    out.extend_from_slice(text.as_bytes());
                }
            }
            Json::Array(_) | Json::Object(_) => {
                // A Vec<u8> writer cannot fail, and a JSON value always serializes.
                let text = serde_json::to_vec(v).unwrap_or_default();
                out.push(b'j');
                length(out, text.len());
                out.extend_from_slice(&text);
            }
        }
    }
}

/// How many bytes [`write_values`] writes for `values` (about, for numbers that are not
/// integers and for lists and objects).
fn values_len(values: &[Json]) -> usize {
    let one = |v: &Json| match v {
        Json::Null | Json::Bool(_) => 1,
        Json::String(s) => 9 + s.len(),
        Json::Number(n) if n.is_u64() || n.is_i64() => 9,
        _ => 33,
    };
    8 + values.iter().map(one).sum::<usize>()
}

/// A kept answer.
enum Kept {
    /// A body written as JSON, up to `time`'s value.
    Body { head: Bytes, rows: u64 },
    /// A whole answer (a general read, the reads of `/crud` and live answers).
    Json(Json),
}

struct Entry<S> {
    stamp: S,
    at: Instant,
    kept: Kept,
    weight: u64,
}

#[derive(Clone)]
struct ByBytes;

impl<S> quick_cache::Weighter<Key, Arc<Entry<S>>> for ByBytes {
    fn weight(&self, _key: &Key, entry: &Arc<Entry<S>>) -> u64 {
        entry.weight
    }
}

/// Collects the keys the store lets go during one insert: what it evicted to make room, and
/// the entry the insert replaced (quick_cache reports both alike).
#[derive(Clone)]
struct LetGo;

impl<S> quick_cache::Lifecycle<Key, Arc<Entry<S>>> for LetGo {
    type RequestState = Vec<Key>;

    fn on_evict(&self, gone: &mut Vec<Key>, key: Key, _entry: Arc<Entry<S>>) {
        gone.push(key);
    }
}

type Store<S> =
    quick_cache::sync::Cache<Key, Arc<Entry<S>>, ByBytes, quick_cache::DefaultHashBuilder, LetGo>;

/// The answers kept in memory; `S` is the stamp of the generations an answer was read at.
pub struct AnswerCache<S> {
    store: Store<S>,
    /// `answer_cache = "on"`: every cacheable read, not only those asking `@cache`.
    every_read: bool,
    /// Most bytes of one entry.
    entry_limit: usize,
    /// `answer_cache_ttl_ms` as set.
    ttl_setting: Option<u64>,
    /// Most milliseconds an entry is given without looking again (0: until a write moves
    /// it), from the setting and what is heard ([`AnswerCache::heard_by`]).
    ttl_ms: AtomicU64,
    counters: Arc<CacheCounters>,
    /// The keys being read after a miss, each by its first reader.
    flights: Mutex<HashMap<Key, Arc<Flight>>>,
    /// Most time a reader waits for another's read of its key (its own statement timeout
    /// when shorter).
    max_wait: Duration,
}

/// One key's read under way; `true` once it ended.
struct Flight(watch::Sender<bool>);

/// What a lookup found.
pub enum Lookup<S: Copy + Send + Sync + 'static> {
    /// A kept answer.
    Hit(Answer),
    /// A miss: the reader reads. It leads the readers of the key that miss meanwhile (none:
    /// it waited for another's read, which left nothing it could be given).
    Miss(Option<Leading<S>>),
}

/// The first reader's read of a key after a miss: the readers of the key that miss meanwhile
/// wait until this is dropped (after its answer was kept, or found not to be keepable).
pub struct Leading<S: Copy + Send + Sync + 'static> {
    cache: Arc<AnswerCache<S>>,
    key: Key,
    flight: Arc<Flight>,
}

impl<S: Copy + Send + Sync + 'static> Drop for Leading<S> {
    fn drop(&mut self) {
        let mut flights = self.cache.flights();
        if flights
            .get(&self.key)
            .is_some_and(|f| Arc::ptr_eq(f, &self.flight))
        {
            flights.remove(&self.key);
        }
        drop(flights);
        self.flight.0.send_replace(true);
    }
}

impl<S: Copy + Send + Sync + 'static> AnswerCache<S> {
    /// A store of at most `bytes` bytes; `every_read` keeps every cacheable read's answer, not
    /// only those whose request asks (`@cache`); a reader waits at most `max_wait` for
    /// another's read of its key. `None` when `bytes` is 0.
    pub fn new(
        bytes: usize,
        every_read: bool,
        ttl_setting: Option<u64>,
        max_wait: Duration,
        counters: Arc<CacheCounters>,
    ) -> Option<AnswerCache<S>> {
        if bytes == 0 {
            return None;
        }
        let entry_limit = bytes / 8;
        let options = quick_cache::OptionsBuilder::new()
            .estimated_items_capacity((bytes / 1024).clamp(64, 1 << 20))
            .weight_capacity(bytes as u64)
            .build()
            .ok()?;
        let store = quick_cache::sync::Cache::with_options(
            options,
            ByBytes,
            quick_cache::DefaultHashBuilder::default(),
            LetGo,
        );
        Some(AnswerCache {
            store,
            every_read,
            entry_limit,
            ttl_setting,
            ttl_ms: AtomicU64::new(UNHEARD_TTL_MS),
            counters,
            flights: Mutex::default(),
            max_wait,
        })
    }

    /// How long entries are given, now that other programs' writes are heard (`programs`:
    /// the change feed's triggers are on every served table) or not (and other instances'
    /// writes, `instances`). Unheard writes bound an entry's life: an unset
    /// `answer_cache_ttl_ms` is then [`UNHEARD_TTL_MS`], and 0 is too, with a warning, rather
    /// than another program's old rows kept forever.
    pub fn heard_by(&self, programs: bool, instances: bool) {
        let ttl = match (self.ttl_setting, programs) {
            (Some(ttl), true) => ttl,
            (None, true) => 0,
            (Some(ttl), false) if ttl > 0 => ttl,
            (Some(_), false) => {
                tracing::warn!(
                    "answer_cache_ttl_ms = 0 keeps an answer until a write is heard, but the \
                     change feed's triggers are not installed: writes by other programs{} would \
                     never be seen. Kept answers are read again after {UNHEARD_TTL_MS} ms \
                     instead; `apijet live-triggers --install` installs the triggers",
                    if instances {
                        ""
                    } else {
                        " and other instances"
                    }
                );
                UNHEARD_TTL_MS
            }
            (None, false) => UNHEARD_TTL_MS,
        };
        self.ttl_ms.store(ttl, Relaxed);
    }

    fn flights(&self) -> MutexGuard<'_, HashMap<Key, Arc<Flight>>> {
        self.flights
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The answer kept under `key` (unless `moved` says a table it read moved after its
    /// stamp); on a miss while another reader reads the key, waits for that read once and
    /// looks again; else this reader leads the key's read.
    pub async fn lookup(self: &Arc<Self>, key: &Key, moved: impl Fn(S) -> bool) -> Lookup<S> {
        let mut waited = false;
        loop {
            if let Some(answer) = self.found(key, &moved) {
                self.counters.hits.fetch_add(1, Relaxed);
                return Lookup::Hit(answer);
            }
            if waited {
                self.counters.misses.fetch_add(1, Relaxed);
                return Lookup::Miss(None);
            }
            let flight = {
                let mut flights = self.flights();
                match flights.get(key) {
                    Some(flight) => Arc::clone(flight),
                    None => {
                        // A read that ended between the look above and this lock kept its
                        // answer before it let go of its flight: look once more.
                        if let Some(answer) = self.found(key, &moved) {
                            drop(flights);
                            self.counters.hits.fetch_add(1, Relaxed);
                            return Lookup::Hit(answer);
                        }
                        let flight = Arc::new(Flight(watch::Sender::new(false)));
                        flights.insert(key.clone(), Arc::clone(&flight));
                        drop(flights);
                        self.counters.misses.fetch_add(1, Relaxed);
                        return Lookup::Miss(Some(Leading {
                            cache: Arc::clone(self),
                            key: key.clone(),
                            flight,
                        }));
                    }
                }
            };
            self.counters.waited.fetch_add(1, Relaxed);
            let limit = apijet_exec::cancel::current()
                .timeout()
                .map_or(self.max_wait, |(t, _)| t.min(self.max_wait));
            let mut ended = flight.0.subscribe();
            // Past the limit the reader reads on its own, within its own timeout.
            let _ = tokio::time::timeout(limit, ended.wait_for(|e| *e)).await;
            waited = true;
        }
    }

    /// Whether the answer of `plan` run with `values` may be looked up and kept, and which
    /// parts of the visitor key it: the request asks (`@cache` 0/ALL, 2/RAM) or the setting
    /// is on (and the request does not say 1/ROM), and the plan says it may be kept.
    pub fn wanted(&self, plan: &ReadPlan, values: &[Json]) -> Option<VisitorParts> {
        let asked = match plan.cache_hint {
            Some(hint) => hint.in_memory(),
            None => self.every_read,
        };
        if !asked {
            return None;
        }
        plan.answer_cache(values)
    }

    /// The answer kept under `key`, counted as a hit or a miss (without waiting for another
    /// reader of the key).
    #[cfg(test)]
    pub fn get(&self, key: &Key, moved: impl Fn(S) -> bool) -> Option<Answer> {
        let found = self.found(key, &moved);
        let counter = match found {
            Some(_) => &self.counters.hits,
            None => &self.counters.misses,
        };
        counter.fetch_add(1, Relaxed);
        found
    }

    /// The answer kept under `key`, unless `moved` says a table it read moved after its stamp
    /// (or it is older than the TTL): then it is dropped.
    fn found(&self, key: &Key, moved: &impl Fn(S) -> bool) -> Option<Answer> {
        let entry = self.store.get(key)?;
        let ttl = self.ttl_ms.load(Relaxed);
        let expired = ttl > 0 && entry.at.elapsed() >= Duration::from_millis(ttl);
        if expired || moved(entry.stamp) {
            self.store.remove_if(key, |e| Arc::ptr_eq(e, &entry));
            self.counters.invalidations.fetch_add(1, Relaxed);
            self.held();
            return None;
        }
        let time = apijet_response::now_ms();
        Some(match &entry.kept {
            Kept::Body { head, rows } => {
                let mut body = BytesMut::with_capacity(head.len() + 21);
                body.extend_from_slice(head);
                body.extend_from_slice(itoa::Buffer::new().format(time).as_bytes());
                body.extend_from_slice(b"}");
                Answer::Bytes {
                    body: body.freeze(),
                    statements: 0,
                    rows: *rows,
                }
            }
            Kept::Json(v) => {
                let mut v = v.clone();
                if let Some(m) = v.as_object_mut() {
                    m.insert("time".into(), Json::from(time));
                }
                Answer::Counted(v, 0)
            }
        })
    }

    /// Keeps a successful body (a point lookup's, a streamed list's) read at `stamp`.
    pub fn keep_body(&self, key: Key, stamp: S, body: &[u8], rows: u64) {
        let Some(head) = head_of(body) else {
            return;
        };
        let weight = head.len() + key.bytes() + ENTRY_OVERHEAD;
        if weight > self.entry_limit {
            return;
        }
        let kept = Kept::Body {
            head: Bytes::copy_from_slice(head),
            rows,
        };
        self.put(key, stamp, kept, weight);
    }

    /// Keeps a whole successful answer read at `stamp`.
    pub fn keep_json(&self, key: Key, stamp: S, v: &Json) {
        if v.get("code").and_then(Json::as_u64) != Some(200) {
            return;
        }
        let mut counted = Counted(0);
        if serde_json::to_writer(&mut counted, v).is_err() {
            return;
        }
        // A value in memory takes more than its text; twice it is a fair bound.
        let weight = 2 * counted.0 + key.bytes() + ENTRY_OVERHEAD;
        if weight > self.entry_limit {
            return;
        }
        self.put(key, stamp, Kept::Json(v.clone()), weight);
    }

    fn put(&self, key: Key, stamp: S, kept: Kept, weight: usize) {
        let entry = Entry {
            stamp,
            at: Instant::now(),
            kept,
            weight: weight as u64,
        };
        let mut gone = Vec::new();
        self.store
            .insert_with_lifecycle(key.clone(), Arc::new(entry), &mut gone);
        let evicted = gone.iter().filter(|k| **k != key).count();
        self.counters.evictions.fetch_add(evicted as u64, Relaxed);
        self.held();
    }

    /// A streamed answer, forwarded as it comes and kept when it ended whole within the
    /// limit of one entry. The readers waiting for it (`leading`) look again once it is kept,
    /// or as soon as it cannot be: past the limit, failed, or its client left.
    pub fn tee(
        self: &Arc<Self>,
        key: Key,
        stamp: S,
        mut rx: mpsc::Receiver<Chunk>,
        leading: Option<Leading<S>>,
    ) -> Answer {
        let (tx, out) = mpsc::channel(super::answer::STREAM_CHANNEL);
        let cache = Arc::clone(self);
        tokio::spawn(async move {
            let mut leading = leading;
            let mut body: Option<Vec<u8>> = Some(Vec::new());
            let mut failed = false;
            while let Some(chunk) = rx.recv().await {
                match &chunk {
                    Chunk::Data(b) => {
                        let fits = body
                            .as_ref()
                            .is_some_and(|k| k.len() + b.len() <= cache.entry_limit);
                        match (&mut body, fits) {
                            (Some(k), true) => k.extend_from_slice(b),
                            _ => body = None,
                        }
                    }
                    // A failure, or an answer cut at its byte budget: not a whole answer.
                    Chunk::Fail(_) | Chunk::Cut(_) => failed = true,
                    Chunk::Statements(_) => {}
                }
                if body.is_none() || failed {
                    // Nothing will be kept: the waiting readers read on their own now.
                    leading = None;
                }
                if tx.send(chunk).await.is_err() {
                    // The client left: what it did not take is not a whole answer.
                    return;
                }
            }
            if let (Some(body), false) = (body, failed) {
                cache.keep_body(key, stamp, &body, 0);
            }
            drop(leading);
        });
        Answer::Stream(out)
    }

    /// Drops every kept answer (a reload).
    pub fn clear(&self) {
        self.store.clear();
        self.held();
    }

    fn held(&self) {
        self.counters.bytes.store(self.store.weight(), Relaxed);
    }

    /// Bytes held now.
    #[cfg(test)]
    pub fn bytes_held(&self) -> u64 {
        self.store.weight()
    }
}

/// The body up to `time`'s value, when it is a successful envelope ending with its time.
fn head_of(body: &[u8]) -> Option<&[u8]> {
    let without_brace = body.strip_suffix(b"}")?;
    let digits = without_brace
        .iter()
        .rev()
        .take_while(|b| b.is_ascii_digit())
        .count();
    let head = &without_brace[..without_brace.len() - digits];
    (digits > 0 && head.ends_with(UNTIL_TIME)).then_some(head)
}

/// Counts the bytes written to it.
struct Counted(usize);

impl std::io::Write for Counted {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests;
