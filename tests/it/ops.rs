//! Operations: graceful stop on SIGTERM/SIGINT, /health, /ready, /metrics, the access log and
//! request ids, new SQLite files, the port bound before any database, and connection errors
//! that name their cause.

use crate::support::{apijet_bin, demo_databases, free_port, skip, Engine, Server};
use apijet_testkit::engine::UrlParts;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::Command;
use std::time::Duration;

#[test]
fn sigterm_finishes_the_request_in_flight_and_exits_0() {
    for signal in ["TERM", "INT"] {
        // No drain: SIGTERM stops accepting at once, as SIGINT does (draining is below).
        let mut server = Server::fresh_sqlite("drain_ms = 0\n");
        let mut s = TcpStream::connect(("127.0.0.1", server.port)).expect("connect");
        let body = br#"{"User":{"id":82001}}"#;
        write!(
            s,
            "POST /get HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            body.len()
        )
        .expect("write");
        s.write_all(&body[..5]).expect("half the body");
        std::thread::sleep(Duration::from_millis(300));
        server.signal(signal);
        std::thread::sleep(Duration::from_millis(300));
        // New connections are no longer accepted...
        assert!(
            TcpStream::connect(("127.0.0.1", server.port)).is_err()
                || server.exit_status().is_none(),
            "still accepting after SIG{signal}"
        );
        // ...but the request under way is answered.
        s.write_all(&body[5..]).expect("the rest of the body");
        s.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        let mut answer = Vec::new();
        let _ = s.read_to_end(&mut answer);
        let text = String::from_utf8_lossy(&answer);
        assert!(text.starts_with("HTTP/1.1 200"), "SIG{signal}: {text}");
        assert!(text.contains(r#""name":"Ada""#), "SIG{signal}: {text}");
        let status = server
            .wait_exit(Duration::from_secs(10))
            .unwrap_or_else(|| panic!("still running 10 s after SIG{signal}"));
        assert_eq!(
            status.code(),
            Some(0),
            "SIG{signal}: {}",
            server.output_tail(2000)
        );
    }
}

/// Opens `POST /subscribe` on a connection of its own and reads up to its first event.
fn open_stream(port: u16, request: &str) -> TcpStream {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    write!(
        s,
        "POST /subscribe HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{request}",
        request.len()
    )
    .expect("write");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let first = read_until(&mut s, "\n\n", Duration::from_secs(10));
    assert!(first.contains("text/event-stream"), "{first}");
    s
}

/// Reads from `s` until what was read holds `needle` (or `limit` passed): the text read.
fn read_until(s: &mut TcpStream, needle: &str, limit: Duration) -> String {
    let deadline = std::time::Instant::now() + limit;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    s.set_read_timeout(Some(Duration::from_millis(200)))
        .expect("timeout");
    while std::time::Instant::now() < deadline {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(_) => {}
        }
        let text = String::from_utf8_lossy(&got);
        // The head ends the first "\r\n\r\n"; events end with "\n\n" after it.
        if text
            .split_once("\r\n\r\n")
            .is_some_and(|(_, body)| body.contains(needle))
        {
            break;
        }
    }
    String::from_utf8_lossy(&got).into_owned()
}

#[test]
fn sigterm_drains_first_with_health_failing_then_streams_reconnect_and_it_exits() {
    let mut server = Server::fresh_sqlite("drain_ms = 2500\nlive_poll_ms = 0\n");
    let mut stream = open_stream(server.port, r#"{"User":{"id":82001,"@column":"id"}}"#);
    let mut c = server.client();
    assert_eq!(c.get("/health").expect("health").status, 200);
    let signalled = std::time::Instant::now();
    server.signal("TERM");
    // /health and /ready fail at once, so a balancer stops sending requests here...
    let deadline = signalled + Duration::from_secs(2);
    let health = loop {
        let h = server
            .client()
            .get("/health")
            .expect("health while draining");
        if h.status != 200 || std::time::Instant::now() > deadline {
            break h;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(health.status, 503, "{}", health.text);
    assert!(health.text.contains("draining"), "{}", health.text);
    assert_eq!(server.client().get("/ready").expect("ready").status, 503);
    // ...while whatever still comes is answered, on a connection the answer closes.
    let answer = server
        .client()
        .post("/get", r#"{"User":{"id":82001}}"#)
        .expect("a request while draining");
    assert_eq!(answer.json().expect("json")["User"]["name"], "Ada");
    assert_eq!(answer.header("connection"), Some("close"), "{answer:?}");
    // The stream lives through the drain, then is told to reconnect (with a retry delay).
    let rest = read_until(&mut stream, "event: reconnect", Duration::from_secs(15));
    let ended = signalled.elapsed();
    assert!(rest.contains("retry: "), "{rest}");
    assert!(rest.contains("event: reconnect"), "{rest}");
    assert!(rest.contains(r#""code":503"#), "{rest}");
    assert!(
        ended >= Duration::from_millis(2400),
        "the stream ended {ended:?} after SIGTERM, before the drain was over"
    );
    let status = server
        .wait_exit(Duration::from_secs(15))
        .expect("the server stops after the drain");
    assert_eq!(status.code(), Some(0), "{}", server.output_tail(2000));
}

#[test]
fn sigint_or_a_second_signal_stops_without_the_drain() {
    for signals in [&["INT"][..], &["TERM", "INT"], &["TERM", "TERM"]] {
        let mut server = Server::fresh_sqlite("drain_ms = 600000\n");
        let started = std::time::Instant::now();
        for (i, signal) in signals.iter().enumerate() {
            if i > 0 {
                // The first signal has begun the drain.
                let deadline = std::time::Instant::now() + Duration::from_secs(5);
                while server.client().get("/health").map(|h| h.status) == Ok(200) {
                    assert!(
                        std::time::Instant::now() < deadline,
                        "{signals:?}: no drain"
                    );
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
            server.signal(signal);
        }
        let status = server
            .wait_exit(Duration::from_secs(15))
            .unwrap_or_else(|| panic!("{signals:?}: still running, draining for 10 minutes"));
        assert_eq!(status.code(), Some(0), "{signals:?}");
        assert!(started.elapsed() < Duration::from_secs(20), "{signals:?}");
    }
}

#[test]
fn sigterm_lets_a_queued_insert_in_flight_commit() {
    let mut server = Server::fresh_sqlite("write_queue = true\ndrain_ms = 0\n");
    let token = server
        .client()
        .login("13000082001", "123456")
        .expect("login")["token"]
        .as_str()
        .expect("token")
        .to_string();
    let body =
        br#"{"tag":"Comment","Comment":{"momentId":1001,"content":"written while stopping"}}"#;
    let mut s = TcpStream::connect(("127.0.0.1", server.port)).expect("connect");
    write!(
        s,
        "POST /post HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .expect("write");
    s.write_all(&body[..10]).expect("part of the body");
    std::thread::sleep(Duration::from_millis(300));
    server.signal("TERM");
    std::thread::sleep(Duration::from_millis(300));
    s.write_all(&body[10..]).expect("the rest");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer);
    let text = String::from_utf8_lossy(&answer);
    assert!(text.contains(r#""count":1"#), "{text}");
    let status = server.wait_exit(Duration::from_secs(10)).expect("exits");
    assert_eq!(status.code(), Some(0));
    let db = rusqlite::Connection::open(server.dir().join("demo.db")).expect("open");
    let n: i64 = db
        .query_row(
            "SELECT count(*) FROM Comment WHERE content = 'written while stopping'",
            [],
            |r| r.get(0),
        )
        .expect("count");
    assert_eq!(n, 1, "the acknowledged row is stored");
}

#[test]
fn health_ready_metrics_and_request_ids_on_every_engine() {
    for (engine, url) in demo_databases("ops_observe") {
        let server = Server::start(&url, "metrics_token = \"ops\"\n");
        let mut c = server.client();
        let health = c.get("/health").expect("health");
        assert_eq!(health.status, 200, "{engine}");
        assert_eq!(health.json().expect("json")["code"], 200);
        let ready = c.get("/ready").expect("ready");
        assert_eq!(ready.status, 200, "{engine}: {}", ready.text);
        assert_eq!(ready.json().expect("json")["ok"], true);

        let r = c.post("/get", r#"{"User":{"id":82001}}"#).expect("get");
        let id = r.header("x-request-id").expect("x-request-id").to_string();
        assert!(!id.is_empty());
        let r2 = c.post("/get", r#"{"User":{"id":82001}}"#).expect("get");
        assert_ne!(r2.header("x-request-id"), Some(id.as_str()), "ids differ");
        let r = c.post("/get", r#"{"Privacy":{"id":82001}}"#).expect("get");
        assert_eq!(r.json().expect("json")["code"], 401);
        c.post(
            "/get",
            r#"{"Moment[]":{"count":3,"Moment":{"userId":82001}}}"#,
        )
        .expect("list");
        let mut ada = crate::support::ada(&server);
        let posted = crate::support::post(
            &mut ada,
            "/post",
            &serde_json::json!({"tag":"Comment","Comment":{"momentId":1001,"content":"counted"}}),
        );
        assert_eq!(posted["code"], 200, "{engine}: {posted}");

        let m = server
            .client()
            .with_only_bearer("ops")
            .get("/metrics")
            .expect("metrics");
        assert_eq!(m.status, 200);
        assert!(m
            .header("content-type")
            .unwrap_or("")
            .starts_with("text/plain"));
        for needle in [
            r#"apijet_requests_total{method="get",table="User",code="200"} 2"#,
            r#"apijet_requests_total{method="get",table="Privacy",code="401"} 1"#,
            r#"apijet_request_duration_seconds_bucket{method="get",le="+Inf"} 4"#,
            "apijet_sql_statements_per_request_count",
            "apijet_rows_streamed_total",
            "apijet_bytes_streamed_total",
            "apijet_pool_in_use",
            "apijet_pool_waiting",
            "apijet_write_queue_batches_total",
            "apijet_connections_open",
        ] {
            assert!(
                m.text.contains(needle),
                "{engine}: no {needle} in\n{}",
                m.text
            );
        }
        let streamed = m
            .text
            .lines()
            .find_map(|l| l.strip_prefix("apijet_rows_streamed_total "))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(0);
        assert_eq!(streamed, 3, "{engine}: three Moment rows streamed");
        let batches = m
            .text
            .lines()
            .find_map(|l| l.strip_prefix("apijet_write_queue_batches_total "))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(0);
        assert!(
            batches >= 1,
            "{engine}: the POST went through the write queue:\n{}",
            m.text
        );
        assert!(
            m.text
                .contains(r#"apijet_requests_total{method="post",table="Comment",code="200"} 1"#),
            "{engine}"
        );
    }
}

#[test]
fn a_client_request_id_is_kept_and_the_access_log_has_one_line_per_request() {
    let server = Server::fresh_sqlite_env("", &[("APIJET_LOG", "info")]);
    let r = server
        .client()
        .request(
            "POST",
            "/get",
            &[("x-request-id", "trace-42")],
            br#"{"User":{"id":82001},"Moment":{"userId":82001}}"#,
        )
        .expect("get");
    assert_eq!(r.header("x-request-id"), Some("trace-42"));
    std::thread::sleep(Duration::from_millis(300));
    let log = std::fs::read_to_string(server.dir().join("stderr.log")).expect("log");
    let lines: Vec<&str> = log.lines().filter(|l| l.contains("trace-42")).collect();
    assert_eq!(lines.len(), 1, "{log}");
    let line = lines[0];
    for part in [
        "method=POST",
        "path=/get",
        "tables=User,Moment",
        "code=200",
        "rows=2",
        "statements=2",
        "ms=",
    ] {
        assert!(line.contains(part), "no {part} in {line}");
    }
}

#[test]
fn server_timing_when_asked() {
    let server = Server::fresh_sqlite("server_timing = true\n");
    let r = server
        .client()
        .post("/get", r#"{"User":{"id":82001}}"#)
        .expect("get");
    let timing = r.header("server-timing").expect("server-timing");
    assert!(timing.starts_with("total;dur="), "{timing}");
    for stage in ["parse;dur=", "exec;dur=", "encode;dur="] {
        assert!(timing.contains(stage), "{timing}");
    }
    let plain = Server::fresh_sqlite("");
    let r = plain
        .client()
        .post("/get", r#"{"User":{"id":82001}}"#)
        .expect("get");
    assert!(r.header("server-timing").is_none());
}

#[test]
fn a_new_sqlite_file_is_created_with_the_demo_dataset() {
    let server = Server::fresh_sqlite("");
    assert!(server.dir().join("demo.db").exists());
    let v = server.post("/get", r#"{"User":{"id":82001}}"#);
    assert_eq!(v["User"]["name"], "Ada");
}

#[test]
fn a_taken_port_fails_before_any_database_is_touched() {
    let taken = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = taken.local_addr().expect("addr").port();
    let dir = std::env::temp_dir().join(format!("apijet-ops-port-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let db = dir.join("never.db");
    let out = Command::new(apijet_bin())
        .args(["serve", "--db", &format!("sqlite://{}", db.display())])
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let created = db.exists();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(!out.status.success());
    assert!(stderr.contains("cannot listen"), "{stderr}");
    assert!(
        !created,
        "the database was created although the port was taken"
    );
}

/// `apijet serve --db URL` on a free port; its exit status and stderr.
fn serve_fails(url: &str) -> String {
    let out = Command::new(apijet_bin())
        .args(["serve", "--db", url])
        .args(["--listen", &format!("127.0.0.1:{}", free_port())])
        .output()
        .expect("runs");
    assert!(!out.status.success(), "{url} should not start");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Runs one statement with the engine's command-line client (as the test rig's admin user).
fn admin_sql(engine: Engine, sql: &str) {
    engine
        .cli(engine.admin_database(), sql)
        .unwrap_or_else(|e| panic!("{e}"));
}

/// `url` pointing at `host:port` of the test server as `user[:password]`, database `db`.
fn as_user(url: &str, user: &str, password: Option<&str>, db: &str) -> String {
    let mut parsed = UrlParts::parse(url).expect("url");
    parsed.port.expect("port");
    parsed.user = user.to_string();
    parsed.password = password.map(str::to_string);
    parsed.query.clear();
    parsed.with_database(db)
}

/// Every line of `text` is checked for each of `parts`.
fn says_all(what: &str, text: &str, parts: &[&str]) {
    for part in parts {
        assert!(text.contains(part), "{what}: no «{part}» in\n{text}");
    }
}

#[test]
fn start_up_errors_name_engine_host_port_and_database_and_say_what_to_check() {
    let closed = free_port();
    let refused = serve_fails(&format!("postgres://nobody@127.0.0.1:{closed}/x"));
    says_all(
        "postgres refused",
        &refused,
        &[
            &format!("PostgreSQL at 127.0.0.1:{closed} (database \"x\", user \"nobody\")"),
            "the connection was refused",
            &format!("listening on port {closed}"),
        ],
    );
    let refused = serve_fails(&format!("mysql://root@127.0.0.1:{closed}/x"));
    says_all(
        "mysql refused",
        &refused,
        &[
            &format!("MySQL/MariaDB at 127.0.0.1:{closed} (database \"x\", user \"root\")"),
            "the connection was refused",
            &format!("listening on port {closed}"),
        ],
    );

    let dir = std::env::temp_dir().join(format!("apijet-ops-sqlite-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let missing = dir.join("apijet-no-such-dir/deeper/x.db");
    let sqlite = serve_fails(&format!("sqlite://{}", missing.display()));
    says_all(
        "sqlite in a missing directory",
        &sqlite,
        &[
            "SQLite file",
            "apijet-no-such-dir/deeper does not exist",
            "mkdir -p",
        ],
    );
    let text_file = dir.join("notes.txt");
    std::fs::write(
        &text_file,
        "not a database, but long enough to look like a header .....",
    )
    .expect("write");
    let sqlite = serve_fails(&format!("sqlite://{}", text_file.display()));
    let _ = std::fs::remove_dir_all(&dir);
    says_all(
        "a file that is not a database",
        &sqlite,
        &["notes.txt", "is not a SQLite database"],
    );

    match Engine::Postgres.url() {
        Some(url) => {
            let err = serve_fails(&as_user(&url, "postgres", None, "apijet_no_such_db"));
            says_all(
                "postgres, no such database",
                &err,
                &[
                    "database \"apijet_no_such_db\"",
                    "does not exist",
                    "createdb apijet_no_such_db",
                ],
            );
            // scripts/lib/db.sh makes the server ask this one role for a password.
            admin_sql(
                Engine::Postgres,
                "DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = \
                 'apijet_password_required') THEN CREATE ROLE apijet_password_required LOGIN \
                 PASSWORD 'right'; END IF; END $$",
            );
            let err = serve_fails(&as_user(&url, "apijet_password_required", None, "postgres"));
            says_all(
                "postgres, no password",
                &err,
                &[
                    "a password is required",
                    "postgres://apijet_password_required:PASSWORD@",
                ],
            );
            let err = serve_fails(&as_user(
                &url,
                "apijet_password_required",
                Some("wrong"),
                "postgres",
            ));
            says_all(
                "postgres, wrong password",
                &err,
                &["user name or password was refused", "pg_hba.conf"],
            );
            assert!(
                !err.contains("wrong"),
                "the password is not repeated: {err}"
            );
        }
        None => skip("start-up errors: APIJET_TEST_POSTGRES_URL not set"),
    }
    match Engine::Mariadb.url() {
        Some(url) => {
            let err = serve_fails(&as_user(&url, "root", None, "apijet_no_such_db"));
            says_all(
                "mysql, no such database",
                &err,
                &[
                    "database \"apijet_no_such_db\"",
                    "does not exist",
                    "CREATE DATABASE `apijet_no_such_db`",
                ],
            );
            admin_sql(
                Engine::Mariadb,
                "CREATE USER IF NOT EXISTS 'apijet_password_required'@'%' IDENTIFIED BY 'right'",
            );
            let err = serve_fails(&as_user(&url, "apijet_password_required", None, "mysql"));
            says_all(
                "mysql, no password",
                &err,
                &[
                    "a password is required",
                    "mysql://apijet_password_required:PASSWORD@",
                ],
            );
            let err = serve_fails(&as_user(
                &url,
                "apijet_password_required",
                Some("wrong"),
                "mysql",
            ));
            says_all(
                "mysql, wrong password",
                &err,
                &["user name or password was refused", "CREATE USER"],
            );
        }
        None => skip("start-up errors: APIJET_TEST_MYSQL_URL not set"),
    }
}

#[test]
fn a_listen_address_without_a_host_says_host_port() {
    let out = Command::new(apijet_bin())
        .args([
            "serve",
            "--db",
            "sqlite:///nonexistent-dir/never.db",
            "--listen",
            "8082",
        ])
        .output()
        .expect("runs");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    says_all(
        "--listen 8082",
        &stderr,
        &["'8082' is not HOST:PORT", "127.0.0.1:8082", "0.0.0.0:8082"],
    );
}

#[test]
fn slow_requests_are_logged_with_their_sql_and_plan_on_every_engine() {
    // A streamed list and a nested page, each matching a regular expression against every
    // one of 20,000 filler comments of 200 characters (all on moment 1001, which the page
    // holds; no index on content or momentId): each statement takes many times the 1 ms
    // threshold on every engine (about 25 ms on SQLite here), so each request is logged the
    // first time. On the 300 demo comments alone SQLite often ran the nested statement in
    // under 1 ms, and it went unlogged.
    let requests = [
        (
            "regexp|REGEXP|~",
            r#"{"Comment[]":{"count":100,"Comment":{"content~":"zq"}}}"#,
        ),
        (
            "momentId",
            r#"{"[]":{"count":5,"Moment":{"id{}":[1001,1002,1003,1004,1005]},"Comment[]":{"count":3,"Comment":{"momentId@":"[]/Moment/id","content~":"e"}}}}"#,
        ),
    ];
    let filler: Vec<serde_json::Value> = (0..20_000)
        .map(|_| serde_json::json!({"momentId": 1001, "content": "x".repeat(200)}))
        .collect();
    let filler = serde_json::json!({"tag": "Comment:[]", "Comment[]": filler});
    for (engine, url) in demo_databases("ops_slow") {
        let server = Server::start(
            &url,
            "slow_request_ms = 1\nmax_batch = 20000\nmax_body_bytes = 16777216\n",
        );
        let posted = crate::support::post(&mut crate::support::ada(&server), "/post", &filler);
        assert_eq!(
            posted["code"],
            200,
            "{engine}: {}",
            crate::support::truncate(&posted.to_string(), 300)
        );
        for (needle, request) in requests {
            let needles: Vec<&str> = needle.split('|').collect();
            let log =
                || std::fs::read_to_string(server.dir().join("stderr.log")).unwrap_or_default();
            // Only what this request logs counts.
            let before = log().len();
            let v = server.post("/get", request);
            assert_eq!(v["code"], 200, "{engine}: {v}");
            // The entry is written before the answer ends; the wait only covers the file.
            let mut found = None;
            for _ in 0..50 {
                let logged = log();
                found = logged[before.min(logged.len())..]
                    .split("slow statement")
                    .skip(1)
                    .find(|entry| needles.iter().any(|n| entry.contains(n)))
                    .map(str::to_string);
                if found.is_some() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            let logged = log();
            let entry = found
                .unwrap_or_else(|| panic!("{engine}: no slow statement with {needle}: {logged}"));
            assert!(!logged.contains("EXPLAIN failed"), "{engine}: {logged}");
            let plan_words = [
                "SCAN", "Scan", "SEARCH", "ALL", "ref", "range", "Moment", "Comment",
            ];
            assert!(
                plan_words.iter().any(|w| entry.contains(w)),
                "{engine}: the plan is in the log: {entry}"
            );
        }
    }
}

#[test]
fn statements_are_logged_with_their_time_at_debug() {
    let server = Server::fresh_sqlite_env("", &[("APIJET_LOG", "apijet::sql=debug")]);
    server.post("/get", r#"{"User":{"id":82001}}"#);
    std::thread::sleep(Duration::from_millis(200));
    let log = std::fs::read_to_string(server.dir().join("stderr.log")).expect("log");
    let line = log
        .lines()
        .find(|l| l.contains("apijet::sql") && l.contains("SELECT"))
        .unwrap_or_else(|| panic!("no statement in {log}"));
    assert!(line.contains("ms="), "{line}");
}
