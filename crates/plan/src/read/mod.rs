//! One plan for a whole read (GET, GETS, HEAD, HEADS): [`ReadPlan`].
//!
//! The plan mirrors the answer: a [`ContainerPlan`] per JSON object of the answer, whose
//! members are planned objects ([`ObjectPlan`]: one statement, the functions run on its row,
//! its children), arrays ([`ArrayPlan`]: paging, SQL joins, the members of an item and how each
//! is read for all items at once), references, echoed values and functions. Every statement is
//! a [`crate::TablePlan`] whose values are slots: the request's condition values (see
//! [`crate::shape`]), earlier results (`k@` references), the parent rows of a batched member, or
//! a `k-()` function's result; `exec` binds them and runs the statements in request order.
//!
//! The mode, how the answer is produced, is chosen here: a point lookup (one object, written as
//! its row is read), a plain list (streamed row by row), a nested list (streamed item by item),
//! or a general read (the whole answer assembled, then sent).
//!
//! A part of the request that cannot be planned is kept as its error, raised when the read
//! reaches it: a container stopped by the first-child rule before a faulty member answers as
//! it did when objects were planned one by one.

mod arrays;
mod batch;
mod cache;
mod container;
mod deps;
mod multiplex;
pub(crate) mod paging;
mod print;
mod refs;

pub use crate::object::joins::{join_specs, JoinSpec};
pub use arrays::{ArrayPlan, CarriedPlan};
pub use batch::{BatchKind, BatchPlan, Link};
pub use cache::{entry_bytes, CacheBudget, PlanCache, ShapeKey};
pub use container::{ContainerPlan, MemberPlan, ObjectPlan};
pub use deps::{Dependencies, VisitorParts};
pub use multiplex::{
    ListKind, MultiplexForm, MultiplexPlan, NotMultiplexed, RecordMember, RecordPlan,
    MAX_LISTED_TEXT, MULTIPLEX_KEY,
};
pub use paging::{paging, Paging, QueryMode};
pub use refs::{list_key, References};

use crate::keywords::check_root_keywords;
use crate::{Context, PlanError, PlanOptions};
use apijet_core::Method;
use apijet_request::{Node, Request, TableEntry};
use serde_json::{Map, Value as Json};

/// How a read's answer is produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// One object found by plain conditions: its row is written into the answer as it is read.
    Point,
    /// A list of plain rows of one table (`"Moment[]"`, or `"[]"` of one object): streamed
    /// from the cursor to the client.
    List,
    /// A list whose items hold more than their row: streamed item by item.
    Nested,
    /// Everything else: the whole answer is assembled, then sent.
    General,
}

/// A request's `@cache`, as the reference spells it: where its answer may be kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheHint {
    /// `0` / `"ALL"`: the database's cache and the server's memory.
    All,
    /// `1` / `"ROM"`: the database's own cache only; the server reads it fresh.
    Rom,
    /// `2` / `"RAM"`: the server's memory.
    Ram,
}

impl CacheHint {
    /// The hint a `@cache` value names (the keyword audit refuses any other).
    pub fn read(value: &Json) -> Option<CacheHint> {
        match value {
            Json::Number(n) => match n.as_u64()? {
                0 => Some(CacheHint::All),
                1 => Some(CacheHint::Rom),
                2 => Some(CacheHint::Ram),
                _ => None,
            },
            Json::String(s) => match s.as_str() {
                "0" | "ALL" => Some(CacheHint::All),
                "1" | "ROM" => Some(CacheHint::Rom),
                "2" | "RAM" => Some(CacheHint::Ram),
                _ => None,
            },
            _ => None,
        }
    }

    /// Whether the answer may be kept in the server's memory.
    pub fn in_memory(self) -> bool {
        !matches!(self, CacheHint::Rom)
    }
}

/// What a read's answer is for, which decides how it is produced: an input of planning, so
/// that the plan of a shape says its own mode and no caller changes it afterwards.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Purpose {
    /// An answer for the client, in the form that suits it: a point written as its row is
    /// read, a list streamed from the cursor.
    #[default]
    Answer,
    /// The whole answer as JSON, for the server itself (the parts of `/crud`, live answers):
    /// always assembled whole ([`Mode::General`]).
    Whole,
}

