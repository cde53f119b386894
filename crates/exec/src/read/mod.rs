//! GET and HEAD: the request tree evaluated in request order, as the reference does.
//!
//! Objects are answered in request order because later objects may refer to earlier results
//! (`"id@": "Moment/userId"`). Each result is stored under its path (`[]/0/Moment`), and a
//! reference is resolved against those paths, with array indices filled in for the item being
//! built. The first-child rule (§6.4) stops a container whose first object or array is empty.

mod arrays;
mod batch;
mod explain;
mod keys;
mod references;
mod stream;

pub use keys::list_key;
use keys::percent_decode;
use references::References;
pub use stream::{nested_list, read_nested, Nested};

use crate::backend::Backend;
use crate::functions;
use crate::sink::CollectSink;
use crate::ExecError;
use apijet_core::Method;
use apijet_plan::query::Select;
use apijet_plan::schema::SchemaCache;
use apijet_plan::{plan_subquery, Ctx, PlanError, PlanOptions, TablePlan, Visitor};
use apijet_request::{Member, Node, Request, TableEntry, TableObject};
use apijet_sql::{render, Dialect, Statement};
use serde_json::{json, Map, Value as Json};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;

type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Everything a read needs.
pub struct ReadEnv<'a> {
    /// The database.
    pub backend: &'a Backend,
    /// Its dialect.
    pub dialect: &'a dyn Dialect,
    /// The schema cache.
    pub schema: &'a SchemaCache,
    /// Limits.
    pub options: &'a PlanOptions,
    /// GET, HEAD, GETS or HEADS.
    pub method: Method,
    /// The visitor.
    pub visitor: Option<&'a Visitor>,
    /// The request's condition values, in their slots (`apijet_plan::shape`).
    pub values: &'a [Json],
}

struct Reader<'a> {
    env: &'a ReadEnv<'a>,
    global_role: Option<&'a Json>,
    global_explain: bool,
    results: HashMap<String, Json>,
    scopes: Vec<(String, usize)>,
    subqueries: HashMap<String, Select>,
    /// Statements run so far for this request (the benchmark's proof of one per level).
    statements: std::sync::atomic::AtomicUsize,
    /// Rows and approximate bytes this answer holds so far, against `max_rows` and
    /// `max_answer_bytes`.
    held_rows: std::sync::atomic::AtomicUsize,
    held_bytes: std::sync::atomic::AtomicUsize,
    /// Table keys whose `@explain` is not answered: vice tables of SQL joins, which the
    /// reference fills from the joined row without a statement of their own.
    quiet_explain: Vec<String>,
    /// What references read: array keys read whole or by index, and every key named on a
    /// reference path; see [`References`].
    refs: References,
    /// For a streamed answer, the budget bytes past which its items may be sent before it is
    /// complete (see `stream`); `None` holds everything until the end.
    send_after: Option<usize>,
}

/// Runs one planned SELECT and collects its rows as JSON objects (internal lookups).
pub async fn fetch_rows(
    backend: &Backend,
    dialect: &dyn Dialect,
    select: &Select,
    json_outputs: &[String],
) -> Result<Vec<Map<String, Json>>, ExecError> {
    let mut sink = CollectSink::new(json_outputs);
    backend.fetch(&render(dialect, select), &mut sink).await?;
    Ok(sink.rows)
}

/// `k-()` functions run before the object's SQL; their results become conditions (§11).
fn with_pre_functions(
    t: &TableObject,
    visitor: Option<&apijet_core::Visitor>,
) -> Result<Option<TableObject>, ExecError> {
    if !t
        .entries
        .iter()
        .any(|e| matches!(e, TableEntry::Function { key, .. } if key.ends_with("-()")))
    {
        return Ok(None);
    }
    let mut entries = Vec::with_capacity(t.entries.len());
    let empty = Map::new();
    for e in &t.entries {
        match e {
            TableEntry::Function { key, call } if key.ends_with("-()") => {
                let name = key.trim_end_matches("-()");
                if let Some(value) = functions::call(call, &empty, visitor)? {
                    let key = apijet_request::ConditionKey::parse(name)
                        .map_err(|e| ExecError::Invalid(e.to_string()))?;
                    entries.push(TableEntry::Condition { key, value });
                }
            }
            other => entries.push(other.clone()),
        }
    }
    Ok(Some(TableObject {
        key: t.key.clone(),
        entries,
    }))
}

