//! POST, PUT and DELETE: every object of a request in one transaction (protocol §10).
//!
//! The request has passed the `Request` structure already. Each object becomes one statement
//! (a batch of inserts becomes one multi-row INSERT per chunk); the transaction commits only if
//! every object succeeded, and a write that changes no row (not the visitor's, or gone) is 401
//! and rolls everything back, as the reference does.

use crate::backend::{Backend, Tx};
use crate::ids::IdGenerator;
use crate::sink::CollectSink;
use crate::ExecError;
use apijet_core::{Method, Visitor};
use apijet_plan::schema::SchemaCache;
use apijet_plan::verify::ExistenceCheck;
use apijet_plan::write;
use apijet_plan::{Ctx, PlanError, PlanOptions};
use apijet_request::{Node, Request, TableEntry, TableKey, TableObject};
use apijet_sql::{render, Dialect, Statement};
use serde_json::{json, Map, Value as Json};

mod calls;
mod change;
mod insert;

use calls::values_of;
use change::{delete, put, put_batch};
use insert::post;
pub use insert::{single_insert, single_insert_answer};

/// Everything a write needs.
pub struct WriteEnv<'a> {
    /// The database.
    pub backend: &'a Backend,
    /// Its dialect.
    pub dialect: &'a dyn Dialect,
    /// The schema cache.
    pub schema: &'a SchemaCache,
    /// Limits and debug mode.
    pub options: &'a PlanOptions,
    /// POST, PUT or DELETE.
    pub method: Method,
    /// The visitor (writes always have one).
    pub visitor: Option<&'a Visitor>,
    /// Ids for new rows.
    pub ids: &'a IdGenerator,
    /// Rows per INSERT statement at most (engines bound the parameters of one statement).
    pub max_insert_rows: usize,
    /// The server itself runs the request (`/register`): see [`Ctx::trusted`].
    pub trusted: bool,
    /// The tables this write's statements change, noted as they are planned.
    pub written: Written,
    /// Told which tables changed once [`write`] has committed (live answers).
    pub watch: Option<&'a dyn WriteWatch>,
}

/// Whoever wants to know which tables committed writes changed.
pub trait WriteWatch: Send + Sync {
    /// A transaction that wrote `tables` (their SQL names) has committed.
    fn committed(&self, tables: &[String]);
}

/// The SQL names of the tables a write's statements change, in the order first written.
#[derive(Debug, Default)]
pub struct Written(std::sync::Mutex<Vec<String>>);

impl Written {
    /// Notes a table a planned statement changes.
    pub(crate) fn note(&self, table: &apijet_plan::query::Ident) {
        if let Ok(mut t) = self.0.lock() {
            if !t.iter().any(|n| n == table.as_str()) {
                t.push(table.as_str().to_string());
            }
        }
    }

    /// The tables noted so far, leaving none.
    pub fn take(&self) -> Vec<String> {
        self.0
            .lock()
            .map(|mut t| std::mem::take(&mut *t))
            .unwrap_or_default()
    }
}

/// Runs a verified write request in one transaction; answers its objects in request order.
pub async fn write(
    req: &Request,
    checks: &[ExistenceCheck],
    env: &WriteEnv<'_>,
) -> Result<Map<String, Json>, ExecError> {
    let mut tx = env.backend.begin().await?;
    let result = write_in(&mut tx, req, checks, env).await;
    match result {
        Ok(out) => {
            tx.commit().await?;
            if let Some(watch) = env.watch {
                watch.committed(&env.written.take());
            }
            Ok(out)
        }
        Err(e) => {
            let _ = tx.rollback().await;
            Err(e)
        }
    }
}

fn ctx<'a>(env: &'a WriteEnv<'a>, req: &'a Request) -> Ctx<'a> {
    Ctx {
        schema: env.schema,
        options: env.options,
        method: env.method,
        visitor: env.visitor,
        global_role: req.global("role"),
        global_explain: false,
        subqueries: None,
        trusted: env.trusted,
    }
}

async fn count(tx: &mut Tx<'_>, stmt: &Statement) -> Result<u64, ExecError> {
    let mut sink = CollectSink::new(&[]);
    tx.fetch(stmt, &mut sink).await?;
    Ok(sink
        .rows
        .first()
        .and_then(|r| r.get("count"))
        .and_then(|v| v.as_u64().or_else(|| v.as_str()?.parse().ok()))
        .unwrap_or(0))
}

