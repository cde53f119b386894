//! Runs a read plan ([`ReadPlan`]) on a backend into an [`AnswerSink`].
//!
//! One entry point, [`run`], for every mode the plan chose: a point lookup's statement feeds
//! the sink's rows, a plain list streams its rows, a nested list hands its items over one by
//! one, and a general read is evaluated in request order, as the reference does, because later
//! objects may refer to earlier results (`"id@": "Moment/userId"`): each result is kept under
//! its path (`[]/0/Moment`), a reference is resolved against those paths with the array
//! indices of the item being built, and the first-child rule (§6.4) stops a container whose
//! first object or array is empty. Reads change nothing, so a replica that cannot be reached
//! is replaced by the primary, as long as nothing of the answer left.

mod arrays;
mod batch;
mod explain;
mod multiplex;
mod objects;
mod stream;

pub use multiplex::{run_multiplexed, Multiplexed};
pub use stream::{EARLY_BYTES, HOLD_BYTES};

use crate::backend::Backend;
use crate::functions;
use crate::sink::{AnswerSink, CollectSink, Form};
use crate::ExecError;
use apijet_plan::query::Select;
use apijet_plan::read::{Mode, ObjectPlan, ReadPlan};
use apijet_plan::template::Template;
use apijet_plan::{PlanError, PlanOptions, RefPath, ValueSource, Visitor};
use apijet_sql::{render, render_template, Dialect, Statement};
use serde_json::{Map, Value as Json};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;

type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Everything a read needs beside its plan.
pub struct ReadEnv<'a> {
    /// The database the read runs on (a replica for GET and HEAD, when there are any).
    pub backend: &'a Backend,
    /// The primary, when `backend` is a replica: it answers when the replica cannot.
    pub fallback: Option<&'a Backend>,
    /// The dialect of both.
    pub dialect: &'a dyn Dialect,
    /// Limits (the answer's budget, `max_count` for chunks).
    pub options: &'a PlanOptions,
    /// The visitor (remote functions read it).
    pub visitor: Option<&'a Visitor>,
    /// The request's condition values, in their slots (`apijet_plan::shape`).
    pub values: &'a [Json],
}

/// What a read did.
#[derive(Debug, Clone, Copy, Default)]
pub struct Outcome {
    /// How many statements it ran.
    pub statements: usize,
}

/// Runs `plan` into `sink`: the one way a read runs.
pub async fn run<'p, S: AnswerSink<'p>>(
    plan: &'p ReadPlan,
    env: &ReadEnv<'_>,
    sink: &mut S,
) -> Result<Outcome, ExecError> {
    let result = run_on(plan, env, env.backend, sink).await;
    match (result, env.fallback) {
        (Err(e), Some(primary)) if e.is_unreachable() && !sink.started() => {
            // Reads change nothing: a replica that could not answer is replaced by the primary.
            sink.restart();
            run_on(plan, env, primary, sink).await
        }
        (result, _) => result,
    }
}

async fn run_on<'p, S: AnswerSink<'p>>(
    plan: &'p ReadPlan,
    env: &ReadEnv<'_>,
    backend: &Backend,
    sink: &mut S,
) -> Result<Outcome, ExecError> {
    match plan.mode {
        Mode::Point => {
            let Some((key, object)) = plan.point() else {
                return Err(invalid_mode());
            };
            let template = accepting(object.template.as_ref(), env);
            sink.open(Form::Object {
                key,
                json_outputs: &object.table.json_outputs,
                names: template.map(|t| &t.names),
            });
            let stmt = match template.map(|t| written(t, env)) {
                Some(stmt) => stmt,
                None => {
                    let Some(mut select) = object.table.select(env.values, &mut |_| None)? else {
                        return Ok(Outcome { statements: 0 });
                    };
                    select.limit = Some(1);
                    render(env.dialect, &select)
                }
            };
            fetch_into(backend, &stmt, sink, env.options).await?;
            Ok(Outcome { statements: 1 })
        }
        Mode::List => {
            let Some((key, list)) = plan.list() else {
                return Err(invalid_mode());
            };
            let wrap = (!list.unwrapped).then_some(list.main_key.as_str());
            sink.open(Form::List {
                key,
                wrap,
                json_outputs: &list.json_outputs,
            });
            let stmt = match accepting(list.template.as_ref(), env).map(|t| written(t, env)) {
                Some(stmt) => stmt,
                None => {
                    let Some(mut select) = list.select(env.values, &mut |_| None)? else {
                        return Ok(Outcome { statements: 0 });
                    };
                    select.limit = Some(list.paging.count);
                    select.offset = list.paging.page * list.paging.count;
                    render(env.dialect, &select)
                }
            };
            fetch_into(backend, &stmt, sink, env.options).await?;
            Ok(Outcome { statements: 1 })
        }
        Mode::Nested => {
            let Some((key, list)) = plan.list() else {
                return Err(invalid_mode());
            };
            sink.open(Form::Items { key });
            // Boxed, as the general read below: the future of a point lookup stays small.
            let statements =
                Box::pin(stream::read_nested(plan, list, key, env, backend, sink)).await?;
            Ok(Outcome { statements })
        }
        Mode::General => {
            sink.open(Form::Members {
                format: plan.format,
                counts: plan.counts(),
            });
            let mut reader = Reader::new(plan, env, backend);
            let mut out = Map::new();
            reader.container(&plan.root, "", &mut out, true).await?;
            // Custom root `@` keys come back after the objects, as the reference answers them.
            out.extend(plan.customs.clone());
            sink.members(out);
            Ok(Outcome {
                statements: reader.statements.into_inner(),
            })
        }
    }
}

