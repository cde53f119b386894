//! The databases `apijet bench` runs against: throwaway servers started through
//! `scripts/lib/db.sh` (the helper `scripts/test.sh` uses too), servers given by URL, or a
//! SQLite file in the output directory.

use super::{DbConn, Engine, UrlParts};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A started or given database, with what the server and the baselines need to reach it.
pub struct Database {
    pub engine: Engine,
    /// The URL apijet serves: `postgres://…/DB`, `mysql://…/DB`, `sqlite://PATH`.
    pub url: String,
    /// `SELECT version()` of the server (SQLite: the library version).
    pub version: String,
    /// Connection parts for the command-line clients.
    pub host: String,
    pub port: u16,
    pub user: String,
    pub password: Option<String>,
    /// The database (schema) name, or the SQLite file.
    pub name: String,
    /// The durability settings in force, for the report (e.g. "fsync=on synchronous_commit=on").
    pub durability: String,
    /// How it was provisioned, e.g. "throwaway (scripts/lib/db.sh)".
    pub origin: String,
    /// Held for its `Drop`, which stops the server.
    _throwaway: Option<Throwaway>,
}

/// A server started by us; stopped when dropped.
struct Throwaway {
    dir: PathBuf,
    repo: PathBuf,
    env: Vec<(String, String)>,
}

