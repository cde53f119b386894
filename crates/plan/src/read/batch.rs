//! One statement per nesting level instead of one per item.
//!
//! A list of N moments, each with its author (`"User": {"id@": "/Moment/userId"}`) and its
//! first comments (`"Comment[]": {"count": 5, "Comment": {"momentId@": "[]/Moment/id"}}`),
//! would cost 1 + 2N statements item by item, as the reference runs it. When a member of the
//! item refers only to the item's main object by equality, its rows for every item come from
//! one statement instead: `id IN (…all authors…)` for an object, and for a nested list a
//! `row_number() OVER (PARTITION BY momentId …)` window that keeps exactly `count` rows per
//! parent from page `page`. Anything else (functions, children, aggregates, joins, totals)
//! keeps the item-by-item path.

use super::container::Builder;
use super::paging::{self, QueryMode};
use crate::condition::{CondSpec, Operand};
use crate::query::{Expr, Ident, SelectItem};
use crate::{PlanError, TablePlan};
use apijet_core::Method;
use apijet_request::{ConditionKey, Logic, Member, Node, Op, TableEntry, TableObject};

/// A reference of a member to its item's main object: `vice = main`.
#[derive(Debug, Clone)]
pub struct Link {
    /// The member's column.
    pub vice: String,
    /// The main object's column.
    pub main: String,
}

/// What a batched member answers per item.
#[derive(Debug)]
pub enum BatchKind {
    /// An object: the first row of its links' values.
    Object,
    /// A nested list: `count` rows per item from page `page`.
    List {
        /// The item key of the nested list's rows (`Comment`).
        item_key: String,
        /// `Table[]`: the rows themselves are the items.
        unwrapped: bool,
        /// `Table-a-b[]`: the path inside each row an item is.
        extract: Vec<String>,
        /// Rows per parent.
        count: u64,
        /// Page of each parent's rows.
        page: u64,
        /// The member table's `id`, which orders rows without an order of their own.
        key_order: Option<String>,
    },
}

/// A member read for all items of its array by one statement.
#[derive(Debug)]
pub struct BatchPlan {
    /// How it refers to the main object.
    pub links: Vec<Link>,
    /// Its statement: each link is `vice IN (the items' values)`, bound from the parent rows
    /// ([`Operand::Parent`]).
    pub plan: TablePlan,
    /// Link columns added to the select list (taken out of the answers again).
    pub added: Vec<String>,
    /// Its table key, for `@explain`.
    pub table_key: String,
    /// Object or list.
    pub kind: BatchKind,
}

/// The array path as the client writes it: without item indices (`[]/0/Comment[]` → `[]/Comment[]`).
fn template(path: &str) -> String {
    path.split('/')
        .filter(|s| s.parse::<usize>().is_err())
        .collect::<Vec<_>>()
        .join("/")
}

/// The links of `t`, when every reference of it is `column@: <main>/<column>` by equality and
/// nothing else in it needs per-item work.
fn links(t: &TableObject, main_key: &str, paths: &[&str]) -> Option<Vec<Link>> {
    let mut out = Vec::new();
    for e in &t.entries {
        match e {
            TableEntry::RefCondition { key, path } => {
                if key.op != Op::Eq || key.logic != Logic::Default || key.length.is_some() {
                    return None;
                }
                let main = paths.iter().find_map(|p| path.strip_prefix(p))?;
                let main = main.strip_prefix(main_key)?.strip_prefix('/')?;
                if main.contains('/') {
                    return None;
                }
                out.push(Link {
                    vice: key.column.clone(),
                    main: main.to_string(),
                });
            }
            TableEntry::Child(_) | TableEntry::Function { .. } | TableEntry::FromSubquery(_) => {
                return None
            }
            _ => {}
        }
    }
    (!out.is_empty()).then_some(out)
}

/// The batch plan of member `m` of an item of the array at `arr_path` whose main object is
/// `main_key`: `None` when it is read item by item.
pub(super) fn plan(
    b: &mut Builder<'_>,
    m: &Member,
    main_key: &str,
    arr_path: &str,
) -> Option<Result<BatchPlan, PlanError>> {
    let item = format!("{}/", template(arr_path));
    // An object refers to the main object from its container, the item (`/Moment/id`), or by
    // the item's absolute path; a nested list's main table by the absolute path only.
    planned(b, m, main_key, arr_path, &["/", &item], &[&item])
}

