//! What a failed connection at start-up means. The drivers say "Connection refused" or
//! "password missing" without naming the server; these messages name the engine, the host and
//! port, the database and the user, and say what to check.

use crate::ExecError;
use apijet_core::Engine;
use std::path::Path;

/// Where a server URL points: enough to name it in a message (never its password).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Target {
    engine: Engine,
    /// `host:port` of each host, with the engine's default port where the URL gives none.
    hosts: Vec<String>,
    database: Option<String>,
    user: Option<String>,
}

/// What went wrong, as far as the driver's text tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cause {
    Refused,
    UnknownHost,
    NoAnswer,
    PasswordMissing,
    AuthFailed,
    UnknownUser,
    NoDatabase,
    Other,
}

fn engine_name(engine: Engine) -> &'static str {
    match engine {
        Engine::Sqlite => "SQLite",
        Engine::Postgres => "PostgreSQL",
        Engine::MySql => "MySQL/MariaDB",
    }
}

fn scheme(engine: Engine) -> &'static str {
    match engine {
        Engine::Sqlite => "sqlite",
        Engine::Postgres => "postgres",
        Engine::MySql => "mysql",
    }
}

impl Target {
    /// The parts of `scheme://[user[:password]@]host[:port][,host[:port]…][/database][?…]`.
    pub(crate) fn of(engine: Engine, url: &str) -> Target {
        let default_port = match engine {
            Engine::Postgres => 5432,
            _ => 3306,
        };
        let rest = url.split_once("://").map_or(url, |(_, r)| r);
        let end = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, tail) = rest.split_at(end);
        let (userinfo, hosts) = authority.rsplit_once('@').unwrap_or(("", authority));
        let user = userinfo
            .split(':')
            .next()
            .filter(|u| !u.is_empty())
            .map(percent_decoded);
        let hosts = hosts
            .split(',')
            .map(|h| {
                let has_port = match h.rfind(']') {
                    Some(close) => h[close..].contains(':'),
                    None => h.contains(':'),
                };
                if has_port {
                    h.to_string()
                } else {
                    format!("{h}:{default_port}")
                }
            })
            .collect();
        let database = tail
            .strip_prefix('/')
            .map(|d| d.split('?').next().unwrap_or(d))
            .filter(|d| !d.is_empty())
            .map(percent_decoded);
        Target {
            engine,
            hosts,
            database,
            user,
        }
    }

    /// `PostgreSQL at 127.0.0.1:5432 (database "app", user "web")`.
    fn describe(&self) -> String {
        let database = match (&self.database, self.engine, &self.user) {
            (Some(d), _, _) => format!("database \"{d}\""),
            (None, Engine::Postgres, Some(u)) => format!("database \"{u}\" (the user's name)"),
            _ => "no database named".into(),
        };
        let user = self
            .user
            .as_deref()
            .map_or_else(|| "no user named".into(), |u| format!("user \"{u}\""));
        format!(
            "{} at {} ({database}, {user})",
            engine_name(self.engine),
            self.hosts.join(", ")
        )
    }

    /// The start-up error of a connection that failed with the driver's `cause`.
    pub(crate) fn failure(&self, cause: &str) -> ExecError {
        self.failures(&[(self.hosts.join(","), cause.to_string())])
    }

    /// The start-up error when every host failed: `(host, the driver's words)` per host.
    pub(crate) fn failures(&self, causes: &[(String, String)]) -> ExecError {
        let first = causes.first().map_or("", |(_, c)| c.as_str());
        let kind = classify(first);
        let mut text = format!(
            "{}: {}.\n  {}",
            self.describe(),
            what(kind),
            self.hint(kind)
        );
        for (host, cause) in causes {
            let said = plain(cause);
            if causes.len() > 1 {
                text.push_str(&format!("\n  {host}: {said}"));
            } else {
                text.push_str(&format!("\n  The driver said: {said}"));
            }
        }
        ExecError::Connect(text)
    }

    /// The error of a URL the driver cannot read.
    pub(crate) fn bad_url(&self, cause: &str) -> ExecError {
        let s = scheme(self.engine);
        ExecError::Connect(format!(
            "the {} URL is not valid ({}): write it as {s}://USER[:PASSWORD]@HOST[:PORT]/DATABASE, \
             with special characters in the password percent-encoded",
            engine_name(self.engine),
            plain(cause)
        ))
    }

    fn hint(&self, kind: Cause) -> String {
        let engine = engine_name(self.engine);
        let s = scheme(self.engine);
        let first = self.hosts.first().map_or("", String::as_str);
        let (host, port) = first.rsplit_once(':').unwrap_or((first, ""));
        let user = self.user.as_deref().unwrap_or("USER");
        let database = self.database.as_deref().unwrap_or("DATABASE");
        match (kind, self.engine) {
            (Cause::Refused, Engine::Postgres) => format!(
                "Check that {engine} is running on {host} and listening on port {port} (`port` \
                 and `listen_addresses` in postgresql.conf), and that the URL names the right \
                 host and port."
            ),
            (Cause::Refused, _) => format!(
                "Check that {engine} is running on {host} and listening on port {port} (`port` \
                 and `bind-address` in its configuration; `skip-networking` must be off), and \
                 that the URL names the right host and port."
            ),
            (Cause::UnknownHost, _) => format!(
                "The host name {host} cannot be resolved: check its spelling in the URL, or give \
                 an IP address."
            ),
            (Cause::NoAnswer, _) => format!(
                "Nothing answered as a {engine} server at {host}:{port}: check the host and port \
                 in the URL, and any firewall between."
            ),
            (Cause::PasswordMissing, _) => format!(
                "The server asks for a password and the URL has none: give it as \
                 {s}://{user}:PASSWORD@{first}/{database} (percent-encode special characters)."
            ),
            (Cause::AuthFailed, Engine::Postgres) => format!(
                "Check the user name and password in the URL, and the server's pg_hba.conf \
                 entry for user \"{user}\" from this host."
            ),
            (Cause::AuthFailed, _) => format!(
                "Check the user name and password in the URL, and that \"{user}\" may connect \
                 from this host (the host part of CREATE USER '{user}'@'HOST')."
            ),
            (Cause::UnknownUser, _) => format!(
                "There is no user \"{user}\" on that server: check the user name in the URL (as \
                 an administrator: CREATE ROLE \"{user}\" LOGIN PASSWORD '…')."
            ),
            (Cause::NoDatabase, Engine::Postgres) => format!(
                "Create it first (createdb {database}, or CREATE DATABASE \"{database}\") or \
                 name an existing database in the URL; `apijet demo --db URL` then loads the \
                 demo dataset into it if you want one."
            ),
            (Cause::NoDatabase, _) => format!(
                "Create it first (CREATE DATABASE `{database}` CHARACTER SET utf8mb4) or name an \
                 existing database in the URL; `apijet demo --db URL` then loads the demo \
                 dataset into it if you want one."
            ),
            (Cause::Other, _) => format!(
                "Check the URL ({s}://USER[:PASSWORD]@HOST[:PORT]/DATABASE) and that the server \
                 accepts connections from this host."
            ),
        }
    }
}

