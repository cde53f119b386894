//! Plans by request shape: a request whose shape was planned before binds its values into
//! that plan instead of being planned again.
//!
//! The shape is the request with its condition values in slots ([`crate::shape`]), written out
//! whole (every key, keyword and value left in it), and keyed with what planning reads beside
//! the request: the method and whether the visitor is logged in (the role of an object without
//! `@role` is UNKNOWN or LOGIN by that alone, and the `Access` check is decided by the role),
//! and what the answer is for ([`Purpose`]: it decides the mode). A
//! plan that holds the visitor's own values (a role's row filter, `getCurrentUser()`) or an
//! error is not kept. The cache belongs to the schema snapshot, so a reload starts it empty;
//! past [`PLAN_SHAPES`] shapes, an arbitrary one makes room.

use super::{Purpose, ReadPlan};
use crate::Context;
use crate::PlanError;
use apijet_core::Method;
use apijet_request::{
    ArrayObject, Container, Member, Node, Request, SubqueryObject, TableEntry, TableObject,
};
use serde_json::Value as Json;
use std::collections::HashMap;
use std::sync::{Arc, RwLock};

/// Shapes kept per snapshot.
pub const PLAN_SHAPES: usize = 1024;

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
        let mut w = ShapeWriter(String::with_capacity(128));
        w.request(req);
        ShapeKey {
            method,
            logged_in,
            purpose,
            shape: w.0,
        }
    }

    /// The request's shape, as written in the key.
    pub fn shape(&self) -> &str {
        &self.shape
    }
}

/// Read plans by shape.
#[derive(Debug, Default)]
pub struct PlanCache {
    /// Hashed with foldhash, seeded per process: SipHash over the shape was a visible part of
    /// every lookup, and the map's bound ([`PLAN_SHAPES`]) bounds what colliding shapes cost.
    plans: RwLock<HashMap<ShapeKey, Arc<ReadPlan>, foldhash::fast::RandomState>>,
}

impl PlanCache {
    /// The plan of `req` (condition values in slots) for an answer to the client: the one kept
    /// for its shape, else a new one, kept when it may be shared.
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
        let key = ShapeKey::of_for(req, inputs.method, inputs.visitor.is_some(), purpose);
        if let Some(plan) = self.plans.read().ok().and_then(|m| m.get(&key).cloned()) {
            return Ok(plan);
        }
        let plan = Arc::new(ReadPlan::build_for(req, inputs, purpose)?);
        if !plan.visitor_bound && !plan.has_errors {
            self.put(plan.shape().clone(), Arc::clone(&plan));
        }
        Ok(plan)
    }

    /// Shapes kept.
    pub fn len(&self) -> usize {
        self.plans.read().map_or(0, |m| m.len())
    }

    /// Whether no shape is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn put(&self, key: ShapeKey, plan: Arc<ReadPlan>) {
        let Ok(mut plans) = self.plans.write() else {
            return;
        };
        if plans.len() >= PLAN_SHAPES && !plans.contains_key(&key) {
            if let Some(old) = plans.keys().next().cloned() {
                plans.remove(&old);
            }
        }
        plans.insert(key, plan);
    }
}

/// Writes a request's shape out whole and unambiguously: every text with its length before it,
/// every JSON value in its compact text followed by a byte JSON text never holds unescaped.
/// Each part of the tree is taken apart field by field, so a field added to the tree later does
/// not compile until it is written here too.
struct ShapeWriter(String);

impl ShapeWriter {
    fn text(&mut self, s: &str) {
        // itoa: the formatting machinery of `write!` was most of the cost of a key.
        self.0.push_str(itoa::Buffer::new().format(s.len()));
        self.0.push(':');
        self.0.push_str(s);
    }

    fn json(&mut self, v: &Json) {
        use std::fmt::Write;
        let _ = write!(self.0, "{v}");
        self.0.push('\u{1}');
    }

    fn optional_json(&mut self, v: &Option<Json>) {
        match v {
            Some(v) => self.json(v),
            None => self.0.push('-'),
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
            None => self.0.push('-'),
        }
        self.optional_json(version);
        self.0.push(if *format { 'F' } else { 'f' });
        for (name, value) in globals {
            self.text(name);
            self.json(value);
        }
    }

    fn container(&mut self, c: &Container) {
        let Container { members } = c;
        self.0.push('{');
        for m in members {
            self.member(m);
        }
        self.0.push('}');
    }

    fn member(&mut self, m: &Member) {
        let Member { key, node } = m;
        self.text(key);
        match node {
            Node::Table(t) => {
                self.0.push('T');
                self.table(t);
            }
            Node::Array(a) => {
                self.0.push('A');
                self.array(a);
            }
            Node::Reference(path) => {
                self.0.push('R');
                self.text(path);
            }
            Node::Subquery(q) => {
                self.0.push('Q');
                self.subquery(q);
            }
            Node::Function(call) => {
                self.0.push('C');
                self.text(call);
            }
            Node::Value(v) => {
                self.0.push('V');
                self.json(v);
            }
        }
    }

    fn table(&mut self, t: &TableObject) {
        // The table key is read from the member's key.
        let TableObject { key: _, entries } = t;
        self.0.push('(');
        for e in entries {
            self.entry(e);
        }
        self.0.push(')');
    }

    fn entry(&mut self, e: &TableEntry) {
        // A condition key's parts are read from its raw text.
        match e {
            TableEntry::Condition { key, value } => {
                self.0.push('c');
                self.text(&key.raw);
                self.json(value);
            }
            TableEntry::Slot { key, slot } => {
                self.0.push('s');
                self.text(&key.raw);
                self.0.push_str(itoa::Buffer::new().format(*slot));
                self.0.push(';');
            }
            TableEntry::RefCondition { key, path } => {
                self.0.push('r');
                self.text(&key.raw);
                self.text(path);
            }
            TableEntry::SubqueryCondition { key, subquery } => {
                self.0.push('q');
                self.text(&key.raw);
                self.subquery(subquery);
            }
            TableEntry::FromSubquery(q) => {
                self.0.push('f');
                self.subquery(q);
            }
            TableEntry::Keyword { name, value } => {
                self.0.push('k');
                self.text(name);
                self.json(value);
            }
            TableEntry::Child(m) => {
                self.0.push('h');
                self.member(m);
            }
            TableEntry::Function { key, call } => {
                self.0.push('u');
                self.text(key);
                self.text(call);
            }
            TableEntry::Echo { key, value } => {
                self.0.push('e');
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
            None => self.0.push('-'),
        }
        for v in [range, count, page, join, with] {
            self.optional_json(v);
        }
        self.container(items);
    }
}
