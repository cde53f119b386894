//! Conformance: replays the cases recorded from the Java reference server
//! (`../shared/apijson/cases-public.json`, `reference_observed`) against `apijet serve` on each
//! engine, on the demo database loaded by `../shared/apijson/load-demo-db`.
//!
//! Read stage: every case whose URL path is `/get`, `/head`, `/gets`, `/heads` (or one of them
//! followed by `/{tag}`) and the unknown-method case `/patch`, except the write chains (`REF-W*`),
//! on database `apijet_conf`.
//! Write stage (`conformance/writes.rs`): the write chains `REF-W*` in file order, on a second
//! copy of the demo database (`apijet_conf_w`) served by a second server, with the generated ids
//! of the recording mapped to ours.
//! Cases with a `login` run after `POST /login` as that user (cookies and a bearer `token` kept;
//! one client per login, which drops its token after `/logout`).
//!
//! Comparison (after dropping the keys `time`, `debug:*`, `sql:*`, `trace:*`, `depth:*`, `time:*`
//! at every level): when the expected `code` is not 200 only the top-level `code` and `ok` count;
//! otherwise the whole answer, numbers by value, timestamps with a trailing `.0` ignored,
//! `@explain` by presence only, and object key order checked after the content.
//!
//! Per engine and stage the report ends with `conformance [ENGINE]` (reads) or
//! `conformance writes [ENGINE]` (writes) and `conformance: N passed, M failed` (and, for reads,
//! `conformance order-dependent: K` on PostgreSQL when some answers may differ only because
//! the request leaves row order to the engine: an array without `@order`, and an answer of the
//! same shape; those count neither as passed nor as failed). The test fails when a case fails that is not listed in
//! `tests/conformance/known-failures.txt`; listed cases that pass are printed as `NOW PASSING`.

mod support;
#[path = "conformance/writes.rs"]
mod writes;

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::thread;

use serde_json::{Map, Value};
use support::{truncate, Client, Engine, Server};

/// The database the demo data is loaded into, on both engines, for the read stage.
const DATABASE: &str = "apijet_conf";
/// The second copy of the demo data, on both engines, that the write stage changes.
const WRITE_DATABASE: &str = "apijet_conf_w";
/// The reference ran in DEBUG mode (allows `@explain` and reading system tables like Access).
/// The reference's settings: DEBUG mode, count ≤ 100, batches ≤ 10 (apijet's own default is
/// 1,000 rows per batch).
const SERVER_CONFIG: &str = "debug = true\nmax_count = 100\nmax_batch = 10\n";
/// How much of an expected or received answer a failure line shows.
const SHOW_CHARS: usize = 300;
/// After this many requests that failed without an answer (timeouts), the rest are not sent.
const MAX_TRANSPORT_ERRORS: usize = 3;

#[test]
fn conformance_postgres() {
    run(Engine::Postgres);
}

#[test]
fn conformance_mysql() {
    run(Engine::Mysql);
}

fn cases_path() -> PathBuf {
    support::shared_dir()
        .join("apijson")
        .join("cases-public.json")
}

fn known_failures_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("conformance")
        .join("known-failures.txt")
}