/// About how many bytes an object adds to a JSON answer, for budgets.
fn approx_object_bytes(row: &Map<String, Json>) -> usize {
    row.iter()
        .map(|(k, v)| {
            k.len()
                + 4
                + match v {
                    Json::String(s) => s.len() + 2,
                    Json::Array(_) | Json::Object(_) => 64,
                    _ => 12,
                }
        })
        .sum()
}

/// The refusal of an answer past `max_rows` or `max_answer_bytes`.
pub fn over_budget(opts: &PlanOptions) -> ExecError {
    ExecError::Plan(PlanError::Limit(format!(
        "the answer would hold more than {} rows or {} bytes across its levels (settings \
         max_rows, max_answer_bytes): ask for fewer with count and page, or fewer nested \
         levels",
        opts.max_rows, opts.max_answer_bytes
    )))
}

/// What a read produced.
pub struct Outcome {
    /// The answered members, in request order.
    pub results: Map<String, Json>,
    /// How many statements it ran.
    pub statements: usize,
}

/// Runs a GET/HEAD request.
pub async fn read(req: &Request, env: &ReadEnv<'_>) -> Result<Outcome, ExecError> {
    let customs =
        apijet_plan::keywords::check_root_keywords(&req.globals, env.method, env.options)?;
    let mut reader = Reader::new(req, env);
    let mut out = Map::new();
    reader
        .container(&req.root.members, "", &mut out, 1, true)
        .await?;
    // Custom root `@` keys come back after the objects, as the reference answers them.
    out.extend(customs);
    Ok(Outcome {
        results: out,
        statements: reader.statements.into_inner(),
    })
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}/{key}")
    }
}

/// Where a fetched row sits in the answer.
pub(crate) struct Site<'p> {
    path: &'p str,
    depth: usize,
    /// Whether this object answers its `@explain`.
    explain: bool,
}

impl<'a> Reader<'a> {
    fn new(req: &'a Request, env: &'a ReadEnv<'a>) -> Reader<'a> {
        Reader {
            env,
            global_role: req.global("role"),
            global_explain: req
                .global("explain")
                .and_then(Json::as_bool)
                .unwrap_or(false),
            results: HashMap::new(),
            scopes: Vec::new(),
            subqueries: HashMap::new(),
            quiet_explain: Vec::new(),
            refs: {
                let mut refs = References::default();
                refs.collect(&req.root);
                refs
            },
            statements: Default::default(),
            held_rows: Default::default(),
            held_bytes: Default::default(),
            send_after: None,
        }
    }

    /// Whether a streamed answer has used enough of its budget that its items may go out
    /// before it is complete.
    fn may_send(&self) -> bool {
        self.send_after
            .is_some_and(|after| self.held_bytes.load(std::sync::atomic::Ordering::Relaxed) > after)
    }

    fn ctx(&self) -> Ctx<'_> {
        Ctx {
            schema: self.env.schema,
            options: self.env.options,
            method: self.env.method,
            visitor: self.env.visitor,
            global_role: self.global_role,
            global_explain: self.global_explain,
            subqueries: Some(&self.subqueries),
            trusted: false,
        }
    }

