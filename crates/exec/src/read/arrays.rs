//! Arrays (`"key[]": {…}`, protocol §4.1, §7, §12): paging, totals, SQL joins, and items
//! built in member order, with the members that can be batched computed for all items at once.
//!
//! An array is planned first ([`ArrayRun`]), then its rows are read and turned into items
//! handed to an [`ItemSink`] one by one: collected for the buffered answer, or written out as
//! they come when the whole answer streams (see `stream`).

use super::{join, Reader, Site};
use crate::sink::ItemSink;
use crate::ExecError;
use apijet_core::Method;
use apijet_plan::array::{self, QueryMode};
use apijet_plan::query::Select;
use apijet_plan::{PlanError, TablePlan};
use apijet_request::{ArrayObject, Member, Node, TableObject};
use apijet_sql::{render, Statement};
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

/// An array planned down to the statement of its page, ready to read its rows.
pub(super) struct ArrayRun<'r> {
    a: &'r ArrayObject,
    arr_path: String,
    depth: usize,
    main_member: &'r Member,
    main: &'r TableObject,
    pub(super) plan: TablePlan,
    /// The page's statement (LIMIT count OFFSET page × count).
    pub(super) select: Select,
    json_outputs: Vec<String>,
    item_members: Vec<Member>,
    carried: Vec<Carried>,
    quiet: Vec<String>,
    totals: Option<(Json, Json)>,
}

impl ArrayRun<'_> {
    /// At most how many rows one item holds beyond its main row: one per object, `count` per
    /// array, among the item's members and the main object's children.
    pub(super) fn rows_per_item(&self, max_count: u64) -> u64 {
        let weight = |m: &Member| match &m.node {
            Node::Table(_) => 1,
            Node::Array(a) => {
                array::paging(a, "", max_count, u64::MAX).map_or(max_count, |p| p.count)
            }
            _ => 0,
        };
        let children = self.main.entries.iter().filter_map(|e| match e {
            apijet_request::TableEntry::Child(m) => Some(weight(m)),
            _ => None,
        });
        1 + self
            .item_members
            .iter()
            .map(weight)
            .chain(children)
            .sum::<u64>()
    }
}

/// The planning of an array: its rows to read, or an answer known without them.
pub(super) enum Prepared<'r> {
    Run(Box<ArrayRun<'r>>),
    Done(Box<ArrayOut>),
}