fn run(engine: Engine) {
    let cases_path = cases_path();
    if !cases_path.exists() {
        support::skip("conformance stage: ../shared/apijson/cases-public.json not found");
        return;
    }
    let Some(url) = engine.url() else {
        support::skip(&format!(
            "conformance stage for {}: {} not set",
            engine.name(),
            engine.url_env()
        ));
        return;
    };
    if Engine::Mysql.client_args().is_none() {
        support::skip(&format!(
            "conformance stage for {}: the demo database is loaded from MariaDB, and {} is not set",
            engine.name(),
            Engine::Mysql.url_env()
        ));
        return;
    }
    // The write stage's copy loads while the read stage runs.
    let write_db_loaded = thread::spawn(|| demo_db(WRITE_DATABASE));
    if let Err(why) = demo_db(DATABASE) {
        panic!(
            "conformance [{}]: cannot load the demo database: {why}",
            engine.name()
        );
    }

    let (writes, reads): (Vec<Case>, Vec<Case>) = read_cases(&cases_path)
        .into_iter()
        .filter(|c| is_replayed(c) || writes::is_write_chain(c))
        .partition(writes::is_write_chain);
    let known = KnownFailures::read(&known_failures_path());
    let unknown = known.unknown_ids(engine, reads.iter().chain(&writes));
    let mut text = String::new();
    let mut regressions = Vec::new();
    let mut server_exits = Vec::new();

    {
        let mut server = Server::start(&support::with_database(&url, DATABASE), SERVER_CONFIG);
        let mut runner = Runner::new(engine, &server.base);
        let outcomes: Vec<Outcome> = reads.iter().map(|case| runner.run(case)).collect();
        let report = Report::build(engine, "conformance", &reads, &outcomes, &known, &unknown);
        text.push_str(&report.text);
        regressions.extend(report.regressions);
        if let Some(status) = server.exit_status() {
            server_exits.push(format!(
                "apijet server exited during the read stage ({status}):\n{}",
                server.output_tail(4000)
            ));
        }
    }

    match write_db_loaded.join() {
        Ok(Ok(())) => {}
        Ok(Err(why)) => panic!(
            "conformance writes [{}]: cannot load the demo database {WRITE_DATABASE}: {why}\n{text}",
            engine.name()
        ),
        Err(_) => panic!("conformance writes: the loader thread panicked"),
    }
    {
        let mut server =
            Server::start(&support::with_database(&url, WRITE_DATABASE), SERVER_CONFIG);
        let mut runner = Runner::new(engine, &server.base);
        let outcomes = writes::run_chains(&mut runner, &writes);
        let report = Report::build(
            engine,
            "conformance writes",
            &writes,
            &outcomes,
            &known,
            &[],
        );
        text.push_str(&report.text);
        regressions.extend(report.regressions);
        if let Some(status) = server.exit_status() {
            server_exits.push(format!(
                "apijet server exited during the write stage ({status}):\n{}",
                server.output_tail(4000)
            ));
        }
    }

    for exit in &server_exits {
        let _ = writeln!(text, "{exit}");
    }
    print!("{text}");

    if !server_exits.is_empty() {
        panic!(
            "conformance [{}]: the apijet server exited during the run",
            engine.name()
        );
    }
    if !regressions.is_empty() {
        panic!(
            "conformance [{}]: {} case(s) failed that are not listed in tests/conformance/known-failures.txt: {}",
            engine.name(),
            regressions.len(),
            regressions.join(", ")
        );
    }
}

/// Loads the demo database `database` once per test process: into MariaDB (the loader's source,
/// whose client arguments the caller checked) and, when PostgreSQL is configured too, into
/// PostgreSQL.
fn demo_db(database: &'static str) -> Result<(), String> {
    static LOADED: OnceLock<Result<(), String>> = OnceLock::new();
    static LOADED_W: OnceLock<Result<(), String>> = OnceLock::new();
    let once = if database == WRITE_DATABASE {
        &LOADED_W
    } else {
        &LOADED
    };
    once.get_or_init(|| {
        let mysql_args = Engine::Mysql.client_args().unwrap_or_default();
        let psql_args = Engine::Postgres.client_args();
        support::load_demo_db(database, &mysql_args, psql_args.as_deref())
    })
    .clone()
}

/// One recorded request/answer pair.
struct Case {
    id: String,
    method: String,
    login: Option<String>,
    name: String,
    request: Value,
    response: Value,
}

/// Every recorded case, in file order.
fn read_cases(path: &Path) -> Vec<Case> {
    let text =
        fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let doc: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()));
    let list = doc
        .get("reference_observed")
        .and_then(Value::as_array)
        .unwrap_or_else(|| panic!("{} has no reference_observed list", path.display()));
    let text_of = |c: &Value, key: &str| -> String {
        match c.get(key) {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Null) | None => String::new(),
            Some(other) => other.to_string(),
        }
    };
    list.iter()
        .map(|c| Case {
            id: text_of(c, "id"),
            method: text_of(c, "method"),
            login: Some(text_of(c, "login")).filter(|l| !l.is_empty()),
            name: text_of(c, "name"),
            request: c.get("request").cloned().unwrap_or(Value::Null),
            response: c.get("response").cloned().unwrap_or(Value::Null),
        })
        .collect()
}