/// The batch plan of member `m` of the answer's root whose first object is `main_key`, read
/// for the first objects of many requests at once (a record view, see `multiplex`): `None`
/// when it cannot be. The root's paths are absolute (`Moment/userId`); an object's container
/// is the root, so its relative path (`/Moment/userId`) names the same object, while a nested
/// list's item is its own container (`/Moment/id` there is not the root's).
pub(super) fn plan_at_root(
    b: &mut Builder<'_>,
    m: &Member,
    main_key: &str,
) -> Option<Result<BatchPlan, PlanError>> {
    planned(b, m, main_key, "", &["/", ""], &[""])
}

/// [`plan`] for a member of the container at `arr_path` whose references to the main object
/// start with one of `object_paths` (an object) or `list_paths` (a nested list's main table).
fn planned(
    b: &mut Builder<'_>,
    m: &Member,
    main_key: &str,
    arr_path: &str,
    object_paths: &[&str],
    list_paths: &[&str],
) -> Option<Result<BatchPlan, PlanError>> {
    match &m.node {
        Node::Table(t) => {
            let links = links(t, main_key, object_paths)?;
            let planned = TablePlan::new(t, &b.ctx()).and_then(|probe| {
                if !rows_alone(&probe) || b.inputs.method.is_count() {
                    return Ok(None);
                }
                batched(probe, t, links, BatchKind::Object).map(Some)
            });
            planned.transpose()
        }
        Node::Array(a) => {
            let [item] = a.items.members.as_slice() else {
                return None;
            };
            let Node::Table(t) = &item.node else {
                return None;
            };
            if a.join.is_some() || !matches!(b.inputs.method, Method::Get | Method::Gets) {
                return None;
            }
            let options = b.inputs.options;
            let path = super::container::join(arr_path, &m.key);
            let paging = match paging::paging(a, &path, options.max_count, options.max_page) {
                Ok(p) => p,
                Err(e) => return Some(Err(e)),
            };
            if paging.mode != QueryMode::Rows {
                return None;
            }
            let links = links(t, main_key, list_paths)?;
            let planned = TablePlan::new(t, &b.ctx()).and_then(|probe| {
                if !rows_alone(&probe)
                    || probe.distinct
                    || (probe.explain && !a.key.extract.is_empty())
                {
                    return Ok(None);
                }
                let kind = BatchKind::List {
                    item_key: item.key.clone(),
                    unwrapped: a.key.table.is_some(),
                    extract: a.key.extract.clone(),
                    count: paging.count,
                    page: paging.page,
                    key_order: probe.table.column("id").map(|c| c.name.clone()),
                };
                batched(probe, t, links, kind).map(Some)
            });
            planned.transpose()
        }
        _ => None,
    }
}

/// `plan` with its references replaced by `IN (every item's value)` and the linked columns
/// added to its select list when missing (they are taken out of the answers again).
fn batched(
    mut plan: TablePlan,
    t: &TableObject,
    links: Vec<Link>,
    kind: BatchKind,
) -> Result<BatchPlan, PlanError> {
    for c in &mut plan.conds {
        let Operand::Ref(_) = c.operand else {
            continue;
        };
        let Some(i) = links.iter().position(|l| l.vice == c.key.column) else {
            continue;
        };
        let key = ConditionKey::parse(&format!("{}{{}}", c.key.column))
            .map_err(|e| PlanError::Invalid(e.to_string()))?;
        *c = CondSpec::new(key, c.lhs.clone(), Operand::Parent(i));
    }
    // Only a select list the client named can lack a link column: the default one has every
    // column a client may see.
    let named = t
        .entries
        .iter()
        .any(|e| matches!(e, TableEntry::Keyword { name, .. } if name == "column"));
    let mut added = Vec::new();
    for l in links.iter().filter(|_| named) {
        let listed = plan.columns.iter().any(|c| c.alias.as_str() == l.vice);
        if listed || added.contains(&l.vice) {
            continue;
        }
        let column = plan
            .table
            .column(&l.vice)
            .ok_or_else(|| PlanError::UnknownColumn {
                table: plan.table.api_name.clone(),
                column: l.vice.clone(),
            })?;
        let item = SelectItem {
            expr: Expr::Column {
                table: Some(plan.alias.clone()),
                name: Ident::new(column.name.clone()),
                kind: column.kind,
            },
            alias: Ident::new(l.vice.clone()),
        };
        plan.columns.push(item);
        added.push(l.vice.clone());
    }
    plan.admit_parts()?;
    Ok(BatchPlan {
        links,
        plan,
        added,
        table_key: t.key.text(),
        kind,
    })
}

/// Whether a member's answer is its rows and nothing else, so that one statement can read
/// them for every parent: no `@drop`, procedure, aggregate or `@group`.
fn rows_alone(probe: &TablePlan) -> bool {
    !probe.drop && probe.procedures.is_empty() && !probe.aggregate && probe.group.is_empty()
}