    /// Resolves a reference path against results produced so far.
    fn resolve(&self, path: &str, container: &str) -> Option<Json> {
        let decoded = percent_decode(path);
        let mut full = match decoded.strip_prefix('/') {
            Some(rel) => join(container, rel),
            None => decoded,
        };
        for (apath, i) in &self.scopes {
            let prefix = format!("{apath}/");
            if let Some(rest) = full.strip_prefix(&prefix) {
                let next = rest.split('/').next().unwrap_or_default();
                if next.parse::<usize>().is_err() {
                    full = format!("{apath}/{i}/{rest}");
                }
            }
        }
        if let Some(v) = self.results.get(&full) {
            return Some(v.clone());
        }
        let mut cut = full.len();
        while let Some(pos) = full[..cut].rfind('/') {
            if let Some(base) = self.results.get(&full[..pos]) {
                let mut v = base;
                for seg in full[pos + 1..].split('/') {
                    v = match v {
                        Json::Object(m) => m.get(seg)?,
                        Json::Array(a) => a.get(seg.parse::<usize>().ok()?)?,
                        _ => return None,
                    };
                }
                return Some(v.clone());
            }
            cut = pos;
        }
        None
    }

    async fn rows(
        &self,
        stmt: &Statement,
        json: &[String],
    ) -> Result<Vec<Map<String, Json>>, ExecError> {
        use std::sync::atomic::Ordering::Relaxed;
        let opts = self.env.options;
        let mut sink = CollectSink::within(
            json,
            opts.max_rows.saturating_sub(self.held_rows.load(Relaxed)),
            opts.max_answer_bytes
                .saturating_sub(self.held_bytes.load(Relaxed)),
        );
        self.statements.fetch_add(1, Relaxed);
        match self.env.backend.fetch(stmt, &mut sink).await {
            Err(ExecError::ClientGone) if sink.over_budget => return Err(self.over_budget()),
            other => other?,
        };
        self.hold(sink.rows.len(), sink.bytes)?;
        Ok(sink.rows)
    }

    /// Counts rows placed in the answer beyond those fetched (one row shared by many items).
    fn hold(&self, rows: usize, bytes: usize) -> Result<(), ExecError> {
        use std::sync::atomic::Ordering::Relaxed;
        let opts = self.env.options;
        let held_rows = self.held_rows.fetch_add(rows, Relaxed) + rows;
        let held_bytes = self.held_bytes.fetch_add(bytes, Relaxed) + bytes;
        if held_rows > opts.max_rows || held_bytes > opts.max_answer_bytes {
            return Err(self.over_budget());
        }
        Ok(())
    }

    /// Counts the copies of fetched rows that the answer holds beyond the rows themselves:
    /// one author shared by a hundred items is a hundred objects in the answer.
    fn hold_copies(&self, placed: usize, fetched: &[Map<String, Json>]) -> Result<(), ExecError> {
        let extra = placed.saturating_sub(fetched.len());
        if extra == 0 {
            return Ok(());
        }
        let fetched_bytes: usize = fetched.iter().map(approx_object_bytes).sum();
        let per_row = fetched_bytes / fetched.len().max(1);
        self.hold(extra, extra.saturating_mul(per_row))
    }

    fn over_budget(&self) -> ExecError {
        over_budget(self.env.options)
    }

    async fn count(&self, select: &Select) -> Result<u64, ExecError> {
        let stmt = render(self.env.dialect, select);
        let rows = self.rows(&stmt, &[]).await?;
        Ok(rows
            .first()
            .and_then(|r| r.get("count"))
            .and_then(|v| {
                v.as_u64()
                    .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
            })
            .unwrap_or(0))
    }

