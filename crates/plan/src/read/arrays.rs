//! Arrays (`"key[]": {…}`, protocol §4.1, §7, §12): paging, the main object, SQL joins, and
//! the other members of an item, each read item by item or for all items at once.

use super::batch::{self, BatchPlan};
use super::container::{join, Builder, ContainerPlan, ObjectPlan};
use super::paging::{self, Paging};
use crate::condition::Resolver;
use crate::object::joins::{self, JoinPlan};
use crate::query::Select;
use crate::template::Template;
use crate::{PlanError, TablePlan};
use apijet_core::Method;
use apijet_request::{ArrayObject, Member, Node, TableEntry, TableObject};
use serde_json::Value as Json;

/// A SQL join of the item's main object with one of its other members (§12.2).
#[derive(Debug)]
pub(super) struct ItemJoin {
    pub(super) join: JoinPlan,
    /// The prefix of the vice's columns in the joined statement, when its rows come with the
    /// main rows.
    pub(super) carried: Option<String>,
}

/// A vice object of a SQL join whose rows come with the main rows.
#[derive(Debug)]
pub struct CarriedPlan {
    /// Its index among the item's members after the main object.
    pub member: usize,
    /// The prefix of its columns in the joined statement's output.
    pub prefix: String,
    /// The object.
    pub object: ObjectPlan,
}

/// An array planned down to the statement of its page.
#[derive(Debug)]
pub struct ArrayPlan {
    /// `Table[]`: the items are the main object's rows (or `extract` of them), not objects
    /// keyed by table.
    pub unwrapped: bool,
    /// `Table-a-b[]`: the path inside each row an item is.
    pub extract: Vec<String>,
    /// `count`, `page`, `query`, `compat`.
    pub paging: Paging,
    /// The key of the item's main object.
    pub main_key: String,
    /// The item's main object: its statement gives the page's rows.
    pub main: ObjectPlan,
    joins: Vec<ItemJoin>,
    /// The vice objects whose rows come with the main rows.
    pub carried: Vec<CarriedPlan>,
    /// The keys of the item's other members, in request order.
    pub item_keys: Vec<String>,
    /// Each other member, planned as read item by item (one member per container).
    pub items: Vec<ContainerPlan>,
    /// Each other member's reading for all items at once, where one statement can serve them
    /// (see [`BatchPlan`]), or why it cannot be planned.
    pub batches: Vec<Option<Result<BatchPlan, PlanError>>>,
    /// Table keys whose `@explain` is not answered: vice tables of SQL joins, which the
    /// reference fills from the joined row without a statement of their own.
    pub quiet: Vec<String>,
    /// Output names answered as JSON, the carried vices' under their prefixes.
    pub json_outputs: Vec<String>,
    /// At most how many rows one item holds beyond its main row.
    pub rows_per_item: u64,
    /// The main table's `id` column, when it has one (pages read in chunks are ordered by it).
    pub key_column: Option<String>,
    /// `Moment[]` → `momentListTotal` / `momentListInfo` (§7).
    pub totals_keys: (String, String),
    /// The page's statement written once for the shape, when it joins nothing and the
    /// request's values are only bound into it.
    pub template: Option<Template>,
}

impl ArrayPlan {
    /// The statement of the page (without its paging) with the request's `values` and the
    /// references' values; `None` when it cannot match.
    pub fn select(
        &self,
        values: &[Json],
        resolve: Resolver<'_>,
    ) -> Result<Option<Select>, PlanError> {
        let Some(mut select) = self.main.table.select(values, resolve)? else {
            return Ok(None);
        };
        for j in &self.joins {
            if !j.join.apply(&mut select, &self.main_key, values)? {
                return Ok(None);
            }
            if let Some(prefix) = &j.carried {
                select.columns.extend(j.join.columns_as(prefix));
            }
        }
        if !self.joins.is_empty() {
            let joined: Vec<&JoinPlan> = self.joins.iter().map(|j| &j.join).collect();
            joins::admit_joined(&select, &self.main.table, &joined)?;
        }
        Ok(Some(select))
    }