/// The read cases: `/get`, `/head`, `/gets`, `/heads` (optionally `/{tag}` after them) and the
/// unknown method `/patch`; never the write chains `REF-W*`.
fn is_replayed(case: &Case) -> bool {
    if case.id.starts_with("REF-W") {
        return false;
    }
    let m = case.method.as_str();
    m == "/patch"
        || ["/get", "/head", "/gets", "/heads"].iter().any(|p| {
            m.strip_prefix(p)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
        })
}

/// Phone and password of a recorded `login`: a full phone (`13000082001`) or a user id (`82001`).
fn credentials(login: &str) -> (String, &'static str) {
    let phone = if login.len() >= 11 {
        login.to_string()
    } else {
        format!("130000{login:0>5}")
    };
    let password = match &phone[phone.len().saturating_sub(5)..] {
        "38710" => "666666",
        "70793" | "93793" => "apijson",
        _ => "123456",
    };
    (phone, password)
}

enum Outcome {
    Pass,
    Fail(String),
    /// Differs on PostgreSQL where the request leaves row order to the engine.
    OrderDependent(String),
}

struct Runner {
    engine: Engine,
    base: String,
    /// Logged-in clients by recorded login (a failed login is kept as its error).
    sessions: HashMap<String, Result<Client, String>>,
    transport_errors: usize,
}

impl Runner {
    fn new(engine: Engine, base: &str) -> Runner {
        Runner {
            engine,
            base: base.to_string(),
            sessions: HashMap::new(),
            transport_errors: 0,
        }
    }

    /// Replays a read case.
    fn run(&mut self, case: &Case) -> Outcome {
        let got = match self.send(case, &case.request) {
            Ok(got) => got,
            Err(why) => return Outcome::Fail(why),
        };
        match compare(&case.response, &got) {
            None => Outcome::Pass,
            Some(why) => {
                let why = describe(&why, &case.response, &got);
                if self.engine == Engine::Postgres && may_depend_on_row_order(case, &got) {
                    Outcome::OrderDependent(why)
                } else {
                    Outcome::Fail(why)
                }
            }
        }
    }

    /// Sends `request` (the case's request, or a changed copy) to the case's URL path, as the
    /// case's login (the same client for every case of a login: it keeps the cookies answers set,
    /// and forgets its bearer token after `/logout`). The JSON answer of an HTTP 200, else why not.
    fn send(&mut self, case: &Case, request: &Value) -> Result<Value, String> {
        if self.transport_errors >= MAX_TRANSPORT_ERRORS {
            return Err(format!(
                "not sent: {MAX_TRANSPORT_ERRORS} requests got no answer before"
            ));
        }
        let mut anonymous;
        let client = match &case.login {
            None => {
                anonymous = Client::new(&self.base);
                &mut anonymous
            }
            Some(login) => match self.session(login) {
                Ok(client) => client,
                Err(why) => return Err(why.clone()),
            },
        };
        let sent = if uses_http_get(case) {
            client.get(&case.method)
        } else {
            let body = match request {
                Value::String(raw) => raw.clone(),
                other => other.to_string(),
            };
            client.post(&case.method, &body)
        };
        if case.method == "/logout" {
            // The server clears its cookie; a bearer client drops its token itself.
            *client = client.clone().without_bearer();
        }
        let reply = match sent {
            Ok(reply) => reply,
            Err(why) => {
                self.transport_errors += 1;
                return Err(format!("no answer: {why}"));
            }
        };
        if reply.status != 200 {
            return Err(format!(
                "HTTP status {}: {}",
                reply.status,
                truncate(&reply.text, SHOW_CHARS)
            ));
        }
        reply.json()
    }

    fn session(&mut self, login: &str) -> &mut Result<Client, String> {
        let base = &self.base;
        self.sessions.entry(login.to_string()).or_insert_with(|| {
            let (phone, password) = credentials(login);
            let mut client = Client::new(base);
            client
                .login(&phone, password)
                .map(|_| client)
                .map_err(|e| format!("login as {phone} failed: {e}"))
        })
    }
}

/// A failure line's text: the difference, then both answers (without the ignored keys), cut.
fn describe(why: &str, expected: &Value, got: &Value) -> String {
    format!(
        "{why} (expected {} / got {})",
        truncate(&strip_ignored(expected).to_string(), SHOW_CHARS),
        truncate(&strip_ignored(got).to_string(), SHOW_CHARS)
    )
}