/// The plan of one read.
#[derive(Debug)]
pub struct ReadPlan {
    /// The method.
    pub method: Method,
    /// How the answer is produced.
    pub mode: Mode,
    /// The answer's top level.
    pub root: ContainerPlan,
    /// Custom root `@` keys, answered after the objects.
    pub customs: Map<String, Json>,
    /// `format`: keys in the answer in their formatted spelling.
    pub format: bool,
    /// Which results references read, so that only those are kept.
    pub refs: References,
    /// The plan holds values of the visitor's own (a role's row filter, `getCurrentUser()`):
    /// it is not shared with other visitors.
    pub visitor_bound: bool,
    /// The plan holds a part that could not be planned, kept as its error.
    pub has_errors: bool,
    /// The request's `@cache`, when it has one.
    pub cache_hint: Option<CacheHint>,
    /// The members that are counts (the objects of a HEAD or HEADS), by answer key.
    counts: Vec<String>,
    deps: Dependencies,
    shape: ShapeKey,
    /// Its plans over a list of one slot's values, made the first time each is asked for.
    multiplexed: std::sync::Mutex<Vec<(usize, std::sync::Arc<MultiplexPlan>)>>,
    /// When it is a record view (a general read led by a point object that its later members
    /// refer to), how those members are read for many requests' first objects at once.
    record: Option<std::sync::Arc<RecordPlan>>,
}

impl ReadPlan {
    /// Plans a read of the request `req`, whose condition values are slots already
    /// ([`crate::shape::take_values`]), in the context `inputs` (a read's method), for an
    /// answer to the client.
    pub fn build(req: &Request, inputs: &Context<'_>) -> Result<ReadPlan, PlanError> {
        ReadPlan::build_for(req, inputs, Purpose::Answer)
    }

    /// [`ReadPlan::build`] for `purpose`.
    pub fn build_for(
        req: &Request,
        inputs: &Context<'_>,
        purpose: Purpose,
    ) -> Result<ReadPlan, PlanError> {
        let customs = check_root_keywords(&req.globals, inputs.method, inputs.options)?;
        let mut builder = container::Builder::new(req, inputs);
        let root = builder.container(&req.root.members, "", 1);
        // Planned while the request is at hand, for the reads of many requests of the shape
        // at once (see `multiplex`); only a general read of more than one member can be one.
        let record = match purpose == Purpose::Answer && !builder.has_errors {
            true => RecordPlan::of(&mut builder, &req.root.members, &root).map(std::sync::Arc::new),
            false => None,
        };
        let mut refs = References::default();
        refs.collect(&req.root);
        let counts = match inputs.method.is_count() {
            true => root
                .members
                .iter()
                .filter_map(|m| match m {
                    MemberPlan::Object { key, .. } => Some(key.clone()),
                    MemberPlan::CurrentUser { name, .. } => Some(name.clone()),
                    _ => None,
                })
                .collect(),
            false => Vec::new(),
        };
        let mut plan = ReadPlan {
            method: inputs.method,
            counts,
            mode: Mode::General,
            root,
            customs: customs.into_iter().collect(),
            format: req.format,
            refs,
            visitor_bound: builder.visitor_bound || role_bound(req, inputs),
            cache_hint: req.global("cache").and_then(CacheHint::read),
            has_errors: builder.has_errors,
            deps: builder.deps,
            shape: ShapeKey::of_for(req, inputs.method, inputs.visitor.is_some(), purpose),
            multiplexed: Default::default(),
            record,
        };
        if purpose == Purpose::Answer {
            plan.mode = plan.choose_mode(req, inputs.options);
        }
        if plan.mode != Mode::General {
            plan.record = None;
        }
        Ok(plan)
    }

    /// What the read depends on: the SQL names of the tables its statements read (subqueries'
    /// too), and whether anything else decides its answer. Written once, while it is planned.
    pub fn dependencies(&self) -> &Dependencies {
        &self.deps
    }

    /// Whether the answer to this plan with these slot `values` may be kept and given again
    /// while no table it depends on is written, and if so, which parts of the visitor decide
    /// it (beyond whether there is one): `None` for an answer that can change without a write
    /// apijet sees (the clock, chance, a raw fragment, a procedure, the catalogue), that tells
    /// how it was read (`@explain`), or that holds an error.
    pub fn answer_cache(&self, values: &[Json]) -> Option<VisitorParts> {
        let d = &self.deps;
        let kept = !self.has_errors && !d.opaque && !d.explained && !d.volatile_with(values);
        kept.then_some(d.visitor)
    }

    /// The members of the answer that are counts (the objects of a HEAD), by answer key:
    /// `{"count": n}` each, which the answer's envelope goes around.
    pub fn counts(&self) -> &[String] {
        &self.counts
    }

