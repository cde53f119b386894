//! The baselines that are other programs or read whole results: pgbench, the engines'
//! command-line clients timing a big read to /dev/null, and our raw client reading the same rows.

use crate::load::Measured;
use crate::stats::summarize_us;
use crate::tools::Tool;
use apijet_testkit::engine::{Database, DbConn, Engine};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Runs pgbench with `script` (`-M prepared`, closed loop) and reads every transaction's
/// latency from its `-l` log.
pub async fn run_pgbench(
    tool: &Tool,
    db: &Database,
    script: &str,
    clients: usize,
    duration: Duration,
    work: &Path,
) -> Result<Measured, String> {
    let dir = work.join(format!("pgbench-{clients}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let file = dir.join("script.sql");
    std::fs::write(&file, script).map_err(|e| format!("cannot write {}: {e}", file.display()))?;
    let threads = clients.clamp(1, 2);
    let mut cmd = Command::new(&tool.path);
    cmd.args(["-n", "-M", "prepared", "-l"])
        .arg(format!("--log-prefix={}", dir.join("log").display()))
        .arg("-c")
        .arg(clients.to_string())
        .arg("-j")
        .arg(threads.to_string())
        .arg("-T")
        .arg(duration.as_secs().max(1).to_string())
        .arg("-f")
        .arg(&file)
        .arg("-h")
        .arg(&db.host)
        .arg("-p")
        .arg(db.port.to_string())
        .arg("-U")
        .arg(&db.user)
        .arg(&db.name)
        .current_dir(&dir)
        .env("PGGSSENCMODE", "disable")
        .env("PGSSLMODE", "disable");
    if let Some(pw) = &db.password {
        cmd.env("PGPASSWORD", pw);
    }
    let out = tokio::task::spawn_blocking(move || cmd.stdin(Stdio::null()).output())
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| format!("cannot run pgbench: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    if !out.status.success() {
        return Err(format!(
            "pgbench failed ({}): {}{}",
            out.status,
            text.trim(),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let tps = text
        .lines()
        .find(|l| l.starts_with("tps = "))
        .and_then(|l| l["tps = ".len()..].split_whitespace().next())
        .and_then(|v| v.parse::<f64>().ok())
        .ok_or_else(|| format!("pgbench printed no tps:\n{text}"))?;
    let failed = text
        .lines()
        .find_map(|l| l.strip_prefix("number of failed transactions: "))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0);
    // Log lines: client_id transaction_no time_us script_no epoch epoch_us [lag].
    let mut lat = Vec::new();
    let entries = std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for entry in entries.flatten() {
        if !entry.file_name().to_string_lossy().starts_with("log") {
            continue;
        }
        let body = std::fs::read_to_string(entry.path()).unwrap_or_default();
        lat.extend(
            body.lines()
                .filter_map(|l| l.split_whitespace().nth(2)?.parse::<u64>().ok()),
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
    let samples = lat.len() as u64 + failed;
    Ok(Measured {
        samples,
        errors: failed,
        latency: summarize_us(&mut lat),
        req_s: tps,
        bytes_s: 0.0,
        tool: format!(
            "{} -M prepared -c {clients} -j {threads}, closed loop",
            tool.version
        ),
        mode: "closed",
    })
}

/// Runs a command with stdout to /dev/null and returns its wall time.
pub async fn time_command(mut cmd: Command) -> Result<Duration, String> {
    let t = tokio::task::spawn_blocking(move || {
        let t0 = Instant::now();
        let out = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output();
        (t0.elapsed(), out)
    })
    .await
    .map_err(|e| e.to_string())?;
    let out =
        t.1.map_err(|e| format!("cannot run the baseline client: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "the baseline client failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(t.0)
}

/// The engine's own client reading the result of `select` to stdout, when installed.
pub fn client_reader(
    db: &Database,
    psql: Option<&Tool>,
    mariadb: Option<&Tool>,
    sqlite3: Option<&Tool>,
    select: &str,
) -> Option<(Command, String)> {
    match db.engine {
        Engine::Postgres => {
            let t = psql?;
            let mut c = Command::new(&t.path);
            c.args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", &db.host, "-p"])
                .arg(db.port.to_string())
                .args(["-U", &db.user, "-d", &db.name, "-c"])
                .arg(format!("COPY ({select}) TO STDOUT"))
                .env("PGGSSENCMODE", "disable")
                .env("PGSSLMODE", "disable");
            if let Some(pw) = &db.password {
                c.env("PGPASSWORD", pw);
            }
            Some((c, "psql COPY … TO STDOUT > /dev/null".into()))
        }
        Engine::Mariadb => {
            let t = mariadb?;
            let mut c = Command::new(&t.path);
            c.args(["--no-defaults", "--quick", "-N", "-B", "-h", &db.host, "-P"])
                .arg(db.port.to_string())
                .args(["-u", &db.user]);
            if let Some(pw) = &db.password {
                c.arg(format!("--password={pw}"));
            }
            c.arg(&db.name).arg("-e").arg(select);
            Some((c, "mariadb --quick -N -B > /dev/null".into()))
        }
        Engine::Sqlite => {
            let t = sqlite3?;
            let mut c = Command::new(&t.path);
            c.arg("-readonly").arg(&db.name).arg(select);
            Some((c, "sqlite3 CLI > /dev/null".into()))
        }
    }
}

/// Fallback list baseline when the engine's client is not installed: the raw driver reading
/// every row and column (as text) through one connection.
pub async fn raw_read(db: &Database, select: &str) -> Result<Duration, String> {
    let mut conn = DbConn::connect(db.engine, &db.url).await?;
    let t0 = Instant::now();
    match &mut conn {
        DbConn::Pg(c) => {
            let _ = c.simple_query(select).await.map_err(|e| e.to_string())?;
        }
        DbConn::My(c) => {
            use mysql_async::prelude::Queryable;
            let mut r = c.query_iter(select).await.map_err(|e| e.to_string())?;
            r.for_each(|_| {}).await.map_err(|e| e.to_string())?;
        }
        DbConn::Lite(c) => {
            tokio::task::block_in_place(|| -> rusqlite::Result<()> {
                let mut stmt = c.prepare(select)?;
                let n = stmt.column_count();
                let mut rows = stmt.query([])?;
                while let Some(r) = rows.next()? {
                    for i in 0..n {
                        let _ = r.get_ref(i)?;
                    }
                }
                Ok(())
            })
            .map_err(|e| e.to_string())?;
        }
    }
    Ok(t0.elapsed())
}
