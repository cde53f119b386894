//! The plan of one read shape over a list of values of one of its slots: a multiplexed read.
//!
//! Many requests of one shape that differ only in the value of one slot (the subscriptions of
//! a live view of each user's comments, `{"Comment[]":{"Comment":{"userId":…}}}`) are read by
//! one statement: the list of values is joined in as a table of `(key, value)` rows (a JSON
//! table in each dialect, `sql`), the slot reads the joined value, and each row carries the
//! key of the value it answers, its position in the list. Rows are routed to their request by
//! that key ([`MULTIPLEX_KEY`], the first output column), never by a column of the answer,
//! which `@column` may rename or leave out. Paging holds per key: each key's rows are numbered
//! in the request's order and only its own page is kept.
//!
//! A shape is multiplexed when its first statement answers it or leads it: a point lookup or
//! a plain list ([`Mode::Point`] / [`Mode::List`]), whose answer is that statement's rows, or
//! a nested list ([`Mode::Nested`]), whose items are built from that statement's rows as the
//! shape's own read builds them (their members read for all items at once, by their parents'
//! keys), or a record view ([`Mode::General`] led by a point object whose later members each
//! refer to it by equality, `{"Moment":{"id":…},"User":{"id@":"Moment/userId"}}`: a
//! [`RecordPlan`]), whose later members are read for the first objects of every key at once,
//! as a nested list's members are for its items. The statement's request values are only
//! bound (a [`Template`]), and it neither groups nor joins: then the multiplexed statement
//! answers every key exactly as the shape's own statement answers its request. Any other
//! shape is refused with the reason, and its requests are read one by one.

use super::batch::{self, BatchKind, BatchPlan};
use super::container::Builder;
use super::{ArrayPlan, ContainerPlan, MemberPlan, Mode, ObjectPlan, ReadPlan};
use crate::query::{Expr, OrderItem, Pred, Select};
use crate::schema::ColumnKind;
use crate::template::{SlotCheck, StatementText, Template};
use apijet_core::Method;
use apijet_request::{Member, Node};
use serde_json::Value as Json;
use std::fmt::{self, Display, Formatter};
use std::sync::{Arc, OnceLock};

/// The output column of a multiplexed statement holding each row's key: the position in the
/// list of the value the row answers.
pub const MULTIPLEX_KEY: &str = "apijet~key";

/// How the values of the list are typed where they are joined in (PostgreSQL and MariaDB
/// declare the column's type).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ListKind {
    /// Whole numbers.
    Int,
    /// Text of at most [`MAX_LISTED_TEXT`] characters.
    Text,
}

/// The longest text value joined in (MariaDB's JSON table declares the column's length; a
/// longer value would be cut and could match another row, so it is read alone).
pub const MAX_LISTED_TEXT: usize = 255;

impl ListKind {
    /// The kind of `v`, when it can be joined in as a listed value.
    pub fn of(v: &Json) -> Option<ListKind> {
        match v {
            Json::Number(n) if n.is_i64() => Some(ListKind::Int),
            Json::String(s) if s.chars().count() <= MAX_LISTED_TEXT => Some(ListKind::Text),
            _ => None,
        }
    }
}

/// How a multiplexed read's rows become answers: the form of the shape's own answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MultiplexForm {
    /// One object per key (a point lookup), answered under `key`.
    Object {
        /// The answer key.
        key: String,
    },
    /// A list of rows per key, answered under `key`.
    List {
        /// The answer key of the list.
        key: String,
        /// The table key wrapping each row of a `[]` list (`None` for `Table[]`).
        wrap: Option<String>,
    },
    /// A list whose items hold more than their row (a nested list, [`Mode::Nested`]): the
    /// multiplexed statement reads the items' main rows, and the rest of each item is read as
    /// the shape's own read reads it (its members batched by their parents' keys, here across
    /// every key at once), answered under `key`.
    Items {
        /// The answer key of the list.
        key: String,
    },
    /// A record view: the multiplexed statement reads each key's first object (answered under
    /// `key`), and the members after it are read for every key's first object at once (the
    /// plan's [`RecordPlan`]), then each key's answer is assembled as the shape's own read
    /// assembles it.
    Record {
        /// The answer key of the first object.
        key: String,
    },
}