/// `GET /get/{url-encoded JSON}` cases: no request body, or the JSON is in the URL.
fn uses_http_get(case: &Case) -> bool {
    if case.request.is_null() {
        return true;
    }
    let mut segments = case.method.trim_start_matches('/').splitn(2, '/');
    let _method = segments.next();
    segments
        .next()
        .is_some_and(|rest| rest.starts_with('{') || rest.to_ascii_lowercase().starts_with("%7b"))
}

fn code_of(answer: &Value) -> Option<i64> {
    answer.get("code").and_then(Value::as_i64)
}

/// Whether a PostgreSQL answer that differs may differ only because the request leaves row order
/// to the engine: both answers are successes, the request has an array without `@order` (or a
/// single object whose first matching row is the engine's choice: no `@order`, no `id`), and the
/// answers have the same shape (keys in the same order, same array lengths, same value types; only
/// values and the order of array items may differ). Another shape is a real failure.
fn may_depend_on_row_order(case: &Case, got: &Value) -> bool {
    code_of(&case.response) == Some(200)
        && code_of(got) == Some(200)
        && (has_unordered_array(&case.request) || has_unpinned_object(&case.request))
        && shape(&strip_ignored(&case.response)) == shape(&strip_ignored(got))
}

/// The structure of a value without its scalar values: object keys in order (`@explain` by
/// presence only), array items as a sorted list of their shapes, scalars by type.
fn shape(value: &Value) -> String {
    match value {
        Value::Object(m) => {
            let fields: Vec<String> = m
                .iter()
                .map(|(k, v)| {
                    if k == "@explain" {
                        k.clone()
                    } else {
                        format!("{k:?}:{}", shape(v))
                    }
                })
                .collect();
            format!("{{{}}}", fields.join(","))
        }
        Value::Array(a) => {
            let mut items: Vec<String> = a.iter().map(shape).collect();
            items.sort();
            format!("[{}]", items.join(","))
        }
        Value::Number(_) => "n".into(),
        Value::String(_) => "s".into(),
        Value::Bool(_) => "b".into(),
        Value::Null => "null".into(),
    }
}

/// Whether the request has an array (`key[]` with an object value) with no `@order` anywhere inside.
fn has_unordered_array(request: &Value) -> bool {
    fn has_order(v: &Value) -> bool {
        match v {
            Value::Object(m) => m.iter().any(|(k, v)| k == "@order" || has_order(v)),
            Value::Array(a) => a.iter().any(has_order),
            _ => false,
        }
    }
    match request {
        Value::Object(m) => m.iter().any(|(k, v)| {
            (k.ends_with("[]") && v.is_object() && !has_order(v)) || has_unordered_array(v)
        }),
        Value::Array(a) => a.iter().any(has_unordered_array),
        _ => false,
    }
}

/// Whether the request has a table object (`Table` with an object value) that neither orders its
/// rows nor names one by `id`: its one answered row is whichever the engine finds first.
fn has_unpinned_object(request: &Value) -> bool {
    match request {
        Value::Object(m) => m.iter().any(|(k, v)| {
            let table = k.starts_with(|c: char| c.is_ascii_uppercase()) && !k.ends_with("[]");
            match v {
                Value::Object(o) if table => {
                    (!o.contains_key("@order") && !o.contains_key("id")) || has_unpinned_object(v)
                }
                _ => has_unpinned_object(v),
            }
        }),
        _ => false,
    }
}

fn is_ignored_key(key: &str) -> bool {
    key == "time"
        || ["debug:", "sql:", "trace:", "depth:", "time:"]
            .iter()
            .any(|p| key.starts_with(p))
}

/// `value` without the ignored keys, at every level, in the same key order.
fn strip_ignored(value: &Value) -> Value {
    match value {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| !is_ignored_key(k))
                .map(|(k, v)| (k.clone(), strip_ignored(v)))
                .collect::<Map<_, _>>(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(strip_ignored).collect()),
        other => other.clone(),
    }
}