/// One line on what happened.
fn what(kind: Cause) -> &'static str {
    match kind {
        Cause::Refused => "the connection was refused",
        Cause::UnknownHost => "the host name is unknown",
        Cause::NoAnswer => "the server did not answer",
        Cause::PasswordMissing => "a password is required",
        Cause::AuthFailed => "the user name or password was refused",
        Cause::UnknownUser => "no such user",
        Cause::NoDatabase => "the database does not exist",
        Cause::Other => "the connection failed",
    }
}

fn classify(cause: &str) -> Cause {
    let c = cause.to_ascii_lowercase();
    if c.contains("connection refused") {
        Cause::Refused
    } else if c.contains("lookup address")
        || c.contains("name or service not known")
        || c.contains("no address associated")
        || c.contains("nodename nor servname")
    {
        Cause::UnknownHost
    } else if c.contains("timed out")
        || c.contains("timeout")
        || c.contains("bytes remaining on stream")
        || c.contains("unexpected eof")
        || c.contains("connection reset")
        || c.contains("no route to host")
        || c.contains("network is unreachable")
    {
        Cause::NoAnswer
    } else if c.contains("password missing") || c.contains("(using password: no)") {
        Cause::PasswordMissing
    } else if c.contains("password authentication failed")
        || c.contains("access denied for user")
        || c.contains("authentication failed")
    {
        Cause::AuthFailed
    } else if c.contains("role \"") && c.contains("does not exist") {
        Cause::UnknownUser
    } else if (c.contains("database \"") && c.contains("does not exist"))
        || c.contains("unknown database")
    {
        Cause::NoDatabase
    } else {
        Cause::Other
    }
}

