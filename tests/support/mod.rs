//! Shared helpers for the integration tests in `tests/*.rs` (include with `mod support;`).
//!
//! - [`Engine`]: the database engines the tests run on, found through the `APIJET_TEST_*`
//!   environment variables that `scripts/test.sh` exports.
//! - [`shared_dir`], [`load_demo_db`]: the reference material beside the repository (`../shared`)
//!   and its demo-database loader.
//! - [`Server`]: an `apijet serve` child process on a free port with a given TOML config, killed
//!   when dropped (also when the test panics).
//! - [`Client`]: a small HTTP client on `ureq` that keeps the cookies and bearer token of a login.
//! - [`browser::Browser`]: headless Chromium through chromedriver.
#![allow(dead_code)]

use std::fs;
use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::Value;

pub mod browser;
pub mod client;
pub mod static_files;
pub use client::Client;
mod events;
#[allow(unused_imports)]
pub use events::{Events, NotStarted};

/// How long [`Server::start`] waits for the server to accept connections.
pub const SERVER_START_TIMEOUT: Duration = Duration::from_secs(30);
/// Timeout of one HTTP request (connect, send and read the whole answer).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);

/// A database engine the integration tests can run against.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Engine {
    Postgres,
    Mysql,
}

impl Engine {
    pub const ALL: [Engine; 2] = [Engine::Postgres, Engine::Mysql];

    pub fn name(self) -> &'static str {
        match self {
            Engine::Postgres => "postgres",
            Engine::Mysql => "mysql",
        }
    }

    /// The environment variable holding the server URL, e.g. `postgres://postgres@127.0.0.1:5432/postgres`.
    pub fn url_env(self) -> &'static str {
        match self {
            Engine::Postgres => "APIJET_TEST_POSTGRES_URL",
            Engine::Mysql => "APIJET_TEST_MYSQL_URL",
        }
    }

    /// The environment variable holding the command-line client arguments (`psql` / `mariadb`).
    pub fn client_args_env(self) -> &'static str {
        match self {
            Engine::Postgres => "APIJET_TEST_PSQL_ARGS",
            Engine::Mysql => "APIJET_TEST_MYSQL_ARGS",
        }
    }

    /// The server URL from the environment, when set and not empty.
    pub fn url(self) -> Option<String> {
        non_empty_env(self.url_env())
    }

    /// Client arguments for `psql` / `mariadb` (`-h HOST -p PORT -U USER` / `-h HOST -P PORT -u USER`):
    /// from the environment, else derived from [`Engine::url`].
    pub fn client_args(self) -> Option<String> {
        if let Some(args) = non_empty_env(self.client_args_env()) {
            return Some(args);
        }
        let url = DbUrl::parse(&self.url()?)?;
        Some(match self {
            Engine::Postgres => format!(
                "-h {} -p {} -U {}",
                url.host,
                url.port.unwrap_or(5432),
                url.user
            ),
            Engine::Mysql => {
                let mut args = format!(
                    "-h {} -P {} -u {}",
                    url.host,
                    url.port.unwrap_or(3306),
                    url.user
                );
                if let Some(pw) = &url.password {
                    args.push_str(&format!(" --password={pw}"));
                }
                args
            }
        })
    }
}

fn non_empty_env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// The parts of a `scheme://user[:password]@host[:port]/database[?query]` URL the tests need.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DbUrl {
    pub user: String,
    pub password: Option<String>,
    pub host: String,
    pub port: Option<u16>,
}

impl DbUrl {
    pub fn parse(url: &str) -> Option<DbUrl> {
        let rest = url.split_once("://")?.1;
        let authority = rest.split(['/', '?']).next()?;
        let (userinfo, hostport) = authority.rsplit_once('@').unwrap_or(("", authority));
        let (user, password) = match userinfo.split_once(':') {
            Some((u, p)) => (u.to_string(), Some(p.to_string())),
            None => (userinfo.to_string(), None),
        };
        // `[::1]:5432` keeps its brackets in `host` (the clients accept it without them too).
        let port_sep = if hostport.starts_with('[') {
            hostport.rfind("]:").map(|i| i + 1)
        } else {
            hostport.rfind(':')
        };
        let (host, port) = match port_sep {
            Some(i) => (hostport[..i].to_string(), hostport[i + 1..].parse().ok()),
            None => (hostport.to_string(), None),
        };
        Some(DbUrl {
            user,
            password,
            host,
            port,
        })
    }
}

/// `url` with its database (the path) replaced by `database`; any `?query` is kept.
pub fn with_database(url: &str, database: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let query = tail.find('?').map(|i| &tail[i..]).unwrap_or("");
    format!("{scheme}://{authority}/{database}{query}")
}

