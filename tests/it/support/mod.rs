//! What the tests of this binary share beyond the test kit (`apijet_testkit`, re-exported
//! here): fresh demo databases per test, on every engine the rig provides; the names that no two
//! tests may share ([`claim`]); the demo login; and [`skip`], which fails under `CI=true`.
//!
//! - [`browser::Browser`]: headless Chromium through chromedriver.
//! - [`static_files`]: a small file server for web clients that are plain files (APIAuto).
//! - [`events`]: a Server-Sent Events client for `/subscribe`.
//! - [`readme_blocks`]: the README's shell examples, as `readme::` runs them.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use serde_json::Value;

pub mod browser;
pub mod events;
pub mod readme_blocks;
pub mod static_files;

pub use apijet_testkit::engine::with_database;
pub use apijet_testkit::server::apijet_bin;
pub use apijet_testkit::shared::{self, load_demo_db};
pub use apijet_testkit::{code, free_port, truncate, Client, Engine, Reply, Server};

/// Claims `name` (a database, a file) for the calling test: every test of the binary runs in
/// one process, two at a time, so a name two tests create and drop would make each break the
/// other now and then. Panics when another test of this run claimed it already.
pub fn claim(name: &str) {
    if let Err(e) = try_claim(name) {
        panic!("{e}");
    }
}

/// [`claim`], with the clash as an error.
fn try_claim(name: &str) -> Result<(), String> {
    static CLAIMED: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());
    let fresh = CLAIMED
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .insert(name.to_string());
    match fresh {
        true => Ok(()),
        false => Err(format!(
            "two tests use the name {name:?} (a database or file): give one of them another"
        )),
    }
}

// A passing run prints no panic: the clash is checked as the error `claim` panics with.
#[test]
fn a_name_claimed_twice_fails_the_second_test() {
    assert_eq!(try_claim("apijet_it_claimed_twice"), Ok(()));
    let clash = try_claim("apijet_it_claimed_twice").expect_err("the second claim fails");
    assert!(clash.contains("two tests use the name"), "{clash}");
}

/// The prefix of [`scratch_dir`]'s folders.
const PROCESS_DIR_PREFIX: &str = "apijet-demo-it-";

/// Where this test process keeps its files (the SQLite demo files, the unpacked APIAuto): a
/// folder of its own under cargo's temp dir for integration tests (`CARGO_TARGET_TMPDIR`,
/// inside the build folder wherever `CARGO_TARGET_DIR` puts it), removed when the process
/// exits. Folders of earlier runs whose process is gone (killed before it could remove its
/// own) are removed when the next run first asks.
pub fn scratch_dir() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let root = Path::new(env!("CARGO_TARGET_TMPDIR"));
        let mine = format!("{PROCESS_DIR_PREFIX}{}", std::process::id());
        if let Ok(entries) = fs::read_dir(root) {
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                let Some(pid) = name.strip_prefix(PROCESS_DIR_PREFIX) else {
                    continue;
                };
                let alive = Path::new("/proc").join(pid).exists();
                if name != mine && !alive {
                    let _ = fs::remove_dir_all(entry.path());
                }
            }
        }
        let dir = root.join(mine);
        fs::create_dir_all(&dir).expect("temp dir");
        remove_at_exit(&dir);
        dir
    })
    .clone()
}

/// Removes `dir` when this process ends, however it ends (the harness returns, a test aborts
/// it, SIGKILL): a small `sh` waits for the end of a pipe only this process holds (its
/// descriptors are close-on-exec, so no server a test starts inherits it), which the kernel
/// closes when the process is gone. It runs in a process group of its own, so Ctrl-C in the
/// terminal stops the tests and not it.
fn remove_at_exit(dir: &Path) {
    use std::os::unix::process::CommandExt;
    static HELD: OnceLock<std::process::ChildStdin> = OnceLock::new();
    let watcher = std::process::Command::new("sh")
        .args([
            "-c",
            "cat >/dev/null; rm -rf -- \"$1\"",
            "apijet-it-cleanup",
        ])
        .arg(dir)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .process_group(0)
        .spawn();
    match watcher {
        Ok(mut child) => {
            if let Some(pipe) = child.stdin.take() {
                let _ = HELD.set(pipe);
            }
        }
        Err(e) => eprintln!("cannot start the clean-up of {}: {e}", dir.display()),
    }
}

/// A database holding a fresh copy of the demo dataset (`apijet demo`), per engine: a SQLite
/// file `<test>.db`, and `apijet_it_<test>` on each server the rig provides.
pub fn demo_databases(test: &str) -> Vec<(Engine, String)> {
    claim(&format!("apijet_it_{test}"));
    let mut out = Vec::new();
    for engine in [Engine::Sqlite].into_iter().chain(Engine::SERVERS) {
        if let Some(url) = fresh_demo_database(test, engine) {
            out.push((engine, url));
        }
    }
    out
}

/// The same on one engine alone: `None` (with [`skip`]) where the rig does not provide it.
pub fn demo_database(test: &str, engine: Engine) -> Option<String> {
    claim(&format!("apijet_it_{test}"));
    fresh_demo_database(test, engine)
}

