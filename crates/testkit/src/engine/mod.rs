//! The database engines: their names and SQL spellings, database URLs, the servers the test rig
//! provides (`APIJET_TEST_*`, exported by `scripts/test.sh`), the bench's provisioning
//! ([`provision`]) and one SQL connection over the server's own drivers ([`DbConn`]).

mod conn;
pub mod provision;

pub use conn::DbConn;
pub use provision::{open, repo_root, Database, Provision};

use serde::{Deserialize, Serialize};
use std::process::{Command, Stdio};

/// A database engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Engine {
    /// PostgreSQL.
    #[value(name = "pg", alias = "postgres")]
    Postgres,
    /// MariaDB (or MySQL).
    #[value(name = "mariadb", alias = "mysql")]
    Mariadb,
    /// SQLite, embedded in apijet.
    Sqlite,
}

impl std::fmt::Display for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl Engine {
    /// The engines that run as servers of their own (the test rig provides one of each).
    pub const SERVERS: [Engine; 2] = [Engine::Postgres, Engine::Mariadb];

    pub fn name(self) -> &'static str {
        match self {
            Engine::Postgres => "postgres",
            Engine::Mariadb => "mariadb",
            Engine::Sqlite => "sqlite",
        }
    }

    /// Embedded in apijet's process: no server of its own, no port, no database name.
    pub fn embedded(self) -> bool {
        match self {
            Engine::Sqlite => true,
            Engine::Postgres | Engine::Mariadb => false,
        }
    }

    /// A quoted identifier (the demo tables are mixed-case: `"Moment"`, `` `Moment` ``).
    pub fn ident(self, name: &str) -> String {
        match self {
            Engine::Mariadb => format!("`{name}`"),
            Engine::Postgres | Engine::Sqlite => format!("\"{name}\""),
        }
    }

    /// String concatenation of SQL expressions.
    pub fn concat(self, parts: &[&str]) -> String {
        match self {
            Engine::Mariadb => format!("CONCAT({})", parts.join(", ")),
            Engine::Postgres | Engine::Sqlite => format!("({})", parts.join(" || ")),
        }
    }

    /// A positional parameter of a prepared statement (1-based).
    pub fn param(self, i: usize) -> String {
        match self {
            Engine::Postgres => format!("${i}"),
            Engine::Mariadb | Engine::Sqlite => "?".into(),
        }
    }

    /// The environment variable holding the rig's admin URL of this engine, e.g.
    /// `postgres://postgres@127.0.0.1:5432/postgres` (`None` for SQLite, which needs no server).
    pub fn url_env(self) -> Option<&'static str> {
        match self {
            Engine::Postgres => Some("APIJET_TEST_POSTGRES_URL"),
            Engine::Mariadb => Some("APIJET_TEST_MYSQL_URL"),
            Engine::Sqlite => None,
        }
    }

    /// The environment variable holding the command-line client's arguments (`psql` / `mariadb`).
    pub fn client_args_env(self) -> Option<&'static str> {
        match self {
            Engine::Postgres => Some("APIJET_TEST_PSQL_ARGS"),
            Engine::Mariadb => Some("APIJET_TEST_MYSQL_ARGS"),
            Engine::Sqlite => None,
        }
    }

    /// The rig's admin URL of this engine, when set and not empty.
    pub fn url(self) -> Option<String> {
        non_empty_env(self.url_env()?)
    }

    /// Arguments for `psql` / `mariadb` (`-h HOST -p PORT -U USER` / `-h HOST -P PORT -u USER`):
    /// from the environment, else derived from [`Engine::url`].
    pub fn client_args(self) -> Option<String> {
        if let Some(args) = non_empty_env(self.client_args_env()?) {
            return Some(args);
        }
        let url = UrlParts::parse(&self.url()?).ok()?;
        Some(match self {
            Engine::Postgres => format!(
                "-h {} -p {} -U {}",
                url.host,
                url.port.unwrap_or(5432),
                url.user
            ),
            _ => {
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

    /// Runs `sql` in `database` with the engine's command-line client (`psql` / `mariadb`) on
    /// the rig's server, and returns what it printed: rows one a line, columns tab-separated, no
    /// headers. Fails with the client's error output.
    pub fn cli(self, database: &str, sql: &str) -> Result<String, String> {
        let args = self.client_args().ok_or_else(|| {
            format!(
                "{self}: no server ({} unset)",
                self.url_env().unwrap_or("a file engine")
            )
        })?;
        let mut cmd = match self {
            Engine::Postgres => Command::new("psql"),
            _ => Command::new("mariadb"),
        };
        cmd.args(args.split_whitespace());
        match self {
            Engine::Postgres => {
                cmd.args([
                    "-X",
                    "-q",
                    "-A",
                    "-t",
                    "-v",
                    "ON_ERROR_STOP=1",
                    "-d",
                    database,
                ]);
                cmd.args(["-c", sql]);
                if let Some(pw) = self
                    .url()
                    .and_then(|u| UrlParts::parse(&u).ok())
                    .and_then(|u| u.password)
                {
                    cmd.env("PGPASSWORD", pw);
                }
            }
            _ => {
                cmd.args(["-N", "-B", "--default-character-set=utf8mb4", database]);
                cmd.args(["-e", sql]);
            }
        };
        let out = cmd
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("{self}: cannot run the command-line client: {e}"))?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(format!(
                "{self}: {} in {database} failed ({}): {}",
                crate::truncate(sql, 200),
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    }

    /// The database the rig's admin URL names (`postgres`, `mysql`): where to run statements
    /// that create or drop other databases.
    pub fn admin_database(self) -> &'static str {
        match self {
            Engine::Postgres => "postgres",
            Engine::Mariadb => "mysql",
            Engine::Sqlite => "",
        }
    }
}

fn non_empty_env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// The parts of `scheme://user[:password]@host[:port]/database[?query]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UrlParts {
    pub scheme: String,
    pub user: String,
    pub password: Option<String>,
    /// Without the brackets of an IPv6 address.
    pub host: String,
    pub port: Option<u16>,
    pub database: String,
    /// `?…` when the URL has a query, else empty.
    pub query: String,
}

impl UrlParts {
    pub fn parse(url: &str) -> Result<UrlParts, String> {
        let (scheme, rest) = url
            .split_once("://")
            .ok_or_else(|| format!("not a database URL: {url}"))?;
        let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, tail) = rest.split_at(authority_end);
        let (path, query) = match tail.find('?') {
            Some(i) => (&tail[..i], &tail[i..]),
            None => (tail, ""),
        };
        let (userinfo, hostport) = authority.rsplit_once('@').unwrap_or(("", authority));
        let (user, password) = match userinfo.split_once(':') {
            Some((u, p)) => (u.to_string(), Some(p.to_string())),
            None => (userinfo.to_string(), None),
        };
        // `[::1]:5432`: the port follows the bracket.
        let port_sep = if hostport.starts_with('[') {
            hostport.rfind("]:").map(|i| i + 1)
        } else {
            hostport.rfind(':')
        };
        let (host, port) = match port_sep {
            Some(i) => (
                &hostport[..i],
                Some(
                    hostport[i + 1..]
                        .parse()
                        .map_err(|_| format!("bad port in {url}"))?,
                ),
            ),
            None => (hostport, None),
        };
        Ok(UrlParts {
            scheme: scheme.to_string(),
            user,
            password,
            host: host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_string(),
            port,
            database: path.trim_start_matches('/').to_string(),
            query: query.to_string(),
        })
    }

    /// The URL again, naming `database` (the query is kept).
    pub fn with_database(&self, database: &str) -> String {
        let mut s = format!("{}://{}", self.scheme, self.user);
        if let Some(p) = &self.password {
            s.push(':');
            s.push_str(p);
        }
        if !self.user.is_empty() || self.password.is_some() {
            s.push('@');
        }
        if self.host.contains(':') {
            s.push_str(&format!("[{}]", self.host));
        } else {
            s.push_str(&self.host);
        }
        if let Some(p) = self.port {
            s.push_str(&format!(":{p}"));
        }
        s.push('/');
        s.push_str(database);
        s.push_str(&self.query);
        s
    }
}

/// `url` with its database replaced by `database` (any `?query` is kept); `url` unchanged when
/// it is not a database URL.
pub fn with_database(url: &str, database: &str) -> String {
    UrlParts::parse(url).map_or_else(|_| url.to_string(), |p| p.with_database(database))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_parts_round_trip() {
        let p = UrlParts::parse("postgres://postgres@127.0.0.1:5433/postgres").expect("parse");
        assert_eq!(p.host, "127.0.0.1");
        assert_eq!(p.port, Some(5433));
        assert_eq!(p.user, "postgres");
        assert_eq!(p.with_database("b"), "postgres://postgres@127.0.0.1:5433/b");
        let p = UrlParts::parse("mysql://root:pw@localhost/mysql").expect("parse");
        assert_eq!(p.password.as_deref(), Some("pw"));
        assert_eq!(p.port, None);
        assert_eq!(p.with_database("x"), "mysql://root:pw@localhost/x");
    }

    #[test]
    fn url_parts_keep_the_query_and_ipv6_brackets() {
        let p = UrlParts::parse("postgres://u@[::1]:5433/a?sslmode=disable").expect("parse");
        assert_eq!((p.host.as_str(), p.port), ("::1", Some(5433)));
        assert_eq!(p.database, "a");
        assert_eq!(
            with_database("postgres://u@[::1]:5433/a?sslmode=disable", "b"),
            "postgres://u@[::1]:5433/b?sslmode=disable"
        );
        assert!(UrlParts::parse("mysql://root@h:port/x").is_err());
    }
}