/// `template`, when it takes the request's values.
fn accepting<'t>(template: Option<&'t Template>, env: &ReadEnv<'_>) -> Option<&'t Template> {
    template.filter(|t| t.accepts(env.values))
}

/// The statement of `template` (which [`accepting`] the request's values): its text is
/// written the first time and kept with the plan.
fn written(template: &Template, env: &ReadEnv<'_>) -> Statement {
    let text = template
        .text
        .get_or_init(|| render_template(env.dialect, &template.select));
    Statement {
        sql: text.sql.clone(),
        binds: Template::binds(text, env.values),
        bounded: template.bounded,
    }
}

fn invalid_mode() -> ExecError {
    ExecError::Invalid("the read's plan does not fit its mode".into())
}

/// Runs the one statement of a point or list read into the sink, within the answer's budget.
async fn fetch_into<'p, S: AnswerSink<'p>>(
    backend: &Backend,
    stmt: &Statement,
    sink: &mut S,
    options: &PlanOptions,
) -> Result<(), ExecError> {
    match backend.fetch(stmt, sink).await {
        Err(ExecError::ClientGone) if sink.over_budget() => Err(over_budget(options)),
        other => other.map(|_| ()),
    }
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
    /// Whether this object answers its `@explain`.
    explain: bool,
}

/// The state of one read in request order.
struct Reader<'a> {
    plan: &'a ReadPlan,
    env: &'a ReadEnv<'a>,
    backend: &'a Backend,
    results: HashMap<String, Json>,
    scopes: Vec<(String, usize)>,
    /// Statements run so far for this request (the benchmark's proof of one per level).
    statements: std::sync::atomic::AtomicUsize,
    /// Rows and approximate bytes this answer holds so far, against `max_rows` and
    /// `max_answer_bytes`.
    held_rows: std::sync::atomic::AtomicUsize,
    held_bytes: std::sync::atomic::AtomicUsize,
    /// Table keys whose `@explain` is not answered: vice tables of SQL joins, which the
    /// reference fills from the joined row without a statement of their own.
    quiet_explain: Vec<String>,
    /// For a streamed answer, the budget bytes past which its items may be sent before it is
    /// complete (see `stream`); `None` holds everything until the end.
    send_after: Option<usize>,
}

impl<'a> Reader<'a> {
    fn new(plan: &'a ReadPlan, env: &'a ReadEnv<'a>, backend: &'a Backend) -> Reader<'a> {
        Reader {
            plan,
            env,
            backend,
            results: HashMap::new(),
            scopes: Vec::new(),
            quiet_explain: Vec::new(),
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

    /// Resolves a reference path against results produced so far: from the container it is
    /// in, with the indices of the items being built for the arrays it names without one.
    fn resolve(&self, path: &RefPath, container: &str) -> Option<Json> {
        let mut full = match path.is_relative() {
            true => join(container, path.path()),
            false => path.path().to_string(),
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

    /// The statement of `object` with this request's values, its references resolved from
    /// the container at `container`, and its `k-()` functions run.
    fn bind(&self, object: &ObjectPlan, container: &str) -> Result<Option<Select>, ExecError> {
        let pre = functions::pre_functions(&object.table, self.env.visitor)?;
        let mut resolve = |v: ValueSource<'_>| match v {
            ValueSource::Path(p) => self.resolve(p, container),
            ValueSource::Function(call) => {
                pre.iter().find(|(c, _)| std::ptr::eq(*c, call))?.1.clone()
            }
            ValueSource::Parent(_) => None,
        };
        Ok(object.table.select(self.env.values, &mut resolve)?)
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
        match self.backend.fetch(stmt, &mut sink).await {
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
}