    /// The SQL joins of its page's statement.
    pub(super) fn joins(&self) -> &[ItemJoin] {
        &self.joins
    }

    /// The statements its page's statement is made of: the main object's, then each joined
    /// object's.
    pub fn plans(&self) -> impl Iterator<Item = &TablePlan> {
        std::iter::once(&self.main.table).chain(
            self.joins
                .iter()
                .flat_map(|j| std::iter::once(&j.join.vice).chain(&j.join.on)),
        )
    }

    /// The count of the rows `select` (from [`ArrayPlan::select`]) pages through.
    pub fn count_select(&self, select: &Select) -> Select {
        let wrap = self.paging.compat
            || !self.joins.is_empty()
            || !select.group.is_empty()
            || select.distinct;
        if wrap {
            select.count_wrapped()
        } else {
            select.count_plain()
        }
    }

    /// A list of one table's plain rows, which can stream from the cursor: `Table[]` of rows
    /// (no extract), or `[]` of one object, with nothing run on or added to the rows.
    pub(super) fn is_plain_list(&self, a: &ArrayObject) -> bool {
        let [item] = a.items.members.as_slice() else {
            return false;
        };
        let Node::Table(t) = &item.node else {
            return false;
        };
        let plain = t.entries.iter().all(|e| {
            matches!(
                e,
                TableEntry::Condition { .. }
                    | TableEntry::Slot { .. }
                    | TableEntry::Keyword { .. }
                    | TableEntry::SubqueryCondition { .. }
            )
        });
        let unwrapped = a.key.table.is_some() && a.key.extract.is_empty();
        let main = &self.main.table;
        plain
            && (unwrapped || a.key.name.is_empty())
            && !main.explain
            && !main.drop
            && main.echoes.is_empty()
            && main.procedures.is_empty()
    }
}

/// The item weight of a member for chunking: one row per object, `count` per array.
fn weight(m: &Member, max_count: u64) -> u64 {
    match &m.node {
        Node::Table(_) => 1,
        Node::Array(a) => paging::paging(a, "", max_count, u64::MAX).map_or(max_count, |p| p.count),
        _ => 0,
    }
}