/// The reference material beside the repository: `<repo>/../shared`, or `APIJET_SHARED_DIR`
/// (a worktree does not sit beside it).
pub fn shared_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("APIJET_SHARED_DIR") {
        return PathBuf::from(dir);
    }
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("shared")
}

/// Loads the APIJSON demo database with `../shared/apijson/load-demo-db`: into MariaDB database
/// `database` (always: it is the source), and when `psql_args` is given, the same rows into
/// PostgreSQL database `database`. Both are dropped and created anew.
pub fn load_demo_db(
    database: &str,
    mysql_args: &str,
    psql_args: Option<&str>,
) -> Result<(), String> {
    let loader = shared_dir().join("apijson").join("load-demo-db");
    let mut cmd = Command::new("python3");
    cmd.arg(&loader)
        .arg("--mariadb-db")
        .arg(database)
        // `--opt=value`: the values start with `-h`, which argparse would take for an option.
        .arg(format!("--mysql={mysql_args}"));
    if let Some(psql_args) = psql_args {
        cmd.arg("--postgres-db")
            .arg(database)
            .arg(format!("--psql={psql_args}"));
        if let Some(pw) = Engine::Postgres
            .url()
            .and_then(|u| DbUrl::parse(&u))
            .and_then(|u| u.password)
        {
            cmd.env("PGPASSWORD", pw);
        }
    }
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run python3 {}: {e}", loader.display()))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{} failed ({}):\n{}{}",
            loader.display(),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// A free TCP port on 127.0.0.1 (bound, read, released: another process may take it meanwhile).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind 127.0.0.1:0 to find a free port")
}

/// A new empty directory under the system temp dir, unique to this process and call.
fn unique_temp_dir(prefix: &str) -> io::Result<PathBuf> {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("{prefix}-{}-{n}-{nanos}", std::process::id()));
    fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// Everything after the last `max` characters are kept: the end of a log is the interesting part.
pub fn tail(text: &str, max: usize) -> &str {
    let len = text.chars().count();
    if len <= max {
        return text;
    }
    let start = text
        .char_indices()
        .nth(len - max)
        .map(|(i, _)| i)
        .unwrap_or(0);
    &text[start..]
}

/// At most `max` characters of `text`, with `…` appended when cut.
pub fn truncate(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_string(),
    }
}

/// A running `apijet serve` process. Dropping it kills the process and removes its temp files.
pub struct Server {
    /// `http://127.0.0.1:PORT`
    pub base: String,
    pub port: u16,
    child: Child,
    dir: PathBuf,
}

impl Server {
    /// Starts `apijet serve --db DB_URL --listen 127.0.0.1:PORT --config FILE` with `config_toml`
    /// written to FILE, and waits until it accepts connections. Panics with the server's output
    /// when it exits early or does not come up within [`SERVER_START_TIMEOUT`].
    pub fn start(db_url: &str, config_toml: &str) -> Server {
        Server::try_start(db_url, config_toml).unwrap_or_else(|e| panic!("{e}"))
    }