impl Drop for Throwaway {
    fn drop(&mut self) {
        // db.sh keeps its state in shell globals; they come back from the environment.
        let _ = Command::new("bash")
            .arg("-c")
            .arg(
                "source scripts/lib/db.sh; DB_PG_BIN=${BENCH_PG_BIN:-}; DB_PG_DATA=${BENCH_PG_DATA:-}; \
                 DB_MY_PID=${BENCH_MY_PID:-}; db_stop_all",
            )
            .current_dir(&self.repo)
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .status();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The repository root (holding `scripts/lib/db.sh`): from the working directory up, else from
/// the executable's directory up, else where this crate was built.
pub fn repo_root() -> Option<PathBuf> {
    let has = |d: &Path| d.join("scripts/lib/db.sh").is_file();
    let mut starts = Vec::new();
    if let Ok(d) = std::env::current_dir() {
        starts.push(d);
    }
    if let Ok(e) = std::env::current_exe() {
        starts.push(e);
    }
    starts.push(Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf());
    starts
        .iter()
        .flat_map(|s| s.ancestors())
        .find(|d| has(d))
        .map(Path::to_path_buf)
}

/// Where the databases come from.
pub struct Provision<'a> {
    pub postgres_url: Option<&'a str>,
    pub mysql_url: Option<&'a str>,
    /// The database created (dropped first) inside a server: e.g. `apijet_bench`.
    pub database: &'a str,
    /// Where the SQLite file goes.
    pub data_dir: &'a Path,
    /// Turn durable commits back on in throwaway servers (db.sh starts them with fsync off).
    pub durable: bool,
}

/// Opens (creating anew) the bench database of `engine`.
pub async fn open(engine: Engine, p: &Provision<'_>) -> Result<Database, String> {
    match engine {
        Engine::Sqlite => {
            std::fs::create_dir_all(p.data_dir)
                .map_err(|e| format!("cannot create {}: {e}", p.data_dir.display()))?;
            let path = p.data_dir.join(format!("{}.sqlite", p.database));
            for suffix in ["", "-wal", "-shm"] {
                let f = PathBuf::from(format!("{}{suffix}", path.display()));
                if f.exists() {
                    std::fs::remove_file(&f)
                        .map_err(|e| format!("cannot remove {}: {e}", f.display()))?;
                }
            }
            Ok(Database {
                engine,
                url: format!("sqlite://{}", path.display()),
                version: format!("SQLite {}", rusqlite::version()),
                host: String::new(),
                port: 0,
                user: String::new(),
                password: None,
                name: path.display().to_string(),
                durability: "journal_mode=WAL, synchronous=FULL (as apijet opens it)".into(),
                origin: "file in the output directory".into(),
                _throwaway: None,
            })
        }
        Engine::Postgres | Engine::Mariadb => {
            let given = match engine {
                Engine::Postgres => p.postgres_url,
                _ => p.mysql_url,
            };
            let (admin_url, throwaway, origin) = match given {
                Some(u) => (u.to_string(), None, "given by URL".to_string()),
                None => {
                    let (url, t) = start_throwaway(engine, p.durable)?;
                    (url, Some(t), "throwaway (scripts/lib/db.sh)".to_string())
                }
            };
            let parts = UrlParts::parse(&admin_url)?;
            let mut admin = DbConn::connect(engine, &admin_url).await?;
            let db = p.database;
            let version = match engine {
                Engine::Postgres => {
                    admin
                        .batch(&format!("DROP DATABASE IF EXISTS {db}"))
                        .await?;
                    admin.batch(&format!("CREATE DATABASE {db}")).await?;
                    // Without synchronized scans every LIMIT N without ORDER BY reads the
                    // first N rows in physical order, for apijet and psql alike.
                    admin
                        .batch(&format!(
                            "ALTER DATABASE {db} SET synchronize_seqscans = off"
                        ))
                        .await?;
                    admin.text("SHOW server_version").await?
                }
                _ => {
                    admin
                        .batch(&format!("DROP DATABASE IF EXISTS {db}"))
                        .await?;
                    admin
                        .batch(&format!("CREATE DATABASE {db} CHARACTER SET utf8mb4"))
                        .await?;
                    // 512-client baselines need more than the default 151 connections; a
                    // given server may refuse (no SUPER): the report then notes the cap.
                    let _ = admin.batch("SET GLOBAL max_connections = 1000").await;
                    if throwaway.is_some() {
                        let flush = if p.durable { 1 } else { 0 };
                        admin
                            .batch(&format!(
                                "SET GLOBAL innodb_flush_log_at_trx_commit = {flush}"
                            ))
                            .await?;
                    }
                    admin.text("SELECT VERSION()").await?
                }
            };
            let durability = match engine {
                Engine::Postgres => {
                    let mut parts = Vec::new();
                    for k in [
                        "fsync",
                        "synchronous_commit",
                        "full_page_writes",
                        "shared_buffers",
                    ] {
                        parts.push(format!("{k}={}", admin.text(&format!("SHOW {k}")).await?));
                    }
                    parts.join(" ")
                }
                _ => format!(
                    "innodb_flush_log_at_trx_commit={} innodb_buffer_pool_size={}MiB",
                    admin
                        .text("SELECT @@innodb_flush_log_at_trx_commit")
                        .await?,
                    admin.count("SELECT @@innodb_buffer_pool_size").await? / (1 << 20)
                ),
            };
            let name = match engine {
                Engine::Postgres => "PostgreSQL",
                _ => "MariaDB",
            };
            Ok(Database {
                engine,
                url: parts.with_database(db),
                version: format!("{name} {}", version.split_whitespace().next().unwrap_or("")),
                host: parts.host.clone(),
                port: parts.port.unwrap_or(match engine {
                    Engine::Postgres => 5432,
                    _ => 3306,
                }),
                user: parts.user.clone(),
                password: parts.password.clone(),
                name: db.to_string(),
                durability,
                origin,
                _throwaway: throwaway,
            })
        }
    }
}

/// Starts a server with `scripts/lib/db.sh` (installing the packages with apt-get when missing
/// and we are root), raising `max_connections` to 1000 so the baselines can open as many
/// connections as the HTTP clients do. Returns an admin URL.
fn start_throwaway(engine: Engine, durable: bool) -> Result<(String, Throwaway), String> {
    let repo = repo_root().ok_or(
        "cannot find scripts/lib/db.sh (run from the apijet repository, or give --postgres-url / --mysql-url)",
    )?;
    let dir = std::env::temp_dir().join(format!(
        "apijet-bench-{}-{}",
        engine.name(),
        std::process::id()
    ));
    // Under /tmp and world-readable: the `postgres` user must reach it.
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let script = match engine {
        Engine::Postgres => {
            r#"set -e
source scripts/lib/db.sh
db_install_missing 1 0 >&2
db_start_postgres "$BENCH_DIR" >&2
# db.sh starts PostgreSQL with fsync off and 100 connections; restart it with room for
# 512-client baselines and, unless --no-durable, durable commits (the insert scenario is about
# saving fsyncs). Options given with -o replace db.sh's, so they are all repeated here.
db_as_pg "$DB_PG_BIN/pg_ctl" -D "$DB_PG_DATA" -l "$BENCH_DIR/pg/server.log" -w -t 60 -m fast restart \
  -o "-p $DB_PG_PORT -c listen_addresses=127.0.0.1 -c unix_socket_directories=$BENCH_DIR/pg -c fsync=$BENCH_ONOFF -c synchronous_commit=$BENCH_ONOFF -c full_page_writes=$BENCH_ONOFF -c max_connections=1000 -c TimeZone=UTC" >/dev/null
echo "PORT=$DB_PG_PORT"; echo "BENCH_PG_BIN=$DB_PG_BIN"; echo "BENCH_PG_DATA=$DB_PG_DATA"
"#
        }
        _ => {
            r#"set -e
source scripts/lib/db.sh
db_install_missing 0 1 >&2
db_start_mariadb "$BENCH_DIR" >&2
echo "PORT=$DB_MY_PORT"; echo "BENCH_MY_PID=$DB_MY_PID"
"#
        }
    };
    eprintln!("[bench] {}: starting a throwaway server", engine.name());
    let out = Command::new("bash")
        .arg("-c")
        .arg(script)
        .current_dir(&repo)
        .env("BENCH_DIR", &dir)
        .env("BENCH_ONOFF", if durable { "on" } else { "off" })
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot run bash: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let mut env = Vec::new();
    let mut port = None;
    for line in text.lines() {
        if let Some((k, v)) = line.split_once('=') {
            if k == "PORT" {
                port = v.trim().parse::<u16>().ok();
            } else {
                env.push((k.to_string(), v.trim().to_string()));
            }
        }
    }
    let t = Throwaway { dir, repo, env };
    if !out.status.success() {
        return Err(format!(
            "{}: starting the throwaway server failed",
            engine.name()
        ));
    }
    let port = port.ok_or_else(|| format!("{}: db.sh printed no port", engine.name()))?;
    let url = match engine {
        Engine::Postgres => format!("postgres://postgres@127.0.0.1:{port}/postgres"),
        _ => format!("mysql://root@127.0.0.1:{port}/mysql"),
    };
    Ok((url, t))
}
