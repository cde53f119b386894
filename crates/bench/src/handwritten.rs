//! The hand-written endpoint: the ceiling every point-lookup ratio is stated against.
//!
//! What a competent engineer writes by hand for one APIJSON point lookup, on apijet's own HTTP
//! stack (axum on a multi-threaded tokio runtime, `TCP_NODELAY`) and drivers (tokio-postgres
//! through a deadpool pool, a mysql_async pool, rusqlite): `POST /get` with
//! `{"<Key>":{"<column>":<value>}}`, one prepared `SELECT * FROM <table> WHERE <column> = ?
//! LIMIT 1`, and the same JSON answer apijet gives (`{"<Key>":{…},"ok":true,"code":200,
//! "msg":"success","time":…}`, NULL columns left out). The table and column are fixed at
//! start-up: no parsing of a request language, no access rules, no planning.
//!
//! It runs as its own process (`apijet bench --serve-handwritten KEY=TABLE.COLUMN
//! --handwritten-db URL --handwritten-listen ADDR`, hidden options), started and loaded exactly
//! like an apijet server. SQLite reads run on the worker thread with one connection per thread,
//! since a point lookup is a few microseconds and needs no hand-off.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::serve::ListenerExt;
use axum::Router;
use std::cell::RefCell;
use std::sync::Arc;

/// The one lookup the endpoint answers: `{"<key>":{"<column>":value}}` on `table`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lookup {
    /// The API name in requests and answers, e.g. `PurchSkuMaster`.
    pub key: String,
    pub table: String,
    pub column: String,
}

impl Lookup {
    /// Parses `KEY=TABLE.COLUMN`.
    pub fn parse(spec: &str) -> Result<Lookup, String> {
        let bad = || format!("bad lookup '{spec}': want KEY=TABLE.COLUMN");
        let (key, rest) = spec.split_once('=').ok_or_else(bad)?;
        let (table, column) = rest.split_once('.').ok_or_else(bad)?;
        let ok =
            |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !(ok(key) && ok(table) && ok(column)) {
            return Err(bad());
        }
        Ok(Lookup {
            key: key.into(),
            table: table.into(),
            column: column.into(),
        })
    }

    /// The `KEY=TABLE.COLUMN` spelling.
    pub fn spec(&self) -> String {
        format!("{}={}.{}", self.key, self.table, self.column)
    }
}

enum Db {
    Pg(deadpool_postgres::Pool),
    My(mysql_async::Pool),
    /// The file; each worker thread opens its own connection on first use.
    Lite(String),
}

struct App {
    db: Db,
    lookup: Lookup,
    sql: String,
    /// `{"<Key>":` — the answer's opening, built once.
    head: Vec<u8>,
}

/// Runs the endpoint until the process is stopped.
pub async fn serve(url: &str, listen: &str, lookup: Lookup) -> Result<(), String> {
    // As apijet's default pool size.
    let pool_size = 2 * std::thread::available_parallelism().map_or(2, |n| n.get()) + 2;
    let (db, sql) = if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        let cfg: tokio_postgres::Config = url.parse().map_err(|e| format!("{url}: {e}"))?;
        let mgr = deadpool_postgres::Manager::from_config(
            cfg,
            tokio_postgres::NoTls,
            deadpool_postgres::ManagerConfig {
                recycling_method: deadpool_postgres::RecyclingMethod::Fast,
            },
        );
        let pool = deadpool_postgres::Pool::builder(mgr)
            .max_size(pool_size)
            .build()
            .map_err(|e| e.to_string())?;
        let sql = format!(
            "SELECT * FROM \"{}\" WHERE \"{}\" = $1 LIMIT 1",
            lookup.table, lookup.column
        );
        (Db::Pg(pool), sql)
    } else if url.starts_with("mysql://") || url.starts_with("mariadb://") {
        let url = url.replacen("mariadb://", "mysql://", 1);
        let opts = mysql_async::Opts::from_url(&url).map_err(|e| format!("{url}: {e}"))?;
        let constraints =
            mysql_async::PoolConstraints::new(pool_size, pool_size).ok_or("invalid pool size")?;
        let opts = mysql_async::OptsBuilder::from_opts(opts)
            .pool_opts(
                mysql_async::PoolOpts::default()
                    .with_constraints(constraints)
                    .with_reset_connection(false),
            )
            .stmt_cache_size(256);
        let sql = format!(
            "SELECT * FROM `{}` WHERE `{}` = ? LIMIT 1",
            lookup.table, lookup.column
        );
        (Db::My(mysql_async::Pool::new(opts)), sql)
    } else if let Some(path) = url.strip_prefix("sqlite://") {
        let sql = format!(
            "SELECT * FROM \"{}\" WHERE \"{}\" = ?1 LIMIT 1",
            lookup.table, lookup.column
        );
        (Db::Lite(path.to_string()), sql)
    } else {
        return Err(format!("unsupported database URL {url}"));
    };
    let head = {
        let mut h = b"{".to_vec();
        push_str(&mut h, &lookup.key);
        h.push(b':');
        h
    };
    let app = Arc::new(App {
        db,
        lookup,
        sql,
        head,
    });
    // Fail at start-up when the database or the table is not there.
    let probe = answer(&app, serde_json::Value::Null).await;
    if let Err(e) = probe {
        return Err(format!("the hand-written endpoint cannot query: {e}"));
    }
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|e| format!("cannot listen on {listen}: {e}"))?;
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    let router = Router::new().route("/get", post(get)).with_state(app);
    axum::serve(listener, router)
        .await
        .map_err(|e| e.to_string())
}

