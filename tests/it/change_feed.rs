//! The change feed's triggers, installed by `apijet live-triggers`: on PostgreSQL a statement
//! trigger per table that notifies; on MariaDB and SQLite a change table (`apijet_changes`)
//! and row triggers that move a table's generation there, which every instance looks at every
//! `change_poll_ms`. Installing is idempotent and removing leaves nothing; with the triggers,
//! a kept answer (with a TTL far longer than the test) sees writes through another instance
//! and by another program (plain SQL) within the poll's bound on every engine; without them,
//! `answer_cache_ttl_ms = 0` is refused with a warning and bounded by the fallback TTL; and
//! triggers installed while an instance serves are found by its next reload; while the change
//! table cannot be read, nothing kept is given.

use crate::answer_cache::{check_stale_reads, metric, METRICS, MOMENT, ON};
use crate::support::{ada, code, demo_databases, put_moment_content, Engine, Server};
use std::process::Command;
use std::time::Duration;

/// How often the servers of these tests look at the change table.
const POLL_MS: u64 = 100;

/// `apijet live-triggers` with `args` on `url`; it must succeed. Its standard output.
fn live_triggers(url: &str, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_apijet"))
        .arg("live-triggers")
        .args(args)
        .args(["--db", url])
        .output()
        .expect("apijet live-triggers runs");
    assert!(
        out.status.success(),
        "live-triggers {args:?} on {url}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs `sql` on the database of `url` as another program would (the engine's client, or
/// SQLite's library); the first value of its first row, if any.
fn plain_sql(engine: Engine, url: &str, sql: &str) -> String {
    match engine {
        Engine::Sqlite => {
            let db = rusqlite::Connection::open(url.trim_start_matches("sqlite://"))
                .expect("open the database");
            db.busy_timeout(Duration::from_secs(10)).expect("timeout");
            let mut stmt = db.prepare(sql).expect("a statement");
            let mut rows = stmt.query([]).expect("runs");
            match rows.next().expect("a row or none") {
                Some(row) => match row.get_ref(0).expect("a value") {
                    rusqlite::types::ValueRef::Integer(i) => i.to_string(),
                    rusqlite::types::ValueRef::Text(t) => String::from_utf8_lossy(t).into(),
                    other => format!("{other:?}"),
                },
                None => String::new(),
            }
        }
        _ => {
            let db = url.rsplit('/').next().expect("a database name");
            let db = db.split('?').next().unwrap_or(db);
            engine
                .cli(db, sql)
                .unwrap_or_else(|e| panic!("{engine}: {sql}: {e}"))
                .lines()
                .next()
                .unwrap_or_default()
                .trim()
                .to_string()
        }
    }
}

/// Sets Ada's moment's content by plain SQL, as another program would.
fn program_writes(engine: Engine, url: &str, content: &str) {
    let table = match engine {
        Engine::Postgres => "\"Moment\"",
        _ => "Moment",
    };
    plain_sql(
        engine,
        url,
        &format!("UPDATE {table} SET content = '{content}' WHERE id = {MOMENT}"),
    );
}

/// How many of the feed's triggers the database has.
fn triggers(engine: Engine, url: &str) -> u64 {
    let sql = match engine {
        Engine::Sqlite => {
            "SELECT COUNT(*) FROM sqlite_master WHERE type = 'trigger' \
             AND name LIKE 'apijet_changes_%'"
        }
        Engine::Mariadb => {
            "SELECT COUNT(*) FROM information_schema.TRIGGERS \
             WHERE TRIGGER_SCHEMA = DATABASE() AND TRIGGER_NAME LIKE 'apijet_changes_%'"
        }
        Engine::Postgres => "SELECT COUNT(*) FROM pg_trigger WHERE tgname = 'apijet_live'",
    };
    plain_sql(engine, url, sql).parse().expect("a count")
}

/// Whether the change table exists.
fn change_table(engine: Engine, url: &str) -> bool {
    let sql = match engine {
        Engine::Sqlite => "SELECT COUNT(*) FROM sqlite_master WHERE name = 'apijet_changes'",
        _ => {
            "SELECT COUNT(*) FROM information_schema.TABLES \
             WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'apijet_changes'"
        }
    };
    plain_sql(engine, url, sql) == "1"
}

/// Moment's generation in the change table.
fn moment_generation(engine: Engine, url: &str) -> i64 {
    plain_sql(
        engine,
        url,
        "SELECT generation FROM apijet_changes WHERE table_name = 'Moment'",
    )
    .parse()
    .expect("a generation")
}

#[test]
fn live_triggers_install_the_change_feed_idempotently_and_remove_it_on_every_engine() {
    for (engine, url) in demo_databases("feed_install") {
        let printed = live_triggers(&url, &[]);
        assert!(printed.contains("CREATE TRIGGER"), "{engine}: {printed}");
        assert_eq!(
            triggers(engine, &url),
            0,
            "{engine}: printing installs nothing"
        );
        live_triggers(&url, &["--install"]);
        let once = triggers(engine, &url);
        live_triggers(&url, &["--install"]);
        assert_eq!(
            triggers(engine, &url),
            once,
            "{engine}: a second install changes nothing"
        );
        // The demo serves five tables besides its configuration tables.
        let per_table = if engine == Engine::Postgres { 1 } else { 3 };
        assert_eq!(
            once,
            5 * per_table,
            "{engine}: a trigger per table and event"
        );
        if engine != Engine::Postgres {
            assert!(change_table(engine, &url), "{engine}");
            let before = moment_generation(engine, &url);
            plain_sql(
                engine,
                &url,
                &format!("UPDATE Moment SET content = 'moved' WHERE id = {MOMENT}"),
            );
            assert_eq!(
                moment_generation(engine, &url),
                before + 1,
                "{engine}: another program's write moves the generation"
            );
        }
        live_triggers(&url, &["--remove"]);
        assert_eq!(triggers(engine, &url), 0, "{engine}: removed");
        if engine != Engine::Postgres {
            assert!(
                !change_table(engine, &url),
                "{engine}: the change table is gone"
            );
        }
        live_triggers(&url, &["--remove"]);
    }
}

#[test]
fn with_the_triggers_kept_answers_see_other_instances_and_programs_writes_within_the_poll() {
    for (engine, url) in demo_databases("feed_stale") {
        live_triggers(&url, &["--install"]);
        // A TTL far past the test: only the change feed can tell of the writes.
        let config = format!(
            "{ON}{METRICS}token_secret = \"shared-by-both\"\nanswer_cache_ttl_ms = 600000\n\
             change_poll_ms = {POLL_MS}\n"
        );
        let servers = [Server::start(&url, &config), Server::start(&url, &config)];
        let mut writers = [ada(&servers[0]), ada(&servers[1])];
        // The documented bound (one poll, or PostgreSQL's notification) and the time of a
        // look and of a read on this loaded machine.
        let bound = Duration::from_millis(POLL_MS + 1500);
        check_stale_reads(engine, &servers, bound, |n| {
            let content = format!("stale check {n}");
            match n % 3 {
                0 => {
                    program_writes(engine, &url, &content);
                    None
                }
                i => {
                    let instance = i as usize - 1;
                    put_moment_content(&mut writers[instance], MOMENT, &content);
                    Some(instance)
                }
            }
        });
        let invalidated: u64 = servers
            .iter()
            .map(|s| metric(s, "apijet_answer_cache_invalidations_total"))
            .sum();
        assert!(invalidated > 0, "{engine}: kept answers were found dead");
    }
}

#[test]
fn without_the_triggers_a_ttl_of_zero_is_bounded_with_a_warning_on_every_engine() {
    for (engine, url) in demo_databases("feed_untriggered") {
        let s = Server::start(&url, &format!("{ON}answer_cache_ttl_ms = 0\n"));
        let said = s.output_tail(16 << 10);
        assert!(
            said.contains("answer_cache_ttl_ms = 0") && said.contains("live-triggers --install"),
            "{engine}: no warning: {said}"
        );
        let point = format!(r#"{{"Moment":{{"id":{MOMENT},"@column":"id,content"}}}}"#);
        let mut c = s.client();
        let mut read = || {
            let r = c.post("/get", &point).expect("an answer");
            let cache = r.header("x-apijet-cache").unwrap_or("none").to_string();
            let v = r.json().expect("JSON");
            assert_eq!(code(&v), 200, "{engine}: {v}");
            (v["Moment"]["content"].clone(), cache)
        };
        // Kept once the instance hears writes (its feed connects after it answers; until
        // then nothing is kept) and while the fallback TTL has not passed between two reads
        // of a loaded machine.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while read().1 != "hit" {
            assert!(std::time::Instant::now() < deadline, "{engine}: never kept");
        }
        program_writes(engine, &url, "written by another program");
        // The fallback TTL (1000 ms) and a read's time on a loaded machine.
        std::thread::sleep(Duration::from_millis(1500));
        assert_eq!(
            read().0,
            "written by another program",
            "{engine}: another program's write is seen within the fallback TTL"
        );
    }
}

#[test]
fn triggers_installed_while_serving_are_heard_after_a_reload_on_every_engine() {
    for (engine, url) in demo_databases("feed_reload") {
        let s = Server::start(
            &url,
            &format!("{ON}admins = [82001]\nchange_poll_ms = {POLL_MS}\n"),
        );
        live_triggers(&url, &["--install"]);
        let r = crate::support::post(&mut ada(&s), "/reload", &serde_json::json!({}));
        assert_eq!(code(&r), 200, "{engine}: {r}");
        // The first look takes everything as changed (what was written before it is unknown).
        std::thread::sleep(Duration::from_millis(3 * POLL_MS));
        let point = format!(r#"{{"Moment":{{"id":{MOMENT},"@column":"id,content"}}}}"#);
        let mut c = s.client();
        let mut read = || {
            let r = c.post("/get", &point).expect("an answer");
            let cache = r.header("x-apijet-cache").unwrap_or("none").to_string();
            (r.json().expect("JSON")["Moment"]["content"].clone(), cache)
        };
        // Kept once the instance hears writes (its feed connects after it answers; until
        // then nothing is kept) and while the fallback TTL has not passed between two reads
        // of a loaded machine.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while read().1 != "hit" {
            assert!(std::time::Instant::now() < deadline, "{engine}: never kept");
        }
        program_writes(engine, &url, "written after the reload");
        // Within a poll and a look, well before the 1000 ms an unheard write would take.
        std::thread::sleep(Duration::from_millis(POLL_MS + 500));
        assert_eq!(
            read().0,
            "written after the reload",
            "{engine}: the triggers found by the reload tell of another program's write"
        );
    }
}

#[test]
fn while_the_change_table_cannot_be_read_no_kept_answer_is_given_on_mariadb_and_sqlite() {
    for (engine, url) in demo_databases("feed_deaf") {
        if engine == Engine::Postgres {
            continue;
        }
        live_triggers(&url, &["--install"]);
        let s = Server::start(&url, &format!("{ON}change_poll_ms = {POLL_MS}\n"));
        let point = format!(r#"{{"Moment":{{"id":{MOMENT},"@column":"id,content"}}}}"#);
        let mut c = s.client();
        let mut cache = || {
            let r = c.post("/get", &point).expect("an answer");
            r.header("x-apijet-cache").unwrap_or("none").to_string()
        };
        let pause = || std::thread::sleep(Duration::from_millis(5 * POLL_MS));
        pause();
        cache();
        assert_eq!(cache(), "hit", "{engine}: kept while the feed is heard");
        // Another program breaks the feed: what it writes now could not be heard.
        plain_sql(engine, &url, "DROP TABLE apijet_changes");
        pause();
        assert_eq!(cache(), "miss", "{engine}: deaf");
        assert_eq!(cache(), "miss", "{engine}: still deaf, nothing given");
        live_triggers(&url, &["--install"]);
        pause();
        cache();
        assert_eq!(cache(), "hit", "{engine}: heard again");
    }
}
