//! Plans by request shape: a request whose shape was planned before binds its values into
//! that plan instead of being planned again.
//!
//! The shape is the request with its condition values in slots ([`crate::shape`]), written out
//! whole (every key, keyword and value left in it), and keyed with what planning reads beside
//! the request: the method and whether the visitor is logged in (the role of an object without
//! `@role` is UNKNOWN or LOGIN by that alone, and the `Access` check is decided by the role),
//! and what the answer is for ([`Purpose`]: it decides the mode).
//!
//! The cache is bounded in bytes ([`CacheBudget`]), since its keys and plans are client text:
//! - a plan is kept only when it may be shared: not one that holds the visitor's own values (a
//!   role's row filter, `getCurrentUser()`), an error, or echoed values (custom `@` keys and
//!   other values a request only echoes: they are the request's data, not its shape, and were
//!   the way a 1 MiB request made a 30 MiB entry);
//! - a shape longer than `plan_cache_key_bytes` is planned for its request alone;
//! - each kept plan counts [`entry_bytes`] of its shape's length against `plan_cache_bytes`,
//!   an upper bound of what a plan of that shape was measured to hold; past the budget the
//!   least recently used shapes make room.
//!
//! The cache belongs to the schema snapshot, so a reload starts it empty.

use super::{Purpose, ReadPlan};
use crate::Context;
use crate::PlanError;
use apijet_core::Method;
use apijet_request::{
    ArrayObject, Container, Member, Node, Request, SubqueryObject, TableEntry, TableObject,
};
use serde_json::Value as Json;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

/// How much the kept plans may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheBudget {
    /// The bytes all kept plans may count together (`plan_cache_bytes`).
    pub bytes: usize,
    /// The longest shape whose plan is kept (`plan_cache_key_bytes`).
    pub key_bytes: usize,
}

impl Default for CacheBudget {
    fn default() -> Self {
        CacheBudget {
            bytes: 64 << 20,
            key_bytes: 16 << 10,
        }
    }
}

/// What a kept plan of a shape `key_len` bytes long counts: its plan measured at most about
/// 4 KiB per statement plus 100 bytes per byte of shape (a nested page of three levels, 90
/// bytes of shape, held 12.6 KiB), so 128 per byte and 4 KiB more bound it.
pub fn entry_bytes(key_len: usize) -> usize {
    key_len.saturating_mul(128).saturating_add(4096)
}

/// What a plan is kept under.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ShapeKey {
    method: Method,
    logged_in: bool,
    purpose: Purpose,
    shape: String,
}

impl ShapeKey {
    /// The key of the request `req`, whose condition values are slots already, read for an
    /// answer to the client.
    pub fn of(req: &Request, method: Method, logged_in: bool) -> ShapeKey {
        ShapeKey::of_for(req, method, logged_in, Purpose::Answer)
    }

    /// [`ShapeKey::of`] for `purpose`.
    pub fn of_for(req: &Request, method: Method, logged_in: bool, purpose: Purpose) -> ShapeKey {
        Self::written(req, method, logged_in, purpose).0
    }

    /// The key, and whether the request holds values it only echoes.
    fn written(
        req: &Request,
        method: Method,
        logged_in: bool,
        purpose: Purpose,
    ) -> (ShapeKey, bool) {
        let mut w = ShapeWriter {
            out: String::with_capacity(128),
            echoes: false,
        };
        w.request(req);
        let key = ShapeKey {
            method,
            logged_in,
            purpose,
            shape: w.out,
        };
        (key, w.echoes)
    }

    /// The request's shape, as written in the key.
    pub fn shape(&self) -> &str {
        &self.shape
    }
}

/// Read plans by shape, within a byte budget.
#[derive(Debug, Default)]
pub struct PlanCache {
    kept: RwLock<Kept>,
    /// A clock for "least recently used".
    clock: AtomicU64,
}

#[derive(Debug, Default)]
struct Kept {
    /// Hashed with foldhash, seeded per process: SipHash over the shape was a visible part of
    /// every lookup, and the byte budget bounds what colliding shapes can cost.
    plans: HashMap<ShapeKey, Entry, foldhash::fast::RandomState>,
    bytes: usize,
}