/// Runs a verified write request inside a transaction the caller owns: `/crud` runs several
/// requests, each with its own method, in one transaction.
pub async fn write_in(
    tx: &mut Tx<'_>,
    req: &Request,
    checks: &[ExistenceCheck],
    env: &WriteEnv<'_>,
) -> Result<Map<String, Json>, ExecError> {
    for check in checks {
        let table = env
            .schema
            .table(&check.table)
            .ok_or_else(|| PlanError::AccessDenied {
                table: check.table.clone(),
                role: apijet_core::Role::Unknown,
                method: env.method,
            })?;
        let select = write::existence_count(table, &check.values, check.exclude_id.as_ref())?;
        let n = count(tx, &render(env.dialect, &select)).await?;
        let described = check
            .values
            .iter()
            .map(|(k, v)| format!("{k}:{v}"))
            .collect::<Vec<_>>()
            .join(", ");
        if check.must_exist && n == 0 {
            return Err(PlanError::Conflict(format!(
                "{}: no row with {described} exists",
                check.table
            ))
            .into());
        }
        if !check.must_exist && n > 0 {
            return Err(PlanError::Conflict(format!(
                "{}: a row with {described} exists already",
                check.table
            ))
            .into());
        }
    }
    let explain = req
        .global("explain")
        .and_then(Json::as_bool)
        .unwrap_or(false);
    if explain && !env.options.debug {
        return Err(PlanError::Forbidden("@explain is only available in debug mode".into()).into());
    }
    let mut out = Map::new();
    // What earlier objects wrote, for references like "id@": "Privacy/id".
    let mut written: Map<String, Json> = Map::new();
    for m in &req.root.members {
        match &m.node {
            Node::Table(t) => {
                // An object's own `@explain` answers its statement, as the root's does.
                let explain = explain
                    || t.entries.iter().any(|e| {
                        matches!(e, TableEntry::Keyword { name, value: Json::Bool(true) } if name == "explain")
                    });
                if explain && !env.options.debug {
                    return Err(PlanError::Forbidden(
                        "@explain is only available in debug mode".into(),
                    )
                    .into());
                }
                let answer = match env.method {
                    Method::Post => {
                        post(
                            tx,
                            req,
                            env,
                            std::slice::from_ref(t),
                            false,
                            explain,
                            &written,
                        )
                        .await?
                    }
                    Method::Put => put(tx, req, env, t, explain).await?,
                    Method::Delete => delete(tx, req, env, t, explain).await?,
                    other => {
                        return Err(ExecError::Forbidden(format!(
                            "{other} cannot write {}",
                            m.key
                        )))
                    }
                };
                let mut record = values_of(t);
                if let Some(id) = answer.get("id") {
                    record.insert("id".into(), id.clone());
                }
                written.insert(m.key.clone(), Json::Object(record));
                out.insert(m.key.clone(), Json::Object(answer));
            }
            Node::Value(Json::Array(items)) if m.key.ends_with("[]") => {
                let key = batch_table(&m.key)?;
                let objects = items
                    .iter()
                    .map(|item| match item {
                        Json::Object(map) => TableObject::from_map(key.clone(), map.clone())
                            .map_err(|e| ExecError::Invalid(e.to_string())),
                        _ => Err(ExecError::Invalid(format!(
                            "{}: every item must be an object",
                            m.key
                        ))),
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                let answer = match env.method {
                    Method::Post => post(tx, req, env, &objects, true, explain, &written).await?,
                    Method::Put => put_batch(tx, req, env, &objects).await?,
                    other => {
                        return Err(ExecError::Forbidden(format!(
                            "{other} cannot take a list {}",
                            m.key
                        )))
                    }
                };
                out.insert(key.text(), Json::Object(answer));
            }
            Node::Array(_) => {
                return Err(ExecError::Forbidden(format!(
                    "{}:{{}} arrays are only supported by GET and GETS",
                    m.key
                )))
            }
            Node::Value(v) => {
                out.insert(m.key.clone(), v.clone());
            }
            Node::Reference(_) | Node::Subquery(_) | Node::Function(_) => {
                return Err(ExecError::Forbidden(format!(
                    "{} is not allowed in a write",
                    m.key
                )))
            }
        }
    }
    Ok(out)
}

fn batch_table(key: &str) -> Result<TableKey, ExecError> {
    let name = key.trim_end_matches("[]");
    TableKey::parse(name)
        .ok_or_else(|| ExecError::Invalid(format!("{key}: a batch must be named Table[]")))
}

fn success(count: u64) -> Map<String, Json> {
    let mut m = Map::new();
    m.insert("ok".into(), Json::Bool(true));
    m.insert("code".into(), json!(200));
    m.insert("msg".into(), json!("success"));
    m.insert("count".into(), json!(count));
    m
}
