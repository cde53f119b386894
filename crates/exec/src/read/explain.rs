//! Debug answers: `@explain` with the engine's plan, and what the answer cache did with the
//! read (as `x-apijet-cache` says): an explained read is never looked up nor kept.

use super::Reader;
use crate::ExecError;
use apijet_sql::Statement;
use serde_json::{json, Value as Json};

impl Reader<'_> {
    /// `{"sql": …, "list": [plan rows], "cache": …}`: the statement and the engine's plan of
    /// it, as the reference answers `@explain` in debug mode, and why the
    /// answer cache missed it ([`CACHE_WHY`]).
    pub(super) async fn explain(&self, stmt: &Statement) -> Result<Json, ExecError> {
        let plan = Statement {
            sql: format!("{}{}", self.env.dialect.explain(), stmt.sql),
            binds: stmt.binds.clone(),
            bounded: false,
        };
        let rows = self.rows(&plan, &[]).await?;
        Ok(json!({
            "sql": stmt.sql,
            "list": rows,
            "cache": {"answer": "miss", "why": CACHE_WHY},
        }))
    }
}

/// Why an explained read's answer is a miss of the answer cache, whatever its setting: the
/// plan says it may not be kept (`Dependencies::explained`).
const CACHE_WHY: &str = "an explained read runs its statements every time and is never \
                             kept: its answer tells how this read ran";