/// `None` when `got` matches `expected`, else the first difference (content before key order).
fn compare(expected: &Value, got: &Value) -> Option<String> {
    let (expected, got) = (strip_ignored(expected), strip_ignored(got));
    if code_of(&expected).is_some_and(|c| c != 200) {
        let (ec, gc) = (expected.get("code"), got.get("code"));
        let (eo, go) = (expected.get("ok"), got.get("ok"));
        let same = |a: Option<&Value>, b: Option<&Value>| match (a, b) {
            (Some(a), Some(b)) => values_equal(a, b),
            (a, b) => a == b,
        };
        if same(ec, gc) && same(eo, go) {
            return None;
        }
        let show = |v: Option<&Value>| v.map_or("(none)".to_string(), Value::to_string);
        return Some(format!(
            "code/ok differ: expected code {} ok {}, got code {} ok {}",
            show(ec),
            show(eo),
            show(gc),
            show(go)
        ));
    }
    let mut diffs = Diffs::default();
    diff(&expected, &got, "", &mut diffs);
    let (first, total) = match (diffs.content.first(), diffs.order.first()) {
        (Some(first), _) => (first, diffs.content.len()),
        (None, Some(first)) => (first, diffs.order.len()),
        (None, None) => return None,
    };
    Some(if total > 1 {
        format!("{first} (+{} more)", total - 1)
    } else {
        first.clone()
    })
}

#[derive(Default)]
struct Diffs {
    content: Vec<String>,
    order: Vec<String>,
}

fn show(v: &Value) -> String {
    truncate(&v.to_string(), 80)
}

fn diff(expected: &Value, got: &Value, path: &str, out: &mut Diffs) {
    let at = if path.is_empty() { "/" } else { path };
    match (expected, got) {
        (Value::Object(e), Value::Object(g)) => {
            for (k, ev) in e {
                match g.get(k) {
                    None => out
                        .content
                        .push(format!("{path}/{k}: missing (expected {})", show(ev))),
                    Some(_) if k == "@explain" => {}
                    Some(gv) => diff(ev, gv, &format!("{path}/{k}"), out),
                }
            }
            for (k, gv) in g.iter().filter(|(k, _)| !e.contains_key(*k)) {
                out.content
                    .push(format!("{path}/{k}: unexpected key (got {})", show(gv)));
            }
            let e_order: Vec<&String> = e.keys().filter(|k| g.contains_key(*k)).collect();
            let g_order: Vec<&String> = g.keys().filter(|k| e.contains_key(*k)).collect();
            if e_order != g_order {
                out.order.push(format!(
                    "{at}: key order differs: expected {e_order:?}, got {g_order:?}"
                ));
            }
        }
        (Value::Array(e), Value::Array(g)) => {
            if e.len() != g.len() {
                out.content
                    .push(format!("{at}: expected {} items, got {}", e.len(), g.len()));
            }
            for (i, (ev, gv)) in e.iter().zip(g).enumerate() {
                diff(ev, gv, &format!("{path}/{i}"), out);
            }
        }
        (e, g) if values_equal(e, g) => {}
        (e, g) => out
            .content
            .push(format!("{at}: expected {}, got {}", show(e), show(g))),
    }
}

/// Scalars: numbers by value (1 == 1.0), timestamps with a trailing `.0` ignored.
fn values_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            match (x.as_i64(), y.as_i64(), x.as_u64(), y.as_u64()) {
                (Some(x), Some(y), _, _) => x == y,
                (_, _, Some(x), Some(y)) => x == y,
                _ => x.as_f64().zip(y.as_f64()).is_some_and(|(x, y)| x == y),
            }
        }
        (Value::String(x), Value::String(y)) => normalize_timestamp(x) == normalize_timestamp(y),
        _ => a == b,
    }
}

/// `yyyy-MM-dd HH:mm:ss.0` → `yyyy-MM-dd HH:mm:ss`; any other text as is.
fn normalize_timestamp(s: &str) -> &str {
    let b = s.as_bytes();
    let shape_ok = b.len() >= 19
        && b[..19].iter().enumerate().all(|(i, c)| match i {
            4 | 7 => *c == b'-',
            10 => *c == b' ',
            13 | 16 => *c == b':',
            _ => c.is_ascii_digit(),
        });
    let fraction_ok = match &b[19.min(b.len())..] {
        [] => true,
        [b'.', digits @ ..] => !digits.is_empty() && digits.iter().all(u8::is_ascii_digit),
        _ => false,
    };
    if shape_ok && fraction_ok {
        s.strip_suffix(".0").unwrap_or(s)
    } else {
        s
    }
}