/// The members after the first object of a record view: the answer's root is a point object
/// (its row and nothing else) followed by members that each refer to it by equality only
/// (`"User":{"id@":"Moment/userId"}`, `"Comment[]":{"Comment":{"momentId@":"Moment/id"}}`)
/// or are values. Each is read for the first objects of many requests at once, by one
/// statement, as a nested list's members are read for its items ([`BatchPlan`]).
#[derive(Debug)]
pub struct RecordPlan {
    /// The members after the first object, in request order.
    pub members: Vec<RecordMember>,
    /// At most how many rows one request's answer holds: its first object's, one per later
    /// object, `count` per later list.
    pub rows_per_key: u64,
}

/// A member of a record view after its first object.
#[derive(Debug)]
pub enum RecordMember {
    /// An object or a nested list read for every first object at once.
    Batch {
        /// The answer key.
        key: String,
        /// How.
        plan: Box<BatchPlan>,
    },
    /// A value answered as sent.
    Value {
        /// The key.
        key: String,
        /// The value.
        value: Json,
    },
}

impl RecordPlan {
    /// The record plan of the root `members` (as requested) planned as `root`, when it is a
    /// record view: its first member a point object whose statement is written once for the
    /// shape, every later one an object or a nested list that refers only to it, by equality,
    /// and answers no `@explain` (which only one request's read reports), or a value.
    pub(super) fn of(
        b: &mut Builder<'_>,
        members: &[Member],
        root: &ContainerPlan,
    ) -> Option<RecordPlan> {
        if !matches!(b.inputs.method, Method::Get | Method::Gets) {
            return None;
        }
        let (first, rest) = members.split_first()?;
        let [MemberPlan::Object { key, plan: Ok(o) }, planned @ ..] = root.members.as_slice()
        else {
            return None;
        };
        let row_alone = o.functions.is_empty()
            && o.children.members.is_empty()
            && !o.table.explain
            && !o.table.drop
            && o.table.echoes.is_empty()
            && o.table.procedures.is_empty();
        if !matches!(first.node, Node::Table(_))
            || *key != first.key
            || o.template.is_none()
            || !row_alone
            || planned.len() != rest.len()
        {
            return None;
        }
        let mut out = Vec::with_capacity(rest.len());
        for (m, p) in rest.iter().zip(planned) {
            let member = match (&m.node, p) {
                (Node::Table(_), MemberPlan::Object { plan: Ok(_), .. })
                | (Node::Array(_), MemberPlan::Array { plan: Ok(_), .. }) => {
                    let plan = batch::plan_at_root(b, m, key)?.ok()?;
                    if plan.plan.explain {
                        return None;
                    }
                    RecordMember::Batch {
                        key: m.key.clone(),
                        plan: Box::new(plan),
                    }
                }
                (Node::Value(_), MemberPlan::Value { key, value }) if !key.starts_with('@') => {
                    RecordMember::Value {
                        key: key.clone(),
                        value: value.clone(),
                    }
                }
                _ => return None,
            };
            out.push(member);
        }
        let rows_per_key = out.iter().fold(1u64, |n, m| match m {
            RecordMember::Batch { plan, .. } => match plan.kind {
                BatchKind::Object => n.saturating_add(1),
                BatchKind::List { count, .. } => n.saturating_add(count),
            },
            RecordMember::Value { .. } => n,
        });
        Some(RecordPlan {
            members: out,
            rows_per_key,
        })
    }
}

/// Why a shape is not multiplexed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotMultiplexed {
    /// Its answer is more than one statement's rows.
    Mode,
    /// Its statement is not written once for the shape (a value decides what it is).
    NoTemplate,
    /// The slot is not one its statement binds.
    Slot(usize),
    /// Its statement groups, aggregates, joins or is DISTINCT.
    Statement,
    /// Its items are not one per main row (an unwrapped list, rows joined in by SQL), or a
    /// statement of it answers `@explain` (which only one request's first item reports).
    Items,
}

impl Display for NotMultiplexed {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            NotMultiplexed::Mode => f.write_str(
                "its answer is more than one statement's rows, and no record of its first object",
            ),
            NotMultiplexed::NoTemplate => f.write_str("a value decides its statement"),
            NotMultiplexed::Slot(s) => write!(f, "its statement does not bind slot {s}"),
            NotMultiplexed::Statement => {
                f.write_str("its statement groups, aggregates, joins or is distinct")
            }
            NotMultiplexed::Items => {
                f.write_str("its items are not one per row, or a statement answers @explain")
            }
        }
    }
}

