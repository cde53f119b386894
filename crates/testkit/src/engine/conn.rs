//! One plain SQL connection over the drivers the server itself uses, for data generation,
//! the bench's raw baselines and the tests that look at what the server stored.

use super::Engine;
use crate::truncate;

/// One plain SQL connection over the drivers apijet uses.
pub enum DbConn {
    Pg(tokio_postgres::Client),
    My(mysql_async::Conn),
    Lite(rusqlite::Connection),
}

impl DbConn {
    /// Connects to `url` (`sqlite://PATH` opens or creates the file).
    pub async fn connect(engine: Engine, url: &str) -> Result<DbConn, String> {
        match engine {
            Engine::Postgres => {
                let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
                    .await
                    .map_err(|e| format!("cannot connect to {url}: {e}"))?;
                tokio::spawn(async move {
                    let _ = conn.await;
                });
                Ok(DbConn::Pg(client))
            }
            Engine::Mariadb => {
                let opts = mysql_async::Opts::from_url(url)
                    .map_err(|e| format!("bad MySQL URL {url}: {e}"))?;
                let conn = mysql_async::Conn::new(opts)
                    .await
                    .map_err(|e| format!("cannot connect to {url}: {e}"))?;
                Ok(DbConn::My(conn))
            }
            Engine::Sqlite => {
                let path = url.strip_prefix("sqlite://").unwrap_or(url);
                let conn = rusqlite::Connection::open(path)
                    .map_err(|e| format!("cannot open {path}: {e}"))?;
                conn.pragma_update(None, "journal_mode", "WAL")
                    .map_err(|e| format!("{path}: {e}"))?;
                conn.busy_timeout(std::time::Duration::from_secs(30))
                    .map_err(|e| format!("{path}: {e}"))?;
                Ok(DbConn::Lite(conn))
            }
        }
    }

    /// Runs one statement (or, on SQLite, a batch), discarding any rows.
    pub async fn batch(&mut self, sql: &str) -> Result<(), String> {
        let err = |e: &dyn std::fmt::Display| format!("{e}\n  in: {}", shorten(sql));
        match self {
            DbConn::Pg(c) => c.batch_execute(sql).await.map_err(|e| err(&e)),
            DbConn::My(c) => {
                use mysql_async::prelude::Queryable;
                c.query_drop(sql).await.map_err(|e| err(&e))
            }
            DbConn::Lite(c) => {
                tokio::task::block_in_place(|| c.execute_batch(sql)).map_err(|e| err(&e))
            }
        }
    }

    /// The first column of the first row, as text.
    pub async fn text(&mut self, sql: &str) -> Result<String, String> {
        let err = |e: &dyn std::fmt::Display| format!("{e}\n  in: {}", shorten(sql));
        match self {
            DbConn::Pg(c) => {
                let rows = c.simple_query(sql).await.map_err(|e| err(&e))?;
                for m in rows {
                    if let tokio_postgres::SimpleQueryMessage::Row(r) = m {
                        return Ok(r.get(0).unwrap_or_default().to_string());
                    }
                }
                Err(err(&"no row"))
            }
            DbConn::My(c) => {
                use mysql_async::prelude::Queryable;
                let v: Option<mysql_async::Value> =
                    c.query_first(sql).await.map_err(|e| err(&e))?;
                Ok(match v {
                    Some(mysql_async::Value::Bytes(b)) => String::from_utf8_lossy(&b).to_string(),
                    Some(mysql_async::Value::Int(i)) => i.to_string(),
                    Some(mysql_async::Value::UInt(i)) => i.to_string(),
                    Some(other) => format!("{other:?}"),
                    None => return Err(err(&"no row")),
                })
            }
            DbConn::Lite(c) => tokio::task::block_in_place(|| {
                c.query_row(sql, [], |r| {
                    let v: rusqlite::types::Value = r.get(0)?;
                    Ok(match v {
                        rusqlite::types::Value::Integer(i) => i.to_string(),
                        rusqlite::types::Value::Real(f) => f.to_string(),
                        rusqlite::types::Value::Text(t) => t,
                        other => format!("{other:?}"),
                    })
                })
            })
            .map_err(|e| err(&e)),
        }
    }

    /// The first column of the first row as an integer.
    pub async fn count(&mut self, sql: &str) -> Result<i64, String> {
        let t = self.text(sql).await?;
        t.trim()
            .parse()
            .map_err(|_| format!("not a number: {t:?} from {}", shorten(sql)))
    }
}

/// `sql` on one line, cut to 200 characters, for error messages.
fn shorten(sql: &str) -> String {
    truncate(&sql.split_whitespace().collect::<Vec<_>>().join(" "), 200)
}