/// The driver's words without the wrappers that add nothing ("Error occurred while creating a
/// new object: …", a repeated "Input/output error: ").
fn plain(cause: &str) -> String {
    let mut text = cause
        .trim()
        .trim_start_matches("Error occurred while creating a new object: ")
        .to_string();
    while text.contains("Input/output error: Input/output error: ") {
        text = text.replace(
            "Input/output error: Input/output error: ",
            "Input/output error: ",
        );
    }
    text
}

fn percent_decoded(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The start-up error of a SQLite file that cannot be opened as a database.
pub(crate) fn sqlite_failure(path: &str, cause: &str) -> ExecError {
    let file = Path::new(path);
    let dir = match file.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let lower = cause.to_ascii_lowercase();
    let (what, hint) = if file.is_dir() {
        (
            "it is a directory".to_string(),
            format!(
                "Give a file path, e.g. sqlite://{}/apijet.db.",
                path.trim_end_matches('/')
            ),
        )
    } else if !dir.is_dir() {
        (
            format!("the directory {} does not exist", dir.display()),
            format!(
                "Create it first (mkdir -p {}) or give another path; a missing file in an \
                 existing directory is created with the demo dataset.",
                dir.display()
            ),
        )
    } else if lower.contains("not a database") || lower.contains("file is encrypted") {
        (
            "the file exists but is not a SQLite database".to_string(),
            "Give the path of a SQLite database, or of a file that does not exist yet (it is \
             created with the demo dataset)."
                .to_string(),
        )
    } else if lower.contains("unable to open")
        || lower.contains("readonly")
        || lower.contains("read-only")
        || lower.contains("permission")
    {
        (
            "it cannot be opened for writing".to_string(),
            format!(
                "Check that this user may read and write the file and its directory {} (SQLite \
                 writes its -wal and -shm files beside it).",
                dir.display()
            ),
        )
    } else {
        (
            "it cannot be opened".to_string(),
            "Check the path in the URL (sqlite://PATH).".to_string(),
        )
    };
    let said = cause
        .strip_prefix(path)
        .map_or(cause, |c| c.trim_start_matches(": "));
    ExecError::Connect(format!(
        "SQLite file {path}: {what}.\n  {hint}\n  The driver said: {}",
        plain(said)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(e: ExecError) -> String {
        e.to_string()
    }

    #[test]
    fn targets_name_engine_hosts_database_and_user_but_no_password() {
        let t = Target::of(
            Engine::Postgres,
            "postgres://web:s3cret@db1,db2:5433/app?x=1",
        );
        assert_eq!(t.hosts, ["db1:5432", "db2:5433"]);
        assert_eq!(t.database.as_deref(), Some("app"));
        assert_eq!(t.user.as_deref(), Some("web"));
        let m = text(t.failure("error connecting to server: Connection refused (os error 111)"));
        assert!(
            m.contains("PostgreSQL at db1:5432, db2:5433 (database \"app\", user \"web\")"),
            "{m}"
        );
        assert!(m.contains("refused") && m.contains("port 5432"), "{m}");
        assert!(!m.contains("s3cret"), "{m}");
        let my = Target::of(Engine::MySql, "mysql://root@[::1]/x");
        assert_eq!(my.hosts, ["[::1]:3306"]);
    }

    #[test]
    fn each_cause_says_what_to_check() {
        let t = Target::of(Engine::MySql, "mysql://app@127.0.0.1:3306/shop");
        for (driver, says) in [
            (
                "Server error: `ERROR 28000 (1045): Access denied for user 'app'@'127.0.0.1' (using password: NO)'",
                "mysql://app:PASSWORD@127.0.0.1:3306/shop",
            ),
            (
                "Server error: `ERROR 28000 (1045): Access denied for user 'app'@'127.0.0.1' (using password: YES)'",
                "user name and password",
            ),
            (
                "Server error: `ERROR 42000 (1049): Unknown database 'shop''",
                "CREATE DATABASE `shop`",
            ),
            ("failed to lookup address information", "cannot be resolved"),
        ] {
            let m = text(t.failure(driver));
            assert!(m.contains(says), "{driver}: {m}");
            assert!(m.contains("MySQL/MariaDB at 127.0.0.1:3306"), "{m}");
        }
        let pg = Target::of(Engine::Postgres, "postgres://nobody@h/x");
        let m = text(pg.failure("db error: FATAL: role \"nobody\" does not exist"));
        assert!(m.contains("no such user"), "{m}");
        let m = text(pg.failure("invalid configuration: password missing"));
        assert!(m.contains("a password is required"), "{m}");
    }
}