async fn get(State(app): State<Arc<App>>, body: Bytes) -> Response {
    let value = serde_json::from_slice::<serde_json::Value>(&body)
        .ok()
        .and_then(|mut v| {
            v.get_mut(&app.lookup.key)?
                .get_mut(&app.lookup.column)
                .map(serde_json::Value::take)
        });
    let (status_code, body) = match value {
        None => (400, envelope(b"{", 400, "bad request")),
        Some(v) => match answer(&app, v).await {
            Ok(body) => (200, body),
            Err(e) => (500, envelope(b"{", 500, &e)),
        },
    };
    let mut r = (
        [(header::CONTENT_TYPE, "application/json; charset=utf-8")],
        body,
    )
        .into_response();
    if status_code != 200 {
        // APIJSON answers errors with HTTP 200 and the code in the body.
        r.headers_mut().insert(
            "x-handwritten-error",
            header::HeaderValue::from(status_code),
        );
    }
    r
}

/// The whole answer for one key value (`Null`: the start-up probe, which must not fail).
async fn answer(app: &App, key: serde_json::Value) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(512);
    out.extend_from_slice(&app.head);
    let found = match &app.db {
        Db::Pg(pool) => pg_row(app, pool, &key, &mut out).await?,
        Db::My(pool) => my_row(app, pool, &key, &mut out).await?,
        Db::Lite(path) => lite_row(app, path, &key, &mut out)?,
    };
    if !found {
        out.truncate(1);
    }
    Ok(envelope(&out, 200, "success"))
}

/// `prefix` (an open object with members, or just `{`) closed with the envelope members.
fn envelope(prefix: &[u8], code: i64, msg: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(prefix.len() + 80);
    out.extend_from_slice(prefix);
    if out.len() > 1 {
        out.push(b',');
    }
    out.extend_from_slice(if code == 200 {
        b"\"ok\":true,\"code\":"
    } else {
        b"\"ok\":false,\"code\":"
    });
    out.extend_from_slice(itoa::Buffer::new().format(code).as_bytes());
    out.extend_from_slice(b",\"msg\":");
    push_str(&mut out, msg);
    out.extend_from_slice(b",\"time\":");
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    out.extend_from_slice(itoa::Buffer::new().format(ms).as_bytes());
    out.push(b'}');
    out
}

fn push_str(out: &mut Vec<u8>, s: &str) {
    let _ = serde_json::to_writer(&mut *out, s);
}

/// One member `"name":` of the row object.
fn push_name(out: &mut Vec<u8>, first: &mut bool, name: &str) {
    out.push(if *first { b'{' } else { b',' });
    *first = false;
    push_str(out, name);
    out.push(b':');
}

/// Integers beyond 2^53 − 1 are strings in apijet's answers (JavaScript clients).
fn push_int(out: &mut Vec<u8>, i: i64) {
    const MAX_SAFE: i64 = 9_007_199_254_740_991;
    let mut b = itoa::Buffer::new();
    if i.unsigned_abs() <= MAX_SAFE as u64 {
        out.extend_from_slice(b.format(i).as_bytes());
    } else {
        push_str(out, b.format(i));
    }
}