/// The plan of a read shape over a list of values of one slot.
#[derive(Debug)]
pub struct MultiplexPlan {
    /// The slot whose values are listed.
    pub slot: usize,
    /// The answer each key gets.
    pub form: MultiplexForm,
    /// Output names answered as JSON.
    pub json_outputs: Vec<String>,
    /// The shape's statement without its paging, the slot read from the joined list.
    pub select: Select,
    /// Rows kept per key.
    pub per_key: u64,
    /// Rows skipped per key.
    pub offset: u64,
    /// The kind of the column the slot is compared with, where it is one (`column = $slot`):
    /// the listed values are typed as that column (PostgreSQL compares no integer with text).
    pub compared: Option<ColumnKind>,
    /// A record view's members after its first object ([`MultiplexForm::Record`]).
    pub record: Option<Arc<RecordPlan>>,
    /// What the other slots' values must be (each request's are checked with
    /// [`MultiplexPlan::accepts`]).
    checks: Vec<(usize, SlotCheck)>,
    /// The statement's text per kind of listed value, written the first time it runs.
    texts: [OnceLock<StatementText>; 2],
}

impl MultiplexPlan {
    /// The plan of `plan`'s shape over a list of values of `slot`.
    pub fn of(plan: &ReadPlan, slot: usize) -> Result<MultiplexPlan, NotMultiplexed> {
        let (form, template, json_outputs) = match plan.mode {
            Mode::Point => {
                let (key, object) = plan.point().ok_or(NotMultiplexed::Mode)?;
                let template = object.template.as_ref().ok_or(NotMultiplexed::NoTemplate)?;
                let form = MultiplexForm::Object { key: key.into() };
                (form, template, object.table.json_outputs.clone())
            }
            Mode::List => {
                let (key, list) = plan.list().ok_or(NotMultiplexed::Mode)?;
                let template = list.template.as_ref().ok_or(NotMultiplexed::NoTemplate)?;
                let form = MultiplexForm::List {
                    key: key.into(),
                    wrap: (!list.unwrapped).then(|| list.main_key.clone()),
                };
                (form, template, list.json_outputs.clone())
            }
            Mode::Nested => {
                let (key, list) = plan.list().ok_or(NotMultiplexed::Mode)?;
                let template = list.template.as_ref().ok_or(NotMultiplexed::NoTemplate)?;
                // An unwrapped list skips empty items (an item no longer is its row), and
                // `@explain` answers the statements of the first item only: both differ
                // between one request's read and a read of many.
                if list.unwrapped || !list.carried.is_empty() || explains_array(list, 0) {
                    return Err(NotMultiplexed::Items);
                }
                let form = MultiplexForm::Items { key: key.into() };
                (form, template, list.json_outputs.clone())
            }
            Mode::General => {
                let (key, first, _) = plan.record().ok_or(NotMultiplexed::Mode)?;
                let template = first.template.as_ref().ok_or(NotMultiplexed::NoTemplate)?;
                let form = MultiplexForm::Record { key: key.into() };
                (form, template, first.table.json_outputs.clone())
            }
        };
        if !template.checks.iter().any(|(s, _)| *s == slot) {
            return Err(NotMultiplexed::Slot(slot));
        }
        let s = &template.select;
        let plain = !s.distinct
            && s.joins.is_empty()
            && s.group.is_empty()
            && s.having.is_none()
            && !s.columns.iter().any(|c| {
                crate::functions::contains_aggregate(&c.expr)
                    || crate::functions::contains_window(&c.expr)
            })
            && s.order.iter().all(|o| match o {
                OrderItem::By(e, _) => {
                    !crate::functions::contains_aggregate(e)
                        && !crate::functions::contains_window(e)
                }
                OrderItem::Random => false,
            });
        if !plain {
            return Err(NotMultiplexed::Statement);
        }
        let compared = s.filter.as_ref().and_then(|p| compared_kind(p, slot));
        let mut select = s.clone();
        let per_key = select.limit.take().unwrap_or(1);
        let offset = std::mem::take(&mut select.offset);
        Ok(MultiplexPlan {
            slot,
            form,
            json_outputs,
            select,
            per_key,
            offset,
            compared,
            record: plan.record().map(|(_, _, r)| Arc::clone(r)),
            checks: template.checks.clone(),
            texts: Default::default(),
        })
    }

    /// The slots the statement binds: the candidates for a list.
    pub fn slots(plan: &ReadPlan) -> Vec<usize> {
        let template: Option<&Template> = match plan.mode {
            Mode::Point => plan.point().and_then(|(_, o)| o.template.as_ref()),
            Mode::List | Mode::Nested => plan.list().and_then(|(_, l)| l.template.as_ref()),
            Mode::General => plan.record().and_then(|(_, o, _)| o.template.as_ref()),
        };
        template.map_or_else(Vec::new, |t| t.checks.iter().map(|(s, _)| *s).collect())
    }