/// `tests/conformance/known-failures.txt`: `REF-ID reason`, or `ENGINE/REF-ID reason` for one
/// engine only (`postgres`, `mysql`); `#` starts a comment line.
struct KnownFailures {
    entries: HashMap<(Option<String>, String), String>,
}

impl KnownFailures {
    fn read(path: &Path) -> KnownFailures {
        let text = match fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => panic!("cannot read {}: {e}", path.display()),
        };
        let mut entries = HashMap::new();
        for line in text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
        {
            let (key, reason) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
            let (engine, id) = match key.split_once('/') {
                Some((engine, id)) => (Some(engine.to_string()), id.to_string()),
                None => (None, key.to_string()),
            };
            entries.insert((engine, id), reason.trim().to_string());
        }
        KnownFailures { entries }
    }

    fn is_listed(&self, engine: Engine, id: &str) -> bool {
        self.entries.contains_key(&(None, id.to_string()))
            || self
                .entries
                .contains_key(&(Some(engine.name().to_string()), id.to_string()))
    }

    /// Entries for `engine` that name no replayed case (typos, renamed cases).
    fn unknown_ids<'a>(
        &self,
        engine: Engine,
        cases: impl IntoIterator<Item = &'a Case>,
    ) -> Vec<String> {
        let ids: HashSet<&str> = cases.into_iter().map(|c| c.id.as_str()).collect();
        let mut unknown: Vec<String> = self
            .entries
            .keys()
            .filter(|(e, id)| {
                e.as_deref().is_none_or(|e| e == engine.name()) && !ids.contains(id.as_str())
            })
            .map(|(e, id)| e.as_ref().map_or(id.clone(), |e| format!("{e}/{id}")))
            .collect();
        unknown.sort();
        unknown
    }
}

struct Report {
    text: String,
    /// Failed cases not listed as known failures.
    regressions: Vec<String>,
}