    /// Evaluates container members; returns false when the first-child rule emptied it.
    fn container<'s>(
        &'s mut self,
        members: &'s [Member],
        path: &'s str,
        out: &'s mut Map<String, Json>,
        depth: usize,
        first_rule: bool,
    ) -> BoxFuture<'s, Result<bool, ExecError>> {
        Box::pin(async move {
            let mut first = first_rule;
            let (mut tables, mut arrays) = (0usize, 0usize);
            // Named subqueries are echoed as `"name": {}` after the other members, as the
            // reference answers them.
            let mut subquery_echoes = Vec::new();
            for m in members {
                match &m.node {
                    Node::Table(t) => {
                        tables += 1;
                        if tables > self.env.options.max_objects {
                            return Err(PlanError::Limit(format!(
                                "{path}: the number of objects reaches {tables} at {}:{{}}, \
                                 more than the limit of {} (setting max_objects)",
                                m.key, self.env.options.max_objects
                            ))
                            .into());
                        }
                        let obj_path = join(path, &m.key);
                        match self.table(t, &obj_path, path, depth).await? {
                            Some((obj, drop)) => {
                                if drop && first {
                                    out.clear();
                                    return Ok(false);
                                }
                                if !drop {
                                    out.insert(m.key.clone(), obj);
                                }
                            }
                            None if first => {
                                out.clear();
                                return Ok(false);
                            }
                            None => {}
                        }
                        first = false;
                    }
                    Node::Array(a) => {
                        arrays += 1;
                        if arrays > self.env.options.max_arrays {
                            return Err(PlanError::Limit(format!(
                                "{path}: the number of arrays reaches {arrays} at {}, more than \
                                 the limit of {} (a fixed limit, as in the reference)",
                                m.key, self.env.options.max_arrays
                            ))
                            .into());
                        }
                        let res = self.array(a, &m.key, path, depth).await?;
                        if let Some((total, info)) = res.totals {
                            let base = list_key(&m.key);
                            out.insert(format!("{base}Total"), total);
                            out.insert(format!("{base}Info"), info);
                        }
                        match res.value {
                            Some(v) => {
                                if self.refs.whole_arrays.contains(&m.key) {
                                    self.results.insert(join(path, &m.key), v.clone());
                                }
                                out.insert(m.key.clone(), v);
                            }
                            None if first && res.empty => {
                                out.clear();
                                return Ok(false);
                            }
                            None => {}
                        }
                        first = false;
                    }
                    Node::Reference(p) => {
                        let name = m.key.trim_end_matches('@');
                        if let Some(v) = self.resolve(p, path) {
                            self.results.insert(join(path, name), v.clone());
                            out.insert(name.to_string(), v);
                        }
                    }
                    Node::Subquery(sq) => {
                        let name = m.key.trim_end_matches('@').to_string();
                        let select = plan_subquery(sq, &self.ctx())?;
                        self.subqueries.insert(name.clone(), select);
                        subquery_echoes.push(name);
                    }
                    Node::Function(call) => {
                        let name = m.key.trim_end_matches("()").trim_end_matches(['-', '+']);
                        let value = if call.trim() == "getCurrentUser()" {
                            self.current_user(path, depth).await?
                        } else {
                            functions::call(call, out, self.env.visitor)?
                        };
                        if let Some(v) = value {
                            // Referable like any result: `"User":{"id@":"curId"}`.
                            self.results.insert(join(path, name), v.clone());
                            out.insert(name.to_string(), v);
                        }
                    }
                    Node::Value(v) if m.key.starts_with('@') => {
                        // Root keywords with an object value (`"@gets":{…}`, the CRUD
                        // declarations' object form) are checked like the others; any other
                        // `@` key of a container is a custom value, echoed as the reference
                        // does, unless it looks like a misspelt keyword.
                        let global = [(m.key[1..].to_string(), v.clone())];
                        let customs = apijet_plan::keywords::check_root_keywords(
                            &global,
                            self.env.method,
                            self.env.options,
                        )?;
                        if depth > 1 || !v.is_object() || !customs.is_empty() {
                            out.insert(m.key.clone(), v.clone());
                        }
                    }
                    Node::Value(v) => {
                        out.insert(m.key.clone(), v.clone());
                    }
                }
            }
            for name in subquery_echoes {
                out.insert(name, json!({}));
            }
            Ok(true)
        })
    }

    /// One table object; `None` when it has no row (or cannot match).
    async fn table(
        &mut self,
        t: &TableObject,
        obj_path: &str,
        container: &str,
        depth: usize,
    ) -> Result<Option<(Json, bool)>, ExecError> {
        self.check_depth(obj_path, depth)?;
        let prepared = with_pre_functions(t, self.env.visitor)?;
        let t = prepared.as_ref().unwrap_or(t);
        let plan = TablePlan::new(t, &self.ctx())?;
        let select = {
            let mut resolve = |v: apijet_plan::ValueSource<'_>| match v {
                apijet_plan::ValueSource::Path(p) => self.resolve(p, container),
                _ => None,
            };
            plan.select(self.env.values, &mut resolve)?
        };
        let Some(mut select) = select else {
            return Ok(None);
        };
        if self.env.method.is_count() {
            let count_select = plan.count_select(select);
            let stmt = render(self.env.dialect, &count_select);
            let n = self.count(&count_select).await?;
            let mut obj = Map::new();
            if plan.explain {
                obj.insert("@explain".into(), self.explain(&stmt).await?);
            }
            obj.insert("ok".into(), Json::Bool(true));
            obj.insert("code".into(), json!(200));
            obj.insert("msg".into(), json!("success"));
            obj.insert("count".into(), json!(n));
            return Ok(Some((Json::Object(obj), plan.drop)));
        }
        select.limit = Some(1);
        let stmt = render(self.env.dialect, &select);
        let explain = plan.explain && !self.quiet_explain.contains(&t.key.text());
        let rows = self.rows(&stmt, &plan.json_outputs).await?;
        let Some(obj) = rows.into_iter().next() else {
            // With @explain the object answers its statement even when no row matched.
            if !explain {
                return Ok(None);
            }
            let explained = self.explain(&stmt).await?;
            return Ok(Some((json!({ "@explain": explained }), plan.drop)));
        };
        let obj = self
            .finish_object(
                t,
                &plan,
                obj,
                &stmt,
                Site {
                    path: obj_path,
                    depth,
                    explain,
                },
            )
            .await?;
        Ok(Some((Json::Object(obj), plan.drop)))
    }

    /// Adds echoes, `@explain`, functions and children to a fetched row.
    async fn finish_object(
        &mut self,
        t: &TableObject,
        plan: &TablePlan,
        mut obj: Map<String, Json>,
        stmt: &Statement,
        site: Site<'_>,
    ) -> Result<Map<String, Json>, ExecError> {
        let Site {
            path: obj_path,
            depth,
            explain,
        } = site;
        for (k, v) in &plan.echoes {
            obj.insert(k.clone(), v.clone());
        }
        if explain {
            let mut first = Map::with_capacity(obj.len() + 1);
            first.insert("@explain".into(), self.explain(stmt).await?);
            first.extend(obj);
            obj = first;
        }
        for e in &t.entries {
            if let TableEntry::Function { key, call } = e {
                if key.ends_with("-()") {
                    continue;
                }
                let name = key.trim_end_matches("()").trim_end_matches('+');
                if let Some(v) = functions::call(call, &obj, self.env.visitor)? {
                    obj.insert(name.to_string(), v);
                }
            }
        }
        for call in &plan.procedures {
            let opts = self.env.options;
            let answer = crate::procedure::run(
                self.env.backend,
                self.env.dialect,
                call,
                &obj,
                opts.max_rows,
                opts.max_answer_bytes,
            )
            .await?;
            self.statements
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            if let Some(v) = answer {
                obj.insert(call.answer_key.clone(), v);
            }
        }
        let keep = self.refs.object(obj_path);
        if keep {
            self.results
                .insert(obj_path.to_string(), Json::Object(obj.clone()));
        }
        let children: Vec<Member> = t
            .entries
            .iter()
            .filter_map(|e| match e {
                TableEntry::Child(m) => Some((**m).clone()),
                _ => None,
            })
            .collect();
        if !children.is_empty() {
            self.container(&children, obj_path, &mut obj, depth + 1, false)
                .await?;
            if keep {
                self.results
                    .insert(obj_path.to_string(), Json::Object(obj.clone()));
            }
        }
        Ok(obj)
    }

    fn check_depth(&self, path: &str, depth: usize) -> Result<(), ExecError> {
        let max = self.env.options.max_depth;
        if depth > max {
            return Err(PlanError::Limit(format!(
                "{path}:{{}} is nested {depth} levels deep, more than the limit of 1-{max} \
                 (setting max_depth)"
            ))
            .into());
        }
        Ok(())
    }
}