fn fresh_demo_database(test: &str, engine: Engine) -> Option<String> {
    let url = if engine == Engine::Sqlite {
        format!(
            "sqlite://{}",
            scratch_dir().join(format!("{test}.db")).display()
        )
    } else {
        let Some(admin) = engine.url() else {
            skip(&format!(
                "{test}: {engine} not provided ({} unset): not run on it",
                engine.url_env().unwrap_or_default()
            ));
            return None;
        };
        let db = format!("apijet_it_{test}");
        let create = match engine {
            Engine::Mariadb => format!("CREATE DATABASE {db} CHARACTER SET utf8mb4"),
            _ => format!("CREATE DATABASE {db}"),
        };
        // One statement at a time: PostgreSQL drops and creates databases outside transactions.
        for sql in [format!("DROP DATABASE IF EXISTS {db}"), create] {
            engine
                .cli(engine.admin_database(), &sql)
                .unwrap_or_else(|e| panic!("creating {db}: {e}"));
        }
        with_database(&admin, &db)
    };
    let status = std::process::Command::new(apijet_bin())
        .args(["demo", "--db", &url])
        .stdout(std::process::Stdio::null())
        .status()
        .expect("apijet demo runs");
    assert!(status.success(), "loading the demo dataset into {engine}");
    Some(url)
}

/// Runs `check` against a server with `config` on a fresh copy of the demo dataset, once per
/// engine the rig provides.
pub fn on_every_engine(test: &str, config: &str, check: impl Fn(Engine, &Server)) {
    for (engine, url) in demo_databases(test) {
        let server = Server::start(&url, config);
        check(engine, &server);
    }
}

/// POSTs `body` with `c` and parses the answer.
pub fn post(c: &mut Client, path: &str, body: &Value) -> Value {
    c.post(path, &body.to_string())
        .expect("answer")
        .json()
        .expect("json")
}

/// Sets a Moment's content through `PUT` as the client's visitor (who owns it); the write
/// must succeed.
pub fn put_moment_content(c: &mut Client, id: i64, content: &str) {
    let r = post(
        c,
        "/put",
        &serde_json::json!({"Moment": {"id": id, "content": content}, "tag": "Moment"}),
    );
    assert_eq!(code(&r), 200, "PUT Moment {id}: {r}");
}

/// A new verification code of `kind` (0 login, 1 register, 2 password, 3 pay password) for
/// `phone` from `/post/verify`: four digits, as the reference's.
pub fn verify_code(c: &mut Client, kind: i64, phone: &str) -> String {
    let r = post(
        c,
        "/post/verify",
        &serde_json::json!({"type": kind, "phone": phone}),
    );
    assert_eq!(code(&r), 200, "{r}");
    let v = r["Verify"]["verify"]
        .as_str()
        .expect("the code")
        .to_string();
    assert_eq!(v.len(), 4, "{r}");
    v
}

/// Another four-digit code than `code`.
pub fn wrong_code(code: &str) -> String {
    let n: u32 = code.parse().expect("digits");
    (1000 + (n - 1000 + 1) % 9000).to_string()
}

/// A client logged in as Ada (user 82001 of the demo dataset).
pub fn ada(s: &Server) -> Client {
    let mut c = s.client();
    c.login_as_ada().expect("login");
    c
}

/// A stage that cannot run here: under `CI=true` that fails the test (nothing may pass without
/// testing in CI); elsewhere it is said loudly and the test returns.
pub fn skip(reason: &str) {
    if std::env::var("CI").is_ok_and(|v| v == "true" || v == "1") {
        panic!("CI=true and a test stage cannot run: {reason}");
    }
    eprintln!("\n*** SKIPPED: {reason} ***\n");
}

/// The APIJSON demo database (`../shared/apijson/load-demo-db`: phones as `bigint`, plain-text
/// passwords in `varchar(20)`), loaded fresh as database `apijet_it_<test>` into MariaDB and,
/// when the rig has it, PostgreSQL: `(engine, url)` per engine. Empty (with [`skip`]) where
/// MariaDB or the loader is missing.
pub fn apijson_demo_databases(test: &str) -> Vec<(Engine, String)> {
    let Some(mysql_args) = Engine::Mariadb.client_args() else {
        skip(&format!(
            "{test}: MariaDB not provided: the APIJSON demo database is not loaded"
        ));
        return Vec::new();
    };
    if !shared::dir().join("apijson").join("load-demo-db").exists() {
        skip(&format!(
            "{test}: ../shared/apijson/load-demo-db not found: the APIJSON demo database is not loaded"
        ));
        return Vec::new();
    }
    let database = format!("apijet_it_{test}");
    claim(&database);
    let psql_args = Engine::Postgres.client_args();
    load_demo_db(&database, &mysql_args, psql_args.as_deref()).expect("the APIJSON demo database");
    Engine::SERVERS
        .iter()
        .filter_map(|&e| Some((e, with_database(&e.url()?, &database))))
        .collect()
}

/// A client that sends `Authorization: Bearer token` (`/metrics` behind `metrics_token`).
pub fn client_with_bearer(s: &Server, token: &str) -> Client {
    s.client().with_only_bearer(token)
}
