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
//! Per engine and stage the report lists each case that did not pass (`known [ENGINE] REF-ID`
//! with its reason for a documented deviation listed in `tests/it/conformance/known-failures.txt`,
//! `FAIL [ENGINE] REF-ID` with the first difference for anything else) and ends with one line,
//! `conformance [ENGINE]: N passed, K known deviations, M failed` (reads) or
//! `conformance writes [ENGINE]: …` (writes), with `, D order-dependent` on PostgreSQL when some
//! answers may differ only because the request leaves row order to the engine (an array
//! without `@order`, and an answer of the same shape; those count neither as passed nor as
//! failed). `scripts/test.sh` repeats these lines in its summary. The test fails when a case
//! fails that is not listed; listed cases that pass are printed as `NOW PASSING`.
//!
//! Spider (`conformance_spider`, ignored in the normal run): the same replay on MariaDB sharded
//! with Spider, whose demo databases `scripts/cluster/spider-check.sh` loads and shards by `id`
//! over three data nodes before it runs this test with `APIJET_TEST_SPIDER_URL` (the head node).
//! Its report says `[spider]`, its known deviations are `spider/REF-ID`, and, as on PostgreSQL,
//! an answer may be order-dependent: Spider reads the shards one after another.

mod compare;
mod report;
mod writes;

use std::collections::HashMap;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::thread;

use crate::support::{truncate, Client, Engine, Server};
use compare::{compare, describe, may_depend_on_row_order};
use report::{KnownFailures, Report};
use serde_json::Value;

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
    run(Target::of(Engine::Postgres));
}

#[test]
fn conformance_mysql() {
    run(Target::of(Engine::Mariadb));
}

#[test]
#[ignore = "needs MariaDB sharded with Spider: scripts/cluster/spider-check.sh (part of the \
            cluster stage of scripts/test.sh) brings it up and runs this test"]
fn conformance_spider() {
    let url = std::env::var("APIJET_TEST_SPIDER_URL").unwrap_or_default();
    assert!(
        !url.is_empty(),
        "APIJET_TEST_SPIDER_URL is not set: run scripts/cluster/spider-check.sh, which shards the \
         demo databases over a Spider cluster and sets it"
    );
    run(Target {
        engine: Engine::Mariadb,
        name: "spider",
        url: Some(url),
        loaded: true,
        rows_unordered: true,
    });
}

/// Where the cases are replayed.
struct Target {
    engine: Engine,
    /// In the report lines and known-failures.txt (`postgres`, `mariadb`, `spider`).
    name: &'static str,
    /// The admin URL (none: the engine is not configured here).
    url: Option<String>,
    /// The demo databases are there already (loaded and sharded by the caller).
    loaded: bool,
    /// Rows come in an order of the engine's choosing where the request leaves it open.
    rows_unordered: bool,
}

impl Target {
    /// One server of `engine`, from the test rig's environment.
    fn of(engine: Engine) -> Target {
        Target {
            engine,
            name: engine.name(),
            url: engine.url(),
            loaded: false,
            rows_unordered: engine == Engine::Postgres,
        }
    }
}

fn cases_path() -> PathBuf {
    crate::support::shared::dir()
        .join("apijson")
        .join("cases-public.json")
}

fn known_failures_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("it")
        .join("conformance")
        .join("known-failures.txt")
}

fn run(target: Target) {
    let engine = target.engine;
    let cases_path = cases_path();
    if !cases_path.exists() {
        crate::support::skip("conformance stage: ../shared/apijson/cases-public.json not found");
        return;
    }
    let Some(url) = target.url.clone() else {
        crate::support::skip(&format!(
            "conformance stage for {}: {} not set",
            engine.name(),
            engine.url_env().unwrap_or_default()
        ));
        return;
    };
    if !target.loaded && Engine::Mariadb.client_args().is_none() {
        crate::support::skip(&format!(
            "conformance stage for {}: the demo database is loaded from MariaDB, and {} is not set",
            engine.name(),
            Engine::Mariadb.url_env().unwrap_or_default()
        ));
        return;
    }
    let name = target.name;
    // The write stage's copy loads while the read stage runs.
    let loaded = target.loaded;
    let write_db_loaded = thread::spawn(move || {
        if loaded {
            Ok(())
        } else {
            demo_db(WRITE_DATABASE)
        }
    });
    if !loaded {
        if let Err(why) = demo_db(DATABASE) {
            panic!("conformance [{name}]: cannot load the demo database: {why}");
        }
    }

    let (writes, reads): (Vec<Case>, Vec<Case>) = read_cases(&cases_path)
        .into_iter()
        .filter(|c| is_replayed(c) || writes::is_write_chain(c))
        .partition(writes::is_write_chain);
    let known = KnownFailures::read(&known_failures_path());
    let unknown = known.unknown_ids(name, reads.iter().chain(&writes));
    let mut text = String::new();
    let mut regressions = Vec::new();
    let mut server_exits = Vec::new();

    {
        let mut server = Server::start(
            &crate::support::with_database(&url, DATABASE),
            SERVER_CONFIG,
        );
        let mut runner = Runner::new(&target, &server.base);
        let outcomes: Vec<Outcome> = reads.iter().map(|case| runner.run(case)).collect();
        let report = Report::build(name, "conformance", &reads, &outcomes, &known, &unknown);
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
            "conformance writes [{name}]: cannot load the demo database {WRITE_DATABASE}: {why}\n{text}"
        ),
        Err(_) => panic!("conformance writes: the loader thread panicked"),
    }
    {
        let mut server = Server::start(
            &crate::support::with_database(&url, WRITE_DATABASE),
            SERVER_CONFIG,
        );
        let mut runner = Runner::new(&target, &server.base);
        let outcomes = writes::run_chains(&mut runner, &writes);
        let report = Report::build(name, "conformance writes", &writes, &outcomes, &known, &[]);
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
        panic!("conformance [{name}]: the apijet server exited during the run");
    }
    if !regressions.is_empty() {
        panic!(
            "conformance [{name}]: {} case(s) failed that are not listed in tests/it/conformance/known-failures.txt: {}",
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
        crate::support::claim(database);
        let mysql_args = Engine::Mariadb.client_args().unwrap_or_default();
        let psql_args = Engine::Postgres.client_args();
        crate::support::load_demo_db(database, &mysql_args, psql_args.as_deref())
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
    /// Differs where the request leaves row order to the engine, on an engine that uses it.
    OrderDependent(String),
}

struct Runner {
    rows_unordered: bool,
    base: String,
    /// Logged-in clients by recorded login (a failed login is kept as its error).
    sessions: HashMap<String, Result<Client, String>>,
    transport_errors: usize,
}

impl Runner {
    fn new(target: &Target, base: &str) -> Runner {
        Runner {
            rows_unordered: target.rows_unordered,
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
                if self.rows_unordered && may_depend_on_row_order(case, &got) {
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

#[cfg(test)]
mod tests {
    use super::*;

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