fn push_float(out: &mut Vec<u8>, f: f64) {
    if f.is_finite() {
        let _ = serde_json::to_writer(&mut *out, &f);
    } else {
        out.extend_from_slice(b"null");
    }
}

fn close_row(out: &mut Vec<u8>, first: bool) {
    out.extend_from_slice(if first { b"{}" } else { b"}" });
}

async fn pg_row(
    app: &App,
    pool: &deadpool_postgres::Pool,
    key: &serde_json::Value,
    out: &mut Vec<u8>,
) -> Result<bool, String> {
    use tokio_postgres::types::Type;
    let client = pool.get().await.map_err(|e| e.to_string())?;
    let stmt = client
        .prepare_cached(&app.sql)
        .await
        .map_err(|e| e.to_string())?;
    let ty = stmt.params()[0].clone();
    let row = match (key, &ty) {
        (serde_json::Value::Null, _) => return Ok(false),
        (serde_json::Value::Number(n), &Type::INT8) => {
            let k = n.as_i64().ok_or("not an integer")?;
            client.query_opt(&stmt, &[&k]).await
        }
        (serde_json::Value::Number(n), &Type::INT4) => {
            let k = n.as_i64().and_then(|k| i32::try_from(k).ok());
            client.query_opt(&stmt, &[&k.ok_or("not an int4")?]).await
        }
        (serde_json::Value::String(s), _) => client.query_opt(&stmt, &[&s.as_str()]).await,
        _ => return Err(format!("unsupported key {key} for a {ty} column")),
    }
    .map_err(|e| e.to_string())?;
    let Some(row) = row else { return Ok(false) };
    let mut first = true;
    for (i, col) in row.columns().iter().enumerate() {
        macro_rules! get {
            ($t:ty) => {
                row.try_get::<_, Option<$t>>(i).map_err(|e| e.to_string())?
            };
        }
        match *col.type_() {
            Type::INT2 | Type::INT4 | Type::INT8 => {
                let v = match *col.type_() {
                    Type::INT2 => get!(i16).map(i64::from),
                    Type::INT4 => get!(i32).map(i64::from),
                    _ => get!(i64),
                };
                if let Some(v) = v {
                    push_name(out, &mut first, col.name());
                    push_int(out, v);
                }
            }
            Type::FLOAT4 | Type::FLOAT8 => {
                let v = match *col.type_() {
                    Type::FLOAT4 => get!(f32).map(f64::from),
                    _ => get!(f64),
                };
                if let Some(v) = v {
                    push_name(out, &mut first, col.name());
                    push_float(out, v);
                }
            }
            Type::BOOL => {
                if let Some(v) = get!(bool) {
                    push_name(out, &mut first, col.name());
                    out.extend_from_slice(if v { b"true" } else { b"false" });
                }
            }
            Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME => {
                if let Some(v) = get!(&str) {
                    push_name(out, &mut first, col.name());
                    push_str(out, v);
                }
            }
            ref other => return Err(format!("column {} of type {other}", col.name())),
        }
    }
    close_row(out, first);
    Ok(true)
}