impl Builder<'_> {
    /// Plans the array `a` under `key` of the container at `container`.
    pub(super) fn array(
        &mut self,
        a: &ArrayObject,
        key: &str,
        container: &str,
        depth: usize,
    ) -> Result<ArrayPlan, PlanError> {
        let arr_path = join(container, key);
        let options = self.inputs.options;
        if !matches!(self.inputs.method, Method::Get | Method::Gets) {
            return Err(PlanError::Forbidden(format!(
                "{key}:{{}} arrays are only supported by GET and GETS"
            )));
        }
        self.check_depth(&arr_path, depth)?;
        let paging = paging::paging(a, &arr_path, options.max_count, options.max_page)?;
        // The main object is the item's first object: plain values (custom `@` keys) before it
        // are echoed in the item, as the reference keeps them.
        let main_at = a
            .items
            .members
            .iter()
            .position(|m| !matches!(m.node, Node::Value(_)))
            .unwrap_or(0);
        let Some((main_member, main)) = a.items.members.get(main_at).and_then(|m| match &m.node {
            Node::Table(t) => Some((m, t)),
            _ => None,
        }) else {
            return Err(PlanError::Invalid(format!(
                "{arr_path}:{{}} is not valid: the first key of an array must be a table object"
            )));
        };
        let main_plan = TablePlan::new(main, &self.ctx())?;
        let mut item_members: Vec<Member> = a.items.members.clone();
        item_members.remove(main_at);
        let mut quiet = Vec::new();
        let mut joins = Vec::new();
        let mut carried_at: Vec<(usize, String, TableObject, TablePlan)> = Vec::new();
        let mut json_outputs = main_plan.json_outputs.clone();
        if let Some(j) = &a.join {
            for spec in joins::join_specs(j)? {
                if let Some((sub_array, _)) = spec.table_key.split_once('/') {
                    joins::check_app_join_into_array(&spec, sub_array, &item_members)?;
                    continue;
                }
                let Some(index) = item_members.iter().position(|m| m.key == spec.table_key) else {
                    return Err(PlanError::Invalid(format!(
                        "join: {} is not a table object of {arr_path}",
                        spec.table_key
                    )));
                };
                let Node::Table(vice) = &item_members[index].node else {
                    return Err(PlanError::Invalid(format!(
                        "join: {} is not a table object",
                        spec.table_key
                    )));
                };
                // An APP JOIN is the vice read for all items at once, as any member may be.
                if spec.kind == '@' {
                    continue;
                }
                if joins::carries_vice_rows(spec.kind) {
                    quiet.push(spec.table_key.clone());
                }
                let vice_plan = TablePlan::new(vice, &self.ctx())?;
                self.note(&vice_plan);
                let (on, on_names_columns) = match joins::on_object(&spec, vice)? {
                    Some(on) => {
                        let plan = TablePlan::new(&on, &self.ctx())?;
                        self.note(&plan);
                        (Some(plan), joins::names_columns(&on))
                    }
                    None => (None, false),
                };
                let join = JoinPlan::new(spec, vice_plan, on, on_names_columns)?;
                // The vice's answer is its part of the joined row, grouped with it.
                let carried = join.carries_rows().then(|| {
                    let prefix = format!("__j{}_", carried_at.len());
                    let outputs = match (&join.on, on_names_columns) {
                        (Some(on), true) => &on.json_outputs,
                        _ => &join.vice.json_outputs,
                    };
                    json_outputs.extend(outputs.iter().map(|o| format!("{prefix}{o}")));
                    carried_at.push((index, prefix.clone(), vice.clone(), join.vice.clone()));
                    prefix
                });
                joins.push(ItemJoin { join, carried });
            }
        }
        let item_path = format!("{arr_path}/0");
        let max_count = options.max_count;
        let children_weight: u64 = main
            .entries
            .iter()
            .filter_map(|e| match e {
                TableEntry::Child(m) => Some(weight(m, max_count)),
                _ => None,
            })
            .sum();
        let rows_per_item = 1
            + item_members
                .iter()
                .map(|m| weight(m, max_count))
                .sum::<u64>()
            + children_weight;
        let key_column = main_plan.table.column("id").map(|c| c.name.clone());
        let main_obj = self.finish(
            main,
            main_plan,
            &join(&item_path, &main_member.key),
            depth + 1,
        );
        let carried = carried_at
            .into_iter()
            .map(|(member, prefix, object, plan)| CarriedPlan {
                member,
                prefix,
                object: self.finish(
                    &object,
                    plan,
                    &join(&item_path, &item_members[member].key),
                    depth + 1,
                ),
            })
            .collect::<Vec<_>>();
        let unwrapped = a.key.table.is_some();
        // The items of `Table[]` are its rows: its other members are never read.
        let (items, batches) = if unwrapped {
            (Vec::new(), Vec::new())
        } else {
            let items = item_members
                .iter()
                .map(|m| self.container(std::slice::from_ref(m), &item_path, depth + 1))
                .collect();
            let batches = item_members
                .iter()
                .enumerate()
                .map(|(i, m)| match carried.iter().any(|c| c.member == i) {
                    // Filled from the joined rows: no statement of its own.
                    true => None,
                    false => batch::plan(self, m, &main_member.key, &arr_path),
                })
                .collect();
            (items, batches)
        };
        let base = super::list_key(key);
        let template = match joins.is_empty() {
            true => main_obj.table.template().map(|mut t| {
                t.select.limit = Some(paging.count);
                t.select.offset = paging.page * paging.count;
                t
            }),
            false => None,
        };
        Ok(ArrayPlan {
            unwrapped,
            extract: a.key.extract.clone(),
            paging,
            main_key: main_member.key.clone(),
            main: main_obj,
            joins,
            carried,
            item_keys: item_members.iter().map(|m| m.key.clone()).collect(),
            items,
            batches,
            quiet,
            json_outputs,
            rows_per_item,
            key_column,
            totals_keys: (format!("{base}Total"), format!("{base}Info")),
            template,
        })
    }
}
