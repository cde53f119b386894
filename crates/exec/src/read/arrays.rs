//! Arrays (`"key[]": {…}`, protocol §4.1, §7, §12): the page's rows read and turned into
//! items in member order, with the members that the plan batched read for all items at once.
//!
//! An array's statement is bound first ([`ArrayRun`]), then its rows are read and turned into
//! items handed to an [`ItemSink`] one by one: collected for the buffered answer, or written out
//! as they come when the whole answer streams (see `stream`).

use super::{join, Reader, Site};
use crate::sink::ItemSink;
use crate::ExecError;
use apijet_plan::query::Select;
use apijet_plan::read::ArrayPlan;
use apijet_plan::read::QueryMode;
use apijet_plan::ValueSource;
use apijet_sql::{render, Statement};
use serde_json::{json, Map, Value as Json};

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

/// An array bound down to the statement of its page, ready to read its rows.
pub(super) struct ArrayRun<'r> {
    pub(super) plan: &'r ArrayPlan,
    arr_path: String,
    /// The page's statement (LIMIT count OFFSET page × count).
    pub(super) select: Select,
    totals: Option<(Json, Json)>,
}

impl<'r> ArrayRun<'r> {
    /// The run of the array `plan` at the root under `key`, whose rows were read by `select`
    /// (a multiplexed read's, see `multiplex`): no totals.
    pub(super) fn at_root(plan: &'r ArrayPlan, key: &str, select: Select) -> ArrayRun<'r> {
        ArrayRun {
            plan,
            arr_path: key.to_string(),
            select,
            totals: None,
        }
    }
}

/// The binding of an array: its rows to read, or an answer known without them.
pub(super) enum Prepared<'r> {
    Run(Box<ArrayRun<'r>>),
    Done(Box<ArrayOut>),
}

impl<'a> Reader<'a> {
    pub(super) async fn array(
        &mut self,
        plan: &'a ArrayPlan,
        key: &str,
        container: &str,
    ) -> Result<ArrayOut, ExecError> {
        let run = match self.prepare_array(plan, key, container).await? {
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

    /// Binds an array's statement, and reads its totals.
    pub(super) async fn prepare_array(
        &mut self,
        plan: &'a ArrayPlan,
        key: &str,
        container: &str,
    ) -> Result<Prepared<'a>, ExecError> {
        let arr_path = join(container, key);
        let select = {
            let mut resolve = |v: ValueSource<'_>| match v {
                ValueSource::Path(p) => self.resolve(p, container),
                _ => None,
            };
            plan.select(self.env.values, &mut resolve)?
        };
        let Some(mut select) = select else {
            return Ok(Prepared::Done(Box::new(ArrayOut {
                value: None,
                totals: None,
                empty: true,
            })));
        };
        let paging = plan.paging;
        let mut totals = None;
        let mut total = None;
        if paging.mode != QueryMode::Rows {
            let n = self.count(&plan.count_select(&select)).await?;
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
            plan,
            arr_path,
            select,
            totals,
        })))
    }

    /// Reads the rows of a bound array and hands its items to `out`, in order. With `chunk`,
    /// the page is read `chunk` rows at a time (its select must be totally ordered), each
    /// chunk's items built, handed on and forgotten before the next: what the answer holds at
    /// once no longer grows with the page.
    pub(super) async fn run_items<S: ItemSink>(
        &mut self,
        run: &ArrayRun<'a>,
        chunk: Option<u64>,
        out: &mut S,
    ) -> Result<(), ExecError> {
        let quiet_before = self.quiet_explain.len();
        self.quiet_explain.extend(run.plan.quiet.iter().cloned());
        let result = self.read_chunks(run, chunk, out).await;
        self.quiet_explain.truncate(quiet_before);
        result
    }

    async fn read_chunks<S: ItemSink>(
        &mut self,
        run: &ArrayRun<'a>,
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
            let rows = self.rows(&stmt, &run.plan.json_outputs).await?;
            let read = rows.len() as u64;
            if rows.is_empty() && done == 0 && run.plan.main.table.explain {
                // No row, but the statement and its plan are still answered, in the list's shape.
                let explained = json!({ "@explain": self.explain(&stmt).await? });
                let item = match run.plan.unwrapped {
                    true => explained,
                    false => json!({ run.plan.main_key.clone(): explained }),
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
    pub(super) async fn chunk_items<S: ItemSink>(
        &mut self,
        run: &ArrayRun<'a>,
        mut rows: Vec<Map<String, Json>>,
        base: usize,
        stmt: &Statement,
        out: &mut S,
    ) -> Result<(), ExecError> {
        let plan = run.plan;
        let arr_path = run.arr_path.as_str();
        // Each row's vice columns, split off into the vice rows SQL paired the row with.
        let vice_rows: Vec<Vec<Map<String, Json>>> = rows
            .iter_mut()
            .map(|row| {
                plan.carried
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
            let main_path = join(&format!("{arr_path}/{i}"), &plan.main_key);
            self.scopes.push((arr_path.to_string(), i));
            let site = Site {
                path: &main_path,
                explain: plan.main.table.explain && i == 0,
            };
            let result = self.finish_object(&plan.main, row, stmt, site).await;
            self.scopes.pop();
            mains.push(result?);
        }
        if plan.unwrapped {
            for main_obj in mains {
                let mut v = Json::Object(main_obj);
                for seg in &plan.extract {
                    v = v.get(seg).cloned().unwrap_or(Json::Null);
                }
                if !v.is_null() {
                    out.item(v);
                    self.flush_items(out).await?;
                }
            }
            return Ok(());
        }
        let mut batched = self.batch_members(plan, &mains).await?;
        let mut vice_rows_of = vice_rows;
        for (i, main_obj) in mains.into_iter().enumerate() {
            let at = base + i;
            let item_path = format!("{arr_path}/{at}");
            let mut item_out = Map::new();
            item_out.insert(plan.main_key.clone(), Json::Object(main_obj));
            self.scopes.push((arr_path.to_string(), at));
            let built = self
                .item_members(
                    run,
                    i,
                    &item_path,
                    &mut item_out,
                    &mut batched,
                    &mut vice_rows_of,
                    stmt,
                )
                .await;
            self.scopes.pop();
            built?;
            out.item(Json::Object(item_out));
            self.flush_items(out).await?;
        }
        Ok(())
    }

    /// The members after the main object of item `i` (of the chunk): from the joined row, from
    /// their batch, or read for the item itself.
    #[allow(clippy::too_many_arguments)]
    async fn item_members(
        &mut self,
        run: &ArrayRun<'a>,
        i: usize,
        item_path: &str,
        item_out: &mut Map<String, Json>,
        batched: &mut [super::batch::PerItem],
        vice_rows: &mut [Vec<Map<String, Json>>],
        stmt: &Statement,
    ) -> Result<(), ExecError> {
        let plan = run.plan;
        for (m, key) in plan.item_keys.iter().enumerate() {
            if let Some(c) = plan.carried.iter().position(|c| c.member == m) {
                let vice_row = std::mem::take(&mut vice_rows[i][c]);
                if vice_row.is_empty() {
                    continue;
                }
                let carried = &plan.carried[c];
                let vice_path = join(item_path, key);
                let site = Site {
                    path: &vice_path,
                    explain: false,
                };
                let obj = self
                    .finish_object(&carried.object, vice_row, stmt, site)
                    .await?;
                // `@drop`: referable, not answered.
                if !carried.object.table.drop {
                    item_out.insert(key.clone(), Json::Object(obj));
                }
                continue;
            }
            match batched.get_mut(m).and_then(Option::as_mut) {
                Some(values) => {
                    // Each item's value is taken once: the batch is not kept past its item.
                    if let Some(v) = values.get_mut(i).and_then(Option::take) {
                        let path = join(item_path, key);
                        if self.plan.refs.object(&path) {
                            self.results.insert(path, v.clone());
                        }
                        item_out.insert(key.clone(), v);
                    }
                }
                None => {
                    self.container(&plan.items[m], item_path, item_out, false)
                        .await?;
                }
            }
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