async fn my_row(
    app: &App,
    pool: &mysql_async::Pool,
    key: &serde_json::Value,
    out: &mut Vec<u8>,
) -> Result<bool, String> {
    use mysql_async::consts::ColumnType as T;
    use mysql_async::prelude::Queryable;
    use mysql_async::Value;
    let param = match key {
        serde_json::Value::Null => Value::NULL,
        serde_json::Value::Number(n) => Value::Int(n.as_i64().ok_or("not an integer")?),
        serde_json::Value::String(s) => Value::Bytes(s.as_bytes().to_vec()),
        other => return Err(format!("unsupported key {other}")),
    };
    let mut conn = pool.get_conn().await.map_err(|e| e.to_string())?;
    let row: Option<mysql_async::Row> = conn
        .exec_first(app.sql.as_str(), vec![param])
        .await
        .map_err(|e| e.to_string())?;
    let Some(row) = row else { return Ok(false) };
    let mut first = true;
    let columns = row.columns_ref();
    for (i, col) in columns.iter().enumerate() {
        let name = col.name_str();
        match (row.as_ref(i), col.column_type()) {
            (None | Some(Value::NULL), _) => {}
            (Some(Value::Int(v)), _) => {
                push_name(out, &mut first, &name);
                push_int(out, *v);
            }
            (Some(Value::UInt(v)), _) => {
                push_name(out, &mut first, &name);
                push_int(out, i64::try_from(*v).map_err(|e| e.to_string())?);
            }
            (Some(Value::Float(v)), _) => {
                push_name(out, &mut first, &name);
                push_float(out, f64::from(*v));
            }
            (Some(Value::Double(v)), _) => {
                push_name(out, &mut first, &name);
                push_float(out, *v);
            }
            (
                Some(Value::Bytes(b)),
                T::MYSQL_TYPE_VARCHAR
                | T::MYSQL_TYPE_VAR_STRING
                | T::MYSQL_TYPE_STRING
                | T::MYSQL_TYPE_BLOB,
            ) => {
                push_name(out, &mut first, &name);
                push_str(out, std::str::from_utf8(b).map_err(|e| e.to_string())?);
            }
            (Some(_), other) => {
                return Err(format!("column {name} of type {other:?}"));
            }
        }
    }
    close_row(out, first);
    Ok(true)
}

thread_local! {
    static LITE: RefCell<Option<rusqlite::Connection>> = const { RefCell::new(None) };
}

fn lite_row(
    app: &App,
    path: &str,
    key: &serde_json::Value,
    out: &mut Vec<u8>,
) -> Result<bool, String> {
    use rusqlite::types::{Value, ValueRef};
    let param = match key {
        serde_json::Value::Null => Value::Null,
        serde_json::Value::Number(n) => Value::Integer(n.as_i64().ok_or("not an integer")?),
        serde_json::Value::String(s) => Value::Text(s.clone()),
        other => return Err(format!("unsupported key {other}")),
    };
    LITE.with_borrow_mut(|slot| {
        if slot.is_none() {
            let c = rusqlite::Connection::open_with_flags(
                path,
                rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE
                    | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
            )
            .map_err(|e| format!("{path}: {e}"))?;
            *slot = Some(c);
        }
        let conn = slot.as_ref().ok_or("no connection")?;
        let mut stmt = conn.prepare_cached(&app.sql).map_err(|e| e.to_string())?;
        let mut rows = stmt.query([param]).map_err(|e| e.to_string())?;
        let Some(row) = rows.next().map_err(|e| e.to_string())? else {
            return Ok(false);
        };
        let stmt = row.as_ref();
        let mut first = true;
        for i in 0..stmt.column_count() {
            let name = stmt.column_name(i).map_err(|e| e.to_string())?;
            match row.get_ref(i).map_err(|e| e.to_string())? {
                ValueRef::Null => {}
                ValueRef::Integer(v) => {
                    push_name(out, &mut first, name);
                    push_int(out, v);
                }
                ValueRef::Real(v) => {
                    push_name(out, &mut first, name);
                    push_float(out, v);
                }
                ValueRef::Text(t) => {
                    push_name(out, &mut first, name);
                    push_str(out, std::str::from_utf8(t).map_err(|e| e.to_string())?);
                }
                ValueRef::Blob(_) => return Err(format!("column {name} is a blob")),
            }
        }
        close_row(out, first);
        Ok(true)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_specs() {
        let l = Lookup::parse("PurchSkuMaster=purch_sku_master.sku_id").expect("valid");
        assert_eq!(l.table, "purch_sku_master");
        assert_eq!(l.spec(), "PurchSkuMaster=purch_sku_master.sku_id");
        assert!(Lookup::parse("User=user").is_err());
        assert!(Lookup::parse("User=us\"er.id").is_err());
    }

    #[test]
    fn envelopes_match_apijet() {
        let body = envelope(b"{\"User\":{\"id\":1}", 200, "success");
        let v: serde_json::Value = serde_json::from_slice(&body).expect("json");
        assert_eq!(v["User"]["id"], 1);
        assert_eq!(v["ok"], true);
        assert_eq!(v["code"], 200);
        assert!(v["time"].is_u64());
        let bad: serde_json::Value =
            serde_json::from_slice(&envelope(b"{", 400, "bad request")).expect("json");
        assert_eq!(bad["code"], 400);
    }
}
