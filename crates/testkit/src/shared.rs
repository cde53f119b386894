//! The reference material beside the repository (`../shared`) and its loader of the APIJSON
//! demo database (`../shared/apijson/load-demo-db`).

use std::path::PathBuf;
use std::process::{Command, Stdio};

use crate::engine::{repo_root, Engine, UrlParts};

/// `<repo>/../shared`, or `APIJET_SHARED_DIR` (a checkout that does not sit beside it).
pub fn dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("APIJET_SHARED_DIR") {
        return PathBuf::from(dir);
    }
    repo_root()
        .unwrap_or_else(|| PathBuf::from("."))
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
    let loader = dir().join("apijson").join("load-demo-db");
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
            .and_then(|u| UrlParts::parse(&u).ok())
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