#[derive(Debug)]
struct Entry {
    plan: Arc<ReadPlan>,
    bytes: usize,
    used: AtomicU64,
}

impl PlanCache {
    /// The plan of `req` (condition values in slots) for an answer to the client: the one kept
    /// for its shape, else a new one, kept when it may be shared and fits the budget of
    /// `inputs.options.plan_cache`.
    pub fn plan(&self, req: &Request, inputs: &Context<'_>) -> Result<Arc<ReadPlan>, PlanError> {
        self.plan_for(req, inputs, Purpose::Answer)
    }

    /// [`PlanCache::plan`] for `purpose`.
    pub fn plan_for(
        &self,
        req: &Request,
        inputs: &Context<'_>,
        purpose: Purpose,
    ) -> Result<Arc<ReadPlan>, PlanError> {
        let (key, echoes) =
            ShapeKey::written(req, inputs.method, inputs.visitor.is_some(), purpose);
        let now = self.clock.fetch_add(1, Ordering::Relaxed);
        if let Some(plan) = self.kept.read().ok().and_then(|k| {
            let e = k.plans.get(&key)?;
            e.used.store(now, Ordering::Relaxed);
            Some(Arc::clone(&e.plan))
        }) {
            return Ok(plan);
        }
        let plan = Arc::new(ReadPlan::build_for(req, inputs, purpose)?);
        let budget = inputs.options.plan_cache;
        let shareable = !plan.visitor_bound && !plan.has_errors && !echoes;
        if shareable && key.shape.len() <= budget.key_bytes {
            self.put(key, Arc::clone(&plan), now, budget.bytes);
        }
        Ok(plan)
    }

    /// Shapes kept.
    pub fn len(&self) -> usize {
        self.kept.read().map_or(0, |k| k.plans.len())
    }

    /// Whether no shape is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes the kept plans count against the budget.
    pub fn bytes(&self) -> usize {
        self.kept.read().map_or(0, |k| k.bytes)
    }

    fn put(&self, key: ShapeKey, plan: Arc<ReadPlan>, now: u64, budget: usize) {
        let bytes = entry_bytes(key.shape.len());
        if bytes > budget {
            return;
        }
        let Ok(mut kept) = self.kept.write() else {
            return;
        };
        if kept.plans.contains_key(&key) {
            return;
        }
        if kept.bytes + bytes > budget {
            // Room for this one and a tenth of the budget more, so that a stream of new shapes
            // does not look for the oldest on every request.
            let target = budget.saturating_sub(bytes + budget / 10);
            let mut by_age: Vec<(u64, ShapeKey)> = kept
                .plans
                .iter()
                .map(|(k, e)| (e.used.load(Ordering::Relaxed), k.clone()))
                .collect();
            by_age.sort_unstable_by_key(|(used, _)| *used);
            for (_, old) in by_age {
                if kept.bytes <= target {
                    break;
                }
                if let Some(e) = kept.plans.remove(&old) {
                    kept.bytes -= e.bytes;
                }
            }
        }
        kept.bytes += bytes;
        kept.plans.insert(
            key,
            Entry {
                plan,
                bytes,
                used: AtomicU64::new(now),
            },
        );
    }
}

/// Writes a request's shape out whole and unambiguously: every text with its length before it,
/// every JSON value in its compact text followed by a byte JSON text never holds unescaped.
/// Each part of the tree is taken apart field by field, so a field added to the tree later does
/// not compile until it is written here too.
struct ShapeWriter {
    out: String,
    /// The request holds values it only echoes.
    echoes: bool,
}

impl ShapeWriter {
    fn text(&mut self, s: &str) {
        // itoa: the formatting machinery of `write!` was most of the cost of a key.
        self.out.push_str(itoa::Buffer::new().format(s.len()));
        self.out.push(':');
        self.out.push_str(s);
    }

    fn json(&mut self, v: &Json) {
        use std::fmt::Write;
        let _ = write!(self.out, "{v}");
        self.out.push('\u{1}');
    }

