//! Arrays (`"key[]": {…}`, protocol §4.1, §7, §12): paging, totals, SQL joins, and items
//! built in member order, with the members that can be batched computed for all items at once.

use super::{join, Reader, Site};
use crate::ExecError;
use apijet_core::Method;
use apijet_plan::array::{self, QueryMode};
use apijet_plan::{PlanError, TablePlan};
use apijet_request::{ArrayObject, Member, Node, TableObject};
use apijet_sql::render;
use serde_json::{json, Map, Value as Json};

/// A vice object of a SQL join whose rows come with the main rows.
struct Carried {
    /// Its index among the item's members after the main object.
    member: usize,
    /// The prefix of its columns in the joined statement's output.
    prefix: String,
    object: TableObject,
    plan: TablePlan,
}

/// Removes the columns named `prefix…` from `row`, returning them without the prefix.
fn take_prefixed(row: &mut Map<String, Json>, prefix: &str) -> Map<String, Json> {
    if !row.keys().any(|k| k.starts_with(prefix)) {
        return Map::new();
    }
    let mut out = Map::new();
    let mut kept = Map::with_capacity(row.len());
    for (k, v) in std::mem::take(row) {
        match k.strip_prefix(prefix) {
            Some(name) => {
                out.insert(name.to_string(), v);
            }
            None => {
                kept.insert(k, v);
            }
        }
    }
    *row = kept;
    out
}

/// What an array answered.
pub(super) struct ArrayOut {
    pub(super) value: Option<Json>,
    pub(super) totals: Option<(Json, Json)>,
    /// Counts as empty for the first-child rule.
    pub(super) empty: bool,
}