impl Reader<'_> {
    pub(super) async fn array(
        &mut self,
        a: &ArrayObject,
        key: &str,
        container: &str,
        depth: usize,
    ) -> Result<ArrayOut, ExecError> {
        let run = match self.prepare_array(a, key, container, depth).await? {
            Prepared::Done(out) => return Ok(*out),
            Prepared::Run(run) => run,
        };
        let mut items: Vec<Json> = Vec::new();
        self.run_items(&run, None, &mut items).await?;
        Ok(ArrayOut {
            empty: items.is_empty(),
            value: (!items.is_empty()).then_some(Json::Array(items)),
            totals: run.totals,
        })
    }

    /// Plans an array: paging, its main object, SQL joins, and totals.
    pub(super) async fn prepare_array<'r>(
        &mut self,
        a: &'r ArrayObject,
        key: &str,
        container: &str,
        depth: usize,
    ) -> Result<Prepared<'r>, ExecError> {
        let arr_path = join(container, key);
        if !matches!(self.env.method, Method::Get | Method::Gets) {
            return Err(ExecError::Forbidden(format!(
                "{key}:{{}} arrays are only supported by GET and GETS"
            )));
        }
        self.check_depth(&arr_path, depth)?;
        let opts = self.env.options;
        let paging = array::paging(a, &arr_path, opts.max_count, opts.max_page)?;
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
            ))
            .into());
        };
        let plan = TablePlan::new(main, &self.ctx())?;
        let select = {
            let mut resolve = |v: apijet_plan::ValueSource<'_>| match v {
                apijet_plan::ValueSource::Path(p) => self.resolve(p, container),
                _ => None,
            };
            plan.select(self.env.values, &mut resolve)?
        };
        let empty = || {
            Prepared::Done(Box::new(ArrayOut {
                value: None,
                totals: None,
                empty: true,
            }))
        };
        let Some(mut select) = select else {
            return Ok(empty());
        };
        let mut joined = false;
        let mut item_members: Vec<Member> = a.items.members.clone();
        item_members.remove(main_at);
        let mut quiet = Vec::new();
        let mut carried: Vec<Carried> = Vec::new();
        let mut json_outputs = plan.json_outputs.clone();
        let mut vices = Vec::new();
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
                let Some(vice_select) = vice_plan.select_without_refs(self.env.values)? else {
                    return Ok(empty());
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
                vices.push(vice_plan);
                joined = true;
            }
        }
        if joined {
            array::admit_joined(&select, &plan, &vices)?;
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
            return Ok(Prepared::Done(Box::new(ArrayOut {
                value: None,
                totals,
                empty: paging.mode != QueryMode::Total,
            })));
        }
        select.limit = Some(paging.count);
        select.offset = paging.page * paging.count;
        Ok(Prepared::Run(Box::new(ArrayRun {
            a,
            arr_path,
            depth,
            main_member,
            main,
            plan,
            select,
            json_outputs,
            item_members,
            carried,
            quiet,
            totals,
        })))
    }

    /// Reads the rows of a planned array and hands its items to `out`, in order. With `chunk`,
    /// the page is read `chunk` rows at a time (its select must be totally ordered), each
    /// chunk's items built, handed on and forgotten before the next: what the answer holds at
    /// once no longer grows with the page.
    pub(super) async fn run_items<S: ItemSink>(
        &mut self,
        run: &ArrayRun<'_>,
        chunk: Option<u64>,
        out: &mut S,
    ) -> Result<(), ExecError> {
        let quiet_before = self.quiet_explain.len();
        self.quiet_explain.extend(run.quiet.iter().cloned());
        let result = self.read_chunks(run, chunk, out).await;
        self.quiet_explain.truncate(quiet_before);
        result
    }

    async fn read_chunks<S: ItemSink>(
        &mut self,
        run: &ArrayRun<'_>,
        chunk: Option<u64>,
        out: &mut S,
    ) -> Result<(), ExecError> {
        let count = run.select.limit.unwrap_or(0);
        let step = chunk.filter(|&c| c < count);
        let item_prefix = format!("{}/", run.arr_path);
        let mut done = 0u64;
        loop {
            let mut select = run.select.clone();
            let want = match step {
                Some(step) => {
                    let want = step.min(count - done);
                    select.limit = Some(want);
                    select.offset = run.select.offset + done;
                    want
                }
                None => count,
            };
            let stmt = render(self.env.dialect, &select);
            let rows = self.rows(&stmt, &run.json_outputs).await?;
            let read = rows.len() as u64;
            if rows.is_empty() && done == 0 && run.plan.explain {
                // No row, but the statement and its plan are still answered, in the list's shape.
                let explained = json!({ "@explain": self.explain(&stmt).await? });
                let item = match run.a.key.table.is_some() {
                    true => explained,
                    false => json!({ run.main_member.key.clone(): explained }),
                };
                out.item(item);
                return Ok(());
            }
            self.chunk_items(run, rows, done as usize, &stmt, out)
                .await?;
            done += read;
            if step.is_none() || read < want || done >= count {
                return Ok(());
            }
            // Later items cannot refer to these (see `stream`): their kept results go.
            self.results.retain(|k, _| !k.starts_with(&item_prefix));
        }
    }

    /// Builds the items of `rows`, the rows from index `base` of the page, and hands them on.
    async fn chunk_items<S: ItemSink>(
        &mut self,
        run: &ArrayRun<'_>,
        mut rows: Vec<Map<String, Json>>,
        base: usize,
        stmt: &Statement,
        out: &mut S,
    ) -> Result<(), ExecError> {
        let ArrayRun {
            a,
            arr_path,
            depth,
            main_member,
            main,
            plan,
            item_members,
            carried,
            ..
        } = run;
        let (arr_path, depth) = (arr_path.as_str(), *depth);
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
        // First every item's main object, then each other member for all items at once where
        // one statement can serve them (see `batch`), then the items in member order.
        let mut mains = Vec::with_capacity(rows.len());
        for (i, row) in rows.into_iter().enumerate() {
            let i = base + i;
            let main_path = join(&format!("{arr_path}/{i}"), &main_member.key);
            self.scopes.push((arr_path.to_string(), i));
            let site = Site {
                path: &main_path,
                depth: depth + 1,
                explain: plan.explain && i == 0,
            };
            let result = self.finish_object(main, plan, row, stmt, site).await;
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
                    out.item(v);
                    self.flush_items(out).await?;
                }
            }
            return Ok(());
        }
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
        let mut batched = self
            .batch_members(&to_batch, &main_member.key, arr_path, &mains)
            .await?;
        let mut vice_rows_of = vice_rows;
        for (i, main_obj) in mains.into_iter().enumerate() {
            let at = base + i;
            let item_path = format!("{arr_path}/{at}");
            let mut item_out = Map::new();
            item_out.insert(main_member.key.clone(), Json::Object(main_obj));
            self.scopes.push((arr_path.to_string(), at));
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
                        .finish_object(&carried.object, &carried.plan, vice_row, stmt, site)
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
                let r = match batched.get_mut(m).and_then(Option::as_mut) {
                    Some(values) => {
                        // Each item's value is taken once: the batch is not kept past its item.
                        if let Some(v) = values.get_mut(i).and_then(Option::take) {
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
            out.item(Json::Object(item_out));
            self.flush_items(out).await?;
        }
        Ok(())
    }

    /// Hands buffered items on once the answer may start (see `stream`).
    async fn flush_items<S: ItemSink>(&self, out: &mut S) -> Result<(), ExecError> {
        if out.wants_flush() && self.may_send() {
            out.flush().await.map_err(|_| ExecError::ClientGone)?;
        }
        Ok(())
    }
}
