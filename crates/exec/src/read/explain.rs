//! Debug answers: `@explain` with the engine's plan.

use super::Reader;
use crate::ExecError;
use apijet_sql::Statement;
use serde_json::{json, Value as Json};

impl Reader<'_> {
    /// `{"sql": …, "list": [plan rows]}`: the statement and the engine's plan of it, as the
    /// reference answers `@explain` in debug mode.
    pub(super) async fn explain(&self, stmt: &Statement) -> Result<Json, ExecError> {
        let plan = Statement {
            sql: format!("{}{}", self.env.dialect.explain(), stmt.sql),
            binds: stmt.binds.clone(),
        };
        let rows = self.rows(&plan, &[]).await?;
        Ok(json!({ "sql": stmt.sql, "list": rows }))
    }
}