    /// The shape the plan was made for: every request with this key runs this plan with its
    /// own values.
    pub fn shape(&self) -> &ShapeKey {
        &self.shape
    }

    /// The plan of this read's shape over a list of values of `slot` ([`MultiplexPlan`]),
    /// made once per plan and slot: its statement's text is written once for the shape.
    pub fn multiplexed(
        &self,
        slot: usize,
    ) -> Result<std::sync::Arc<MultiplexPlan>, NotMultiplexed> {
        let mut made = self.multiplexed.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, plan)) = made.iter().find(|(s, _)| *s == slot) {
            return Ok(std::sync::Arc::clone(plan));
        }
        let plan = std::sync::Arc::new(MultiplexPlan::of(self, slot)?);
        made.push((slot, std::sync::Arc::clone(&plan)));
        Ok(plan)
    }

    /// The object of a [`Mode::Point`] read, with its answer key.
    pub fn point(&self) -> Option<(&str, &ObjectPlan)> {
        match self.root.members.as_slice() {
            [MemberPlan::Object { key, plan: Ok(o) }] if self.mode == Mode::Point => Some((key, o)),
            _ => None,
        }
    }

    /// The first object of a record view (a [`Mode::General`] read whose later members are
    /// each read by its values, see [`RecordPlan`]), with its answer key and the record.
    pub fn record(&self) -> Option<(&str, &ObjectPlan, &std::sync::Arc<RecordPlan>)> {
        let record = self
            .record
            .as_ref()
            .filter(|_| self.mode == Mode::General)?;
        match self.root.members.first() {
            Some(MemberPlan::Object { key, plan: Ok(o) }) => Some((key, o, record)),
            _ => None,
        }
    }

    /// The list of a [`Mode::List`] or [`Mode::Nested`] read, with its answer key.
    pub fn list(&self) -> Option<(&str, &ArrayPlan)> {
        match self.root.members.as_slice() {
            [MemberPlan::Array { key, plan: Ok(a) }]
                if matches!(self.mode, Mode::List | Mode::Nested) =>
            {
                Some((key, a))
            }
            _ => None,
        }
    }

    fn choose_mode(&self, req: &Request, options: &PlanOptions) -> Mode {
        let reads_rows = matches!(self.method, Method::Get | Method::Gets);
        if self.format || !reads_rows || !self.customs.is_empty() {
            return Mode::General;
        }
        let [member] = req.root.members.as_slice() else {
            return Mode::General;
        };
        match (&member.node, self.root.members.as_slice()) {
            (Node::Table(t), [MemberPlan::Object { plan: Ok(o), .. }]) => {
                let plain = t.entries.iter().all(|e| {
                    matches!(
                        e,
                        TableEntry::Condition { .. }
                            | TableEntry::Slot { .. }
                            | TableEntry::Keyword { .. }
                    )
                });
                if plain && o.is_point() {
                    return Mode::Point;
                }
                Mode::General
            }
            (Node::Array(a), [MemberPlan::Array { plan: Ok(p), key }]) => {
                if a.join.is_some() || p.paging.mode != paging::QueryMode::Rows {
                    return Mode::General;
                }
                if p.is_plain_list(a) {
                    return Mode::List;
                }
                if options.max_arrays > 0 && !self.refs.whole_arrays.contains(key) {
                    return Mode::Nested;
                }
                Mode::General
            }
            _ => Mode::General,
        }
    }
}

/// Whether a role named anywhere in the request may filter rows by the visitor's identity.
fn role_bound(req: &Request, inputs: &Context<'_>) -> bool {
    fn filtering(v: &Json) -> bool {
        !matches!(v.as_str(), Some("UNKNOWN" | "LOGIN"))
    }
    fn member(m: &apijet_request::Member) -> bool {
        match &m.node {
            Node::Table(t) => t.entries.iter().any(|e| match e {
                TableEntry::Keyword { name, value } => name == "role" && filtering(value),
                TableEntry::Child(m) => member(m),
                TableEntry::SubqueryCondition { subquery, .. }
                | TableEntry::FromSubquery(subquery) => subquery.items.members.iter().any(member),
                _ => false,
            }),
            Node::Array(a) => a.items.members.iter().any(member),
            Node::Subquery(q) => q.items.members.iter().any(member),
            _ => false,
        }
    }
    inputs.visitor.is_some()
        && (req.global("role").is_some_and(filtering) || req.root.members.iter().any(member))
}