    fn optional_json(&mut self, v: &Option<Json>) {
        match v {
            Some(v) => self.json(v),
            None => self.out.push('-'),
        }
    }

    fn request(&mut self, req: &Request) {
        let Request {
            root,
            tag,
            version,
            format,
            globals,
        } = req;
        self.container(root);
        match tag {
            Some(t) => self.text(t),
            None => self.out.push('-'),
        }
        self.optional_json(version);
        self.out.push(if *format { 'F' } else { 'f' });
        for (name, value) in globals {
            // A root `@` key that is no keyword is echoed in the answer.
            self.echoes |= !crate::keywords::ROOT_KEYWORDS
                .iter()
                .any(|(k, _)| k == name);
            self.text(name);
            self.json(value);
        }
    }

    fn container(&mut self, c: &Container) {
        let Container { members } = c;
        self.out.push('{');
        for m in members {
            self.member(m);
        }
        self.out.push('}');
    }

    fn member(&mut self, m: &Member) {
        let Member { key, node } = m;
        self.text(key);
        match node {
            Node::Table(t) => {
                self.out.push('T');
                self.table(t);
            }
            Node::Array(a) => {
                self.out.push('A');
                self.array(a);
            }
            Node::Reference(path) => {
                self.out.push('R');
                self.text(path);
            }
            Node::Subquery(q) => {
                self.out.push('Q');
                self.subquery(q);
            }
            Node::Function(call) => {
                self.out.push('C');
                self.text(call);
            }
            Node::Value(v) => {
                self.echoes = true;
                self.out.push('V');
                self.json(v);
            }
        }
    }

    fn table(&mut self, t: &TableObject) {
        // The table key is read from the member's key.
        let TableObject { key: _, entries } = t;
        self.out.push('(');
        for e in entries {
            self.entry(e);
        }
        self.out.push(')');
    }

    fn entry(&mut self, e: &TableEntry) {
        // A condition key's parts are read from its raw text.
        match e {
            TableEntry::Condition { key, value } => {
                self.out.push('c');
                self.text(&key.raw);
                self.json(value);
            }
            TableEntry::Slot { key, slot } => {
                self.out.push('s');
                self.text(&key.raw);
                self.out.push_str(itoa::Buffer::new().format(*slot));
                self.out.push(';');
            }
            TableEntry::RefCondition { key, path } => {
                self.out.push('r');
                self.text(&key.raw);
                self.text(path);
            }
            TableEntry::SubqueryCondition { key, subquery } => {
                self.out.push('q');
                self.text(&key.raw);
                self.subquery(subquery);
            }
            TableEntry::FromSubquery(q) => {
                self.out.push('f');
                self.subquery(q);
            }
            TableEntry::Keyword { name, value } => {
                // A table's `@` key that is no keyword (nor a procedure call) is echoed.
                self.echoes |= !name.ends_with("()")
                    && !crate::keywords::TABLE_KEYWORDS
                        .iter()
                        .any(|(k, _)| k == name);
                self.out.push('k');
                self.text(name);
                self.json(value);
            }
            TableEntry::Child(m) => {
                self.out.push('h');
                self.member(m);
            }
            TableEntry::Function { key, call } => {
                self.out.push('u');
                self.text(key);
                self.text(call);
            }
            TableEntry::Echo { key, value } => {
                self.echoes = true;
                self.out.push('e');
                self.text(key);
                self.json(value);
            }
        }
    }

    fn array(&mut self, a: &ArrayObject) {
        // The array key is read from the member's key.
        let ArrayObject {
            key: _,
            count,
            page,
            query,
            compat,
            join,
            items,
        } = a;
        for v in [count, page, query, compat, join] {
            self.optional_json(v);
        }
        self.container(items);
    }

    fn subquery(&mut self, q: &SubqueryObject) {
        let SubqueryObject {
            from,
            range,
            count,
            page,
            join,
            with,
            items,
        } = q;
        match from {
            Some(f) => self.text(f),
            None => self.out.push('-'),
        }
        for v in [range, count, page, join, with] {
            self.optional_json(v);
        }
        self.container(items);
    }
}
