//! A statement whose text is written once per request shape: requests of the shape only bind
//! their values into it.
//!
//! A [`crate::TablePlan`] binds a request's values by planning its conditions again with them
//! ([`crate::TablePlan::select`]), since a value may decide what the statement is (an `id` ≤ 0
//! matches nothing, a list is as long as it is). Where every value of the request is only
//! bound (`column = value`, `column > value`), the statement is the same for every request
//! of the shape but for its binds: its [`Template`] holds it with the values' slots in place
//! ([`crate::query::Expr::Slot`]), and [`Template::accepts`] tells, per request, whether its
//! values are of the kind the template holds for. Its text is written by the `sql` stage the
//! first time it runs and kept with it.

use crate::query::Select;
use apijet_core::Value;
use serde_json::Value as Json;
use std::sync::OnceLock;

/// Where a bind of a written statement takes its value.
#[derive(Debug, Clone, PartialEq)]
pub enum Bind {
    /// A value of the plan.
    Value(Value),
    /// The request's value in this slot.
    Slot(usize),
}

/// A statement's text for one engine, with where each of its binds comes from.
#[derive(Debug, Clone)]
pub struct StatementText {
    /// The SQL text.
    pub sql: String,
    /// Its binds, in placeholder order.
    pub binds: Vec<Bind>,
}

/// What a slot's value must be for a template to hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotCheck {
    /// A number, a string or a boolean: bound as it is.
    Scalar,
    /// As [`SlotCheck::Scalar`], but not a number ≤ 0 nor an empty string, which as an `id`
    /// match nothing without a statement.
    Id,
}

impl SlotCheck {
    pub(crate) fn holds(self, v: &Json) -> bool {
        match (self, v) {
            (SlotCheck::Id, Json::Number(n)) => n.as_f64().is_some_and(|f| f > 0.0),
            (SlotCheck::Id, Json::String(s)) => !s.is_empty(),
            (_, Json::Number(_) | Json::String(_) | Json::Bool(_)) => true,
            _ => false,
        }
    }
}

/// A statement written once per shape.
#[derive(Debug)]
pub struct Template {
    /// The statement, with [`crate::query::Expr::Slot`] where the request's values go; it
    /// passed the column gate when it was made.
    pub select: Select,
    /// The slots it binds, with what their values must be.
    pub checks: Vec<(usize, SlotCheck)>,
    /// Its text, written the first time it runs.
    pub text: OnceLock<StatementText>,
    /// It reads at most one row by a unique key, with plain columns only
    /// ([`Select::is_key_lookup`]): its cost is bounded whatever its values.
    pub bounded: bool,
    /// Its answer's column names as the answer writer writes them, kept the first time it
    /// runs (a point lookup's): the same for every request of the shape.
    pub names: OnceLock<WrittenNames>,
}

/// The column names of a statement's answer, written once (the `response` stage fills it):
/// with the names the database gave, so that a statement answering other names is written
/// afresh instead.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WrittenNames {
    /// The names as given, end to end.
    pub given: String,
    /// The names as written in the answer, each followed by `:`, end to end.
    pub written: Vec<u8>,
    /// Per column: where its name ends in `given`, where its written name ends in `written`,
    /// and whether its values are answered as JSON.
    pub columns: Vec<(usize, usize, bool)>,
}

impl WrittenNames {
    /// Whether these are the names `names`, in order.
    pub fn are<'n>(&self, mut names: impl ExactSizeIterator<Item = &'n str>) -> bool {
        if names.len() != self.columns.len() {
            return false;
        }
        let mut start = 0;
        self.columns.iter().all(|&(end, _, _)| {
            let same = names.next() == self.given.get(start..end);
            start = end;
            same
        })
    }
}

impl Template {
    /// Whether the request's `values` are of the kind this statement holds for.
    pub fn accepts(&self, values: &[Json]) -> bool {
        self.checks
            .iter()
            .all(|(slot, check)| values.get(*slot).is_some_and(|v| check.holds(v)))
    }

    /// The binds of `text` for the request's `values` (which [`Template::accepts`]).
    pub fn binds(text: &StatementText, values: &[Json]) -> Vec<Value> {
        text.binds
            .iter()
            .map(|b| match b {
                Bind::Value(v) => v.clone(),
                Bind::Slot(i) => values.get(*i).map_or(Value::Null, Value::from_json),
            })
            .collect()
    }
}