    /// A server on a new SQLite file in its own temp dir (apijet creates it with the demo
    /// dataset); the file goes when the server is dropped.
    pub fn fresh_sqlite(config_toml: &str) -> Server {
        let dir = unique_temp_dir("apijet-server").expect("temp dir");
        let url = format!("sqlite://{}", dir.join("demo.db").display());
        Server::start_in(dir, &url, config_toml, &[]).unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`Server::fresh_sqlite`] with extra environment variables (e.g. `APIJET_LOG`).
    pub fn fresh_sqlite_env(config_toml: &str, env: &[(&str, &str)]) -> Server {
        let dir = unique_temp_dir("apijet-server").expect("temp dir");
        let url = format!("sqlite://{}", dir.join("demo.db").display());
        Server::start_in(dir, &url, config_toml, env).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Like [`Server::start`], with the failure as an error.
    pub fn try_start(db_url: &str, config_toml: &str) -> Result<Server, String> {
        let dir = unique_temp_dir("apijet-server")
            .map_err(|e| format!("cannot create a temp dir: {e}"))?;
        Server::start_in(dir, db_url, config_toml, &[])
    }

    fn start_in(
        dir: PathBuf,
        db_url: &str,
        config_toml: &str,
        env: &[(&str, &str)],
    ) -> Result<Server, String> {
        let config = dir.join("config.toml");
        fs::write(&config, config_toml)
            .map_err(|e| format!("cannot write {}: {e}", config.display()))?;
        let open_log = |name: &str| {
            fs::File::create(dir.join(name))
                .map_err(|e| format!("cannot create {name} in {}: {e}", dir.display()))
        };
        let (stdout, stderr) = (open_log("stdout.log")?, open_log("stderr.log")?);
        let port = free_port();
        let child = Command::new(env!("CARGO_BIN_EXE_apijet"))
            .arg("serve")
            .arg("--db")
            .arg(db_url)
            .arg("--listen")
            .arg(format!("127.0.0.1:{port}"))
            .arg("--config")
            .arg(&config)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", env!("CARGO_BIN_EXE_apijet")))?;
        let mut server = Server {
            base: format!("http://127.0.0.1:{port}"),
            port,
            child,
            dir,
        };
        server.wait_ready()?;
        Ok(server)
    }

    fn wait_ready(&mut self) -> Result<(), String> {
        let addr = SocketAddr::from(([127, 0, 0, 1], self.port));
        let deadline = Instant::now() + SERVER_START_TIMEOUT;
        loop {
            if let Some(status) = self.exit_status() {
                return Err(format!(
                    "apijet server exited early ({status}):\n{}",
                    self.output_tail(4000)
                ));
            }
            // The port is bound before the database is opened: wait for an HTTP answer.
            if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                let probe = ureq::Agent::new_with_config(
                    ureq::Agent::config_builder()
                        .http_status_as_error(false)
                        .timeout_global(Some(Duration::from_secs(2)))
                        .proxy(None)
                        .build(),
                );
                if probe.get(format!("{}/health", self.base)).call().is_ok() {
                    return Ok(());
                }
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "apijet server did not accept connections on {addr} within {}s:\n{}",
                    SERVER_START_TIMEOUT.as_secs(),
                    self.output_tail(4000)
                ));
            }
            thread::sleep(Duration::from_millis(100));
        }
    }

    /// SIGKILL: the process gets no chance to finish anything.
    pub fn kill_hard(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Sends a signal (`TERM`, `INT`, `HUP`) to the process with `kill -s`.
    pub fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .args(["-s", name, &self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill -s {name} failed");
    }

    /// Waits up to `timeout` for the process to end; its status, or `None` if it still runs.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.exit_status() {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            thread::sleep(Duration::from_millis(50));
        }
    }

    /// The exit status when the process has ended.
    pub fn exit_status(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// The server's temp dir (its config, logs and, for [`Server::fresh_sqlite`], database).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The last `max` characters of the server's stderr (and stdout, when it printed anything).
    pub fn output_tail(&self, max: usize) -> String {
        let read = |name: &str| fs::read_to_string(self.dir.join(name)).unwrap_or_default();
        let (out, err) = (read("stdout.log"), read("stderr.log"));
        let mut text = format!("--- stderr ---\n{}", tail(&err, max));
        if !out.trim().is_empty() {
            text.push_str(&format!("\n--- stdout ---\n{}", tail(&out, max)));
        }
        text
    }

    /// The server's resident memory in KiB (Linux `/proc`), `None` where it cannot be read.
    pub fn rss_kib(&self) -> Option<u64> {
        self.proc_status_kib("VmRSS:")
    }

    /// The server's peak resident memory so far in KiB (Linux `/proc`).
    pub fn peak_rss_kib(&self) -> Option<u64> {
        self.proc_status_kib("VmHWM:")
    }

    /// The CPU time the server has used so far, in seconds (Linux `/proc`, 100 ticks a
    /// second), `None` where it cannot be read.
    pub fn cpu_seconds(&self) -> Option<f64> {
        let stat = fs::read_to_string(format!("/proc/{}/stat", self.child.id())).ok()?;
        // The fields after the command name (which may hold spaces) in parentheses.
        let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
        let ticks: u64 =
            fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
        Some(ticks as f64 / 100.0)
    }

    fn proc_status_kib(&self, field: &str) -> Option<u64> {
        let status = fs::read_to_string(format!("/proc/{}/status", self.child.id())).ok()?;
        status
            .lines()
            .find_map(|l| l.strip_prefix(field))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
    }

    /// `base` + `path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    /// A new client without cookies for this server.
    pub fn client(&self) -> Client {
        Client::new(&self.base)
    }

    /// POSTs `body` (sent as is, `Content-Type: application/json`) and returns the JSON answer.
    /// Panics on a transport error or when the answer is not JSON.
    pub fn post(&self, path: &str, body: &str) -> Value {
        self.client()
            .post(path, body)
            .and_then(|r| r.json())
            .unwrap_or_else(|e| panic!("POST {path}: {e}"))
    }

    /// POSTs `body` as JSON and returns the JSON answer (panics like [`Server::post`]).
    pub fn post_json(&self, path: &str, body: &Value) -> Value {
        self.post(path, &body.to_string())
    }

    /// GETs `path` and returns the JSON answer (panics like [`Server::post`]).
    pub fn get(&self, path: &str) -> Value {
        self.client()
            .get(path)
            .and_then(|r| r.json())
            .unwrap_or_else(|e| panic!("GET {path}: {e}"))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// Where this test process keeps its SQLite demo files: under cargo's temp dir for integration
/// tests (`target/tmp`), not `/tmp`. The folders of earlier runs whose process has ended are
/// removed first, so nothing piles up.
pub fn demo_dir() -> PathBuf {
    let root = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let mine = format!("apijet-demo-it-{}", std::process::id());
    if let Ok(entries) = fs::read_dir(root) {
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(pid) = name.strip_prefix("apijet-demo-it-") else {
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
    dir
}

/// A database holding a fresh copy of the demo dataset, per engine.
pub fn demo_databases(test: &str) -> Vec<(&'static str, String)> {
    let exe = env!("CARGO_BIN_EXE_apijet");

    let mut out = Vec::new();
    let dir = demo_dir();
    let sqlite = format!("sqlite://{}", dir.join(format!("{test}.db")).display());
    out.push(("sqlite", sqlite));
    for engine in Engine::ALL {
        let Some(admin) = engine.url() else {
            skip(&format!(
                "{test}: {} not provided ({} unset): not run on it",
                engine.name(),
                engine.url_env()
            ));
            continue;
        };
        let args = engine.client_args().expect("client args");
        let db = &format!("apijet_it_{test}");
        let (client, sql) = match engine {
            Engine::Postgres => (
                "psql",
                format!("DROP DATABASE IF EXISTS {db}; CREATE DATABASE {db};"),
            ),
            Engine::Mysql => (
                "mariadb",
                format!(
                    "DROP DATABASE IF EXISTS {db}; CREATE DATABASE {db} CHARACTER SET utf8mb4;"
                ),
            ),
        };
        let mut cmd = Command::new(client);
        cmd.args(args.split_whitespace());
        match engine {
            Engine::Postgres => cmd
                .args(["-X", "-q", "-d", "postgres"])
                .args(sql.split_inclusive(';').flat_map(|s| ["-c", s.trim()])),
            Engine::Mysql => cmd.args(["-e", &sql]),
        };
        let status = cmd.status().expect("database client runs");
        assert!(status.success(), "creating {db} on {}", engine.name());
        out.push((engine.name(), with_database(&admin, db)));
    }
    for (name, url) in &out {
        let status = Command::new(exe)
            .args(["demo", "--db", url])
            .stdout(Stdio::null())
            .status()
            .expect("apijet demo runs");
        assert!(status.success(), "loading the demo dataset into {name}");
    }
    out
}

/// Runs `check` against a server with `config` on a fresh copy of the demo dataset, once per
/// engine the rig provides.
pub fn on_every_engine(test: &str, config: &str, check: impl Fn(&str, &Server)) {
    for (name, url) in demo_databases(test) {
        let server = Server::start(&url, config);
        check(name, &server);
    }
}

/// The APIJSON `code` of an answer (-1 when there is none).
pub fn code(v: &Value) -> i64 {
    v["code"].as_i64().unwrap_or(-1)
}

/// POSTs `body` with `c` and parses the answer.
pub fn post(c: &mut Client, path: &str, body: &Value) -> Value {
    c.post(path, &body.to_string())
        .expect("answer")
        .json()
        .expect("json")
}

/// A client that sends `Authorization: Bearer token` (`/metrics` behind `metrics_token`).
pub fn client_with_bearer(s: &Server, token: &str) -> Client {
    s.client().with_only_bearer(token)
}

/// A client logged in as Ada (user 82001 of the demo dataset).
pub fn ada(s: &Server) -> Client {
    let mut c = s.client();
    c.login("13000082001", "123456").expect("login");
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
pub fn apijson_demo_databases(test: &str) -> Vec<(&'static str, String)> {
    let Some(mysql_args) = Engine::Mysql.client_args() else {
        skip(&format!(
            "{test}: MariaDB not provided: the APIJSON demo database is not loaded"
        ));
        return Vec::new();
    };
    if !shared_dir().join("apijson").join("load-demo-db").exists() {
        skip(&format!(
            "{test}: ../shared/apijson/load-demo-db not found: the APIJSON demo database is not loaded"
        ));
        return Vec::new();
    }
    let database = format!("apijet_it_{test}");
    let psql_args = Engine::Postgres.client_args();
    load_demo_db(&database, &mysql_args, psql_args.as_deref()).expect("the APIJSON demo database");
    Engine::ALL
        .iter()
        .filter_map(|e| Some((e.name(), with_database(&e.url()?, &database))))
        .collect()
}