    /// Whether one request's `values` may be answered by this plan: the statement holds for
    /// them (as the shape's own statement would) and its listed value has a kind.
    pub fn accepts(&self, values: &[Json]) -> Option<ListKind> {
        let holds = self
            .checks
            .iter()
            .all(|(slot, check)| values.get(*slot).is_some_and(|v| check.holds(v)));
        ListKind::of(values.get(self.slot)?).filter(|_| holds)
    }

    /// The statement's text for listed values of `kind`, written by `write` the first time.
    pub fn text(
        &self,
        kind: ListKind,
        write: impl FnOnce(&MultiplexPlan, ListKind) -> StatementText,
    ) -> &StatementText {
        let at = match kind {
            ListKind::Int => 0,
            ListKind::Text => 1,
        };
        self.texts[at].get_or_init(|| write(self, kind))
    }
}

impl Display for MultiplexPlan {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match &self.form {
            MultiplexForm::Object { key } => write!(f, "multiplex object {key}")?,
            MultiplexForm::List { key, wrap: None } => write!(f, "multiplex list {key}")?,
            MultiplexForm::List { key, wrap: Some(w) } => write!(f, "multiplex list {key} of {w}")?,
            MultiplexForm::Items { key } => write!(f, "multiplex items {key}")?,
            MultiplexForm::Record { key } => write!(f, "multiplex record {key}")?,
        }
        writeln!(
            f,
            " over ${} routed by {MULTIPLEX_KEY}, {} per key from {}",
            self.slot, self.per_key, self.offset
        )?;
        writeln!(f, "  {}", self.select)?;
        if let MultiplexForm::Items { .. } = self.form {
            writeln!(
                f,
                "  then the items of every key as the shape's read builds them, members batched across keys"
            )?;
        }
        if let (MultiplexForm::Record { key }, Some(record)) = (&self.form, &self.record) {
            writeln!(f, "  then for every key's {key} at once, in member order:")?;
            let mut out = String::new();
            for m in &record.members {
                match m {
                    RecordMember::Batch { key, plan } => {
                        super::print::batch(&mut out, key, plan, 2)
                    }
                    RecordMember::Value { key, value } => {
                        out.push_str(&format!("    {key}: echo {value}\n"))
                    }
                }
            }
            f.write_str(&out)?;
        }
        Ok(())
    }
}

/// Whether a statement of the list `a` (its main object's, its items' members', at any depth)
/// answers its `@explain`. Past the depth bound it is taken to.
fn explains_array(a: &ArrayPlan, depth: usize) -> bool {
    a.main.table.explain
        || explains_object(&a.main, depth + 1)
        || a.items.iter().any(|c| explains(c, depth + 1))
}

fn explains_object(o: &ObjectPlan, depth: usize) -> bool {
    o.table.explain || explains(&o.children, depth + 1)
}

fn explains(c: &ContainerPlan, depth: usize) -> bool {
    if depth > 64 {
        return true;
    }
    c.members.iter().any(|m| match m {
        MemberPlan::Object { plan: Ok(o), .. } => explains_object(o, depth),
        MemberPlan::Array { plan: Ok(a), .. } => explains_array(a, depth),
        _ => false,
    })
}

/// The kind of the column `slot` is compared with in `p`, when every comparison of it is with
/// a column of one kind.
fn compared_kind(p: &Pred, slot: usize) -> Option<ColumnKind> {
    fn walk(p: &Pred, slot: usize, found: &mut Vec<ColumnKind>, depth: usize) {
        if depth > 64 {
            return;
        }
        match p {
            Pred::And(v) | Pred::Or(v) => v.iter().for_each(|q| walk(q, slot, found, depth + 1)),
            Pred::Not(q) => walk(q, slot, found, depth + 1),
            Pred::Cmp(Expr::Column { kind, .. }, _, Expr::Slot(s))
            | Pred::Cmp(Expr::Slot(s), _, Expr::Column { kind, .. })
                if *s == slot =>
            {
                found.push(*kind)
            }
            _ => {}
        }
    }
    let mut found = Vec::new();
    walk(p, slot, &mut found, 0);
    let first = *found.first()?;
    found.iter().all(|k| *k == first).then_some(first)
}