impl Reader<'_> {
    pub(super) async fn array(
        &mut self,
        a: &ArrayObject,
        key: &str,
        container: &str,
        depth: usize,
    ) -> Result<ArrayOut, ExecError> {
        let arr_path = join(container, key);
        if !matches!(self.env.method, Method::Get | Method::Gets) {
            return Err(ExecError::Forbidden(format!(
                "{key}:{{}} arrays are only supported by GET and GETS"
            )));
        }
        self.check_depth(&arr_path, depth)?;
        let opts = self.env.options;
        let paging = array::paging(a, &arr_path, opts.max_count, opts.max_page)?;
        let Some((main_member, main)) = a.items.members.first().and_then(|m| match &m.node {
            Node::Table(t) => Some((m, t)),
            _ => None,
        }) else {
            return Err(PlanError::Invalid(format!(
                "{arr_path}:{{}} is not valid: the first key of an array must be a table object"
            ))
            .into());
        };
        let plan = TablePlan::new(main, &self.ctx())?;
        let select = {
            let mut resolve = |p: &str| self.resolve(p, container);
            plan.select(&mut resolve)?
        };
        let empty = ArrayOut {
            value: None,
            totals: None,
            empty: true,
        };
        let Some(mut select) = select else {
            return Ok(empty);
        };
        let mut joined = false;
        let mut item_members: Vec<Member> = a.items.members.get(1..).unwrap_or_default().to_vec();
        let mut quiet = Vec::new();
        let mut carried: Vec<Carried> = Vec::new();
        let mut json_outputs = plan.json_outputs.clone();
        if let Some(j) = &a.join {
            for spec in array::join_specs(j)? {
                if let Some((sub_array, _)) = spec.table_key.split_once('/') {
                    array::check_app_join_into_array(&spec, sub_array, &item_members)?;
                    continue;
                }
                let Some(index) = item_members.iter().position(|m| m.key == spec.table_key) else {
                    return Err(PlanError::Invalid(format!(
                        "join: {} is not a table object of {arr_path}",
                        spec.table_key
                    ))
                    .into());
                };
                let slot = &mut item_members[index];
                let Node::Table(vice) = &mut slot.node else {
                    return Err(PlanError::Invalid(format!(
                        "join: {} is not a table object",
                        spec.table_key
                    ))
                    .into());
                };
                if let Some(Json::Object(extra)) = &spec.extra {
                    let extra = TableObject::from_map(vice.key.clone(), extra.clone())
                        .map_err(|e| ExecError::Invalid(e.to_string()))?;
                    *vice = vice.merged(&extra);
                }
                if spec.kind == '@' {
                    continue;
                }
                if matches!(spec.kind, '&' | '<' | '>' | ')') {
                    quiet.push(spec.table_key.clone());
                }
                let vice_plan = TablePlan::new(vice, &self.ctx())?;
                let Some(vice_select) = vice_plan.select_without_refs()? else {
                    return Ok(empty);
                };
                // A grouped join answers one row per group: which vice row MySQL pairs with it
                // is arbitrary and PostgreSQL refuses the ungrouped columns, so the vice
                // object is queried on its own there, as before.
                let grouped =
                    plan.aggregate || !plan.group.is_empty() || !vice_plan.group.is_empty();
                if array::carries_vice_rows(spec.kind) && !grouped {
                    let prefix = format!("__j{}_", carried.len());
                    array::carry_vice_columns(&mut select, &prefix, &vice_select);
                    json_outputs.extend(
                        vice_plan
                            .json_outputs
                            .iter()
                            .map(|o| format!("{prefix}{o}")),
                    );
                    carried.push(Carried {
                        member: index,
                        prefix,
                        object: vice.clone(),
                        plan: vice_plan.clone(),
                    });
                }
                array::apply_join(
                    &mut select,
                    &main_member.key,
                    &spec,
                    &vice_plan,
                    vice_select,
                )?;
                array::merge_vice_clauses(&mut select, &vice_plan);
                joined = true;
            }
        }
        let mut totals = None;
        let mut total = None;
        if paging.mode != QueryMode::Rows {
            let wrap = paging.compat || joined || !select.group.is_empty() || select.distinct;
            let count_select = if wrap {
                select.count_wrapped()
            } else {
                select.count_plain()
            };
            let n = self.count(&count_select).await?;
            let count = paging.count.max(1);
            let max = n.saturating_sub(1) / count;
            let info = json!({
                "total": n, "count": paging.count, "page": paging.page, "max": max,
                "more": paging.page < max, "first": paging.page == 0, "last": paging.page == max,
            });
            self.results.insert(format!("{arr_path}/total"), json!(n));
            self.results
                .insert(format!("{arr_path}/info"), info.clone());
            if paging.mode == QueryMode::Both {
                totals = Some((json!(n), info));
            }
            total = Some(n);
        }
        if paging.mode == QueryMode::Total || total.is_some_and(|t| t <= paging.count * paging.page)
        {
            return Ok(ArrayOut {
                value: None,
                totals,
                empty: paging.mode != QueryMode::Total,
            });
        }
        select.limit = Some(paging.count);
        select.offset = paging.page * paging.count;
        let stmt = render(self.env.dialect, &select);
        let mut rows = self.rows(&stmt, &json_outputs).await?;
        // Each row's vice columns, split off into the vice rows SQL paired the row with.
        let vice_rows: Vec<Vec<Map<String, Json>>> = rows
            .iter_mut()
            .map(|row| {
                carried
                    .iter()
                    .map(|c| take_prefixed(row, &c.prefix))
                    .collect()
            })
            .collect();
        if rows.is_empty() && plan.explain {
            // No row, but the statement and its plan are still answered, in the list's shape.
            let explained = json!({ "@explain": self.explain(&stmt).await? });
            let item = match a.key.table.is_some() {
                true => explained,
                false => json!({ main_member.key.clone(): explained }),
            };
            return Ok(ArrayOut {
                value: Some(Json::Array(vec![item])),
                totals,
                empty: false,
            });
        }
        let mut items = Vec::with_capacity(rows.len());
        let quiet_before = self.quiet_explain.len();
        self.quiet_explain.extend(quiet);
        // First every item's main object, then each other member for all items at once where
        // one statement can serve them (see `batch`), then the items in member order.
        let mut mains = Vec::with_capacity(rows.len());
        for (i, row) in rows.into_iter().enumerate() {
            let main_path = join(&format!("{arr_path}/{i}"), &main_member.key);
            self.scopes.push((arr_path.clone(), i));
            let site = Site {
                path: &main_path,
                depth: depth + 1,
                explain: plan.explain && i == 0,
            };
            let result = self.finish_object(main, &plan, row, &stmt, site).await;
            self.scopes.pop();
            mains.push(result?);
        }
        if a.key.table.is_some() {
            for main_obj in mains {
                let mut v = Json::Object(main_obj);
                for seg in &a.key.extract {
                    v = v.get(seg).cloned().unwrap_or(Json::Null);
                }
                if !v.is_null() {
                    items.push(v);
                }
            }
        } else {
            // Members filled from the joined rows need no statement of their own.
            let to_batch: Vec<Member> = item_members
                .iter()
                .enumerate()
                .map(|(m, member)| match carried.iter().any(|c| c.member == m) {
                    true => Member {
                        key: member.key.clone(),
                        node: Node::Value(Json::Null),
                    },
                    false => member.clone(),
                })
                .collect();
            let batched = self
                .batch_members(&to_batch, &main_member.key, &arr_path, &mains)
                .await?;
            let mut vice_rows_of = vice_rows;
            for (i, main_obj) in mains.into_iter().enumerate() {
                let item_path = format!("{arr_path}/{i}");
                let mut item_out = Map::new();
                item_out.insert(main_member.key.clone(), Json::Object(main_obj));
                self.scopes.push((arr_path.clone(), i));
                for (m, member) in item_members.iter().enumerate() {
                    if let Some(c) = carried.iter().position(|c| c.member == m) {
                        let vice_row = std::mem::take(&mut vice_rows_of[i][c]);
                        if vice_row.is_empty() {
                            continue;
                        }
                        let carried = &carried[c];
                        let vice_path = join(&item_path, &member.key);
                        let site = Site {
                            path: &vice_path,
                            depth: depth + 1,
                            explain: false,
                        };
                        let r = self
                            .finish_object(&carried.object, &carried.plan, vice_row, &stmt, site)
                            .await;
                        match r {
                            Ok(obj) => {
                                // `@drop`: referable, not answered.
                                if !carried.plan.drop {
                                    item_out.insert(member.key.clone(), Json::Object(obj));
                                }
                            }
                            Err(e) => {
                                self.scopes.pop();
                                return Err(e);
                            }
                        }
                        continue;
                    }
                    let r = match batched.get(m).and_then(Option::as_ref) {
                        Some(values) => {
                            if let Some(v) = values.get(i).cloned().flatten() {
                                let path = join(&item_path, &member.key);
                                if self.refs.object(&path) {
                                    self.results.insert(path, v.clone());
                                }
                                item_out.insert(member.key.clone(), v);
                            }
                            Ok(true)
                        }
                        None => {
                            let one = std::slice::from_ref(member);
                            self.container(one, &item_path, &mut item_out, depth + 1, false)
                                .await
                        }
                    };
                    if let Err(e) = r {
                        self.scopes.pop();
                        return Err(e);
                    }
                }
                self.scopes.pop();
                items.push(Json::Object(item_out));
            }
        }
        self.quiet_explain.truncate(quiet_before);
        Ok(ArrayOut {
            empty: items.is_empty(),
            value: (!items.is_empty()).then_some(Json::Array(items)),
            totals,
        })
    }
}
