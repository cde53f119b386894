//! External programs the kit may use, found once at start: the load generators (oha, wrk) and
//! the engines' own clients used as baselines (psql, pgbench, mariadb, sqlite3). Each is
//! optional; what is missing is replaced by a fallback that says so in the report.

use std::path::{Path, PathBuf};
use std::process::Command;

/// One program: where it is and the version it reports.
#[derive(Clone, Debug)]
pub struct Tool {
    pub path: PathBuf,
    pub version: String,
}

/// Every program the kit may call.
#[derive(Clone, Debug, Default)]
pub struct Tools {
    pub oha: Option<Tool>,
    pub wrk: Option<Tool>,
    pub psql: Option<Tool>,
    pub pgbench: Option<Tool>,
    pub mariadb: Option<Tool>,
    pub sqlite3: Option<Tool>,
}

impl Tools {
    pub fn detect() -> Tools {
        Tools {
            oha: find("oha", &["--version"]),
            wrk: find("wrk", &["-v"]),
            psql: find("psql", &["--version"]),
            pgbench: find("pgbench", &["--version"]),
            mariadb: find("mariadb", &["--version"]),
            sqlite3: find("sqlite3", &["--version"]),
        }
    }
}

/// `name` on `PATH`, else in `~/.cargo/bin` (where `cargo install oha` puts it).
pub fn which(name: &str) -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    if let Some(home) = std::env::var_os("HOME") {
        dirs.push(Path::new(&home).join(".cargo").join("bin"));
    }
    dirs.into_iter().map(|d| d.join(name)).find(|p| p.is_file())
}

fn find(name: &str, version_args: &[&str]) -> Option<Tool> {
    let path = which(name)?;
    let out = Command::new(&path).args(version_args).output().ok()?;
    // wrk prints its version on stdout and exits 1; the others exit 0.
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    let version = text.lines().next().unwrap_or(name).trim().to_string();
    Some(Tool { path, version })
}