impl Report {
    /// The report of one stage, ending with `{title} [ENGINE]` and the counts; `unknown` are the
    /// known-failures entries that name no replayed case.
    fn build(
        engine: Engine,
        title: &str,
        cases: &[Case],
        outcomes: &[Outcome],
        known: &KnownFailures,
        unknown: &[String],
    ) -> Report {
        let name = engine.name();
        let (mut text, mut regressions, mut now_passing) = (String::new(), Vec::new(), Vec::new());
        let (mut passed, mut failed, mut order_dependent) = (0, 0, 0);
        for (case, outcome) in cases.iter().zip(outcomes) {
            let listed = known.is_listed(engine, &case.id);
            match outcome {
                Outcome::Pass => {
                    passed += 1;
                    if listed {
                        now_passing.push(case.id.as_str());
                    }
                }
                Outcome::Fail(why) => {
                    failed += 1;
                    let _ = writeln!(text, "FAIL [{name}] {} {}: {why}", case.id, case.name);
                    if !listed {
                        regressions.push(case.id.clone());
                    }
                }
                Outcome::OrderDependent(why) => {
                    order_dependent += 1;
                    let _ = writeln!(
                        text,
                        "order-dependent [{name}] {} {}: {why}",
                        case.id, case.name
                    );
                }
            }
        }
        for id in now_passing {
            let _ = writeln!(text, "NOW PASSING (remove from known-failures): {id}");
        }
        for id in unknown {
            let _ = writeln!(
                text,
                "known-failures.txt lists {id}, which is not a replayed case"
            );
        }
        for id in &regressions {
            let _ = writeln!(
                text,
                "REGRESSION [{name}] {id}: fails and is not listed in known-failures.txt"
            );
        }
        let _ = writeln!(text, "{title} [{name}]");
        let _ = writeln!(text, "conformance: {passed} passed, {failed} failed");
        if order_dependent > 0 {
            let _ = writeln!(text, "conformance order-dependent: {order_dependent}");
        }
        Report { text, regressions }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn timestamps_ignore_a_trailing_dot_zero() {
        assert_eq!(
            normalize_timestamp("2017-02-08 08:06:11.0"),
            "2017-02-08 08:06:11"
        );
        assert_eq!(
            normalize_timestamp("2017-02-08 08:06:11.5"),
            "2017-02-08 08:06:11.5"
        );
        assert_eq!(
            normalize_timestamp("x2017-02-08 08:06:11.0"),
            "x2017-02-08 08:06:11.0"
        );
        assert_eq!(normalize_timestamp("1.0"), "1.0");
    }

    #[test]
    fn compare_normalizes_and_reports() {
        let expected = json!({"User": {"id": 1, "date": "2017-02-08 08:06:11.0", "@explain": {"sql": "a"}},
                              "ok": true, "code": 200, "msg": "success"});
        let got = json!({"User": {"id": 1.0, "date": "2017-02-08 08:06:11", "@explain": {"sql": "b"}, "sql:1": "x"},
                         "ok": true, "code": 200, "msg": "success", "time": 3});
        assert_eq!(compare(&expected, &got), None);

        let reordered = json!({"User": {"date": "2017-02-08 08:06:11", "id": 1, "@explain": {}},
                               "ok": true, "code": 200, "msg": "success"});
        let why = compare(&expected, &reordered).expect("key order is checked");
        assert!(why.contains("key order differs"), "{why}");

        let wrong = json!({"User": {"id": 2}, "ok": true, "code": 200, "msg": "success"});
        let why = compare(&expected, &wrong).expect("content differs");
        assert!(why.starts_with("/User/id: expected 1, got 2"), "{why}");

        let error = json!({"ok": false, "code": 406, "msg": "a"});
        assert_eq!(
            compare(&error, &json!({"ok": false, "code": 406, "msg": "b"})),
            None
        );
        assert!(compare(&error, &json!({"ok": false, "code": 400})).is_some());
    }

    #[test]
    fn unordered_arrays_are_found() {
        assert!(has_unordered_array(&json!({"[]": {"User": {}}})));
        assert!(!has_unordered_array(
            &json!({"[]": {"User": {"@order": "id+"}}})
        ));
        assert!(has_unordered_array(
            &json!({"User": {"Moment[]": {"Moment": {}}}})
        ));
        assert!(!has_unordered_array(&json!({"User": {"id": 1}})));
    }

    #[test]
    fn unpinned_objects_are_found() {
        assert!(has_unpinned_object(
            &json!({"Moment": {"date>": "2017-02-01"}})
        ));
        assert!(!has_unpinned_object(&json!({"Moment": {"id": 12}})));
        assert!(!has_unpinned_object(
            &json!({"Moment": {"@order": "date+"}})
        ));
    }

    #[test]
    fn row_order_is_blamed_only_for_same_shapes() {
        let case = |response: Value| Case {
            id: "REF-T".into(),
            method: "/get".into(),
            login: None,
            name: String::new(),
            request: json!({"[]": {"count": 2, "User": {"@column": "id,name"}}}),
            response,
        };
        let expected =
            json!({"[]": [{"User": {"id": 1, "name": "a"}}, {"User": {"id": 2}}], "code": 200});
        let other_rows =
            json!({"[]": [{"User": {"id": 3}}, {"User": {"id": 4, "name": "b"}}], "code": 200});
        assert!(may_depend_on_row_order(
            &case(expected.clone()),
            &other_rows
        ));
        let extra_key = json!({"[]": [{"User": {"id": 3, "@explain": {}}}, {"User": {"id": 4, "name": "b"}}], "code": 200});
        assert!(!may_depend_on_row_order(
            &case(expected.clone()),
            &extra_key
        ));
        let fewer = json!({"[]": [{"User": {"id": 1, "name": "a"}}], "code": 200});
        assert!(!may_depend_on_row_order(&case(expected.clone()), &fewer));
        let failed = json!({"code": 400});
        assert!(!may_depend_on_row_order(&case(expected), &failed));
    }

    #[test]
    fn logins_map_to_phone_and_password() {
        assert_eq!(
            credentials("13000082001"),
            ("13000082001".to_string(), "123456")
        );
        assert_eq!(credentials("82001"), ("13000082001".to_string(), "123456"));
        assert_eq!(
            credentials("13000038710"),
            ("13000038710".to_string(), "666666")
        );
        assert_eq!(credentials("70793"), ("13000070793".to_string(), "apijson"));
    }
}
