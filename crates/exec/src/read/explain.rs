//! Debug answers and session values: `@explain` with the engine's plan, `getCurrentUser()`.

use super::{join, Reader};
use crate::ExecError;
use apijet_request::TableEntry;
use apijet_request::TableObject;
use apijet_sql::Statement;
use serde_json::{json, Value as Json};

impl Reader<'_> {
    /// `{"sql": …, "list": [plan rows]}`: the statement and the engine's plan of it, as the
    /// reference answers `@explain` in debug mode.
    pub(super) async fn explain(&self, stmt: &Statement) -> Result<Json, ExecError> {
        let prefix = match self.env.backend.engine() {
            apijet_core::Engine::Sqlite => "EXPLAIN QUERY PLAN ",
            _ => "EXPLAIN ",
        };
        let plan = Statement {
            sql: format!("{prefix}{}", stmt.sql),
            binds: stmt.binds.clone(),
        };
        let rows = self.rows(&plan, &[]).await?;
        Ok(json!({ "sql": stmt.sql, "list": rows }))
    }

    /// `getCurrentUser()`: the visitor's `User` row, read as `{"User":{"id":…}}` would be.
    pub(super) async fn current_user(
        &mut self,
        container: &str,
        depth: usize,
    ) -> Result<Option<Json>, ExecError> {
        let Some(visitor) = self.env.visitor else {
            return Ok(None);
        };
        let key = apijet_request::TableKey::parse("User")
            .ok_or_else(|| ExecError::Invalid("User is not a table key".into()))?;
        let id = apijet_request::ConditionKey::parse("id")
            .map_err(|e| ExecError::Invalid(e.to_string()))?;
        let t = TableObject {
            key,
            entries: vec![TableEntry::Condition {
                key: id,
                value: json!(visitor.id),
            }],
        };
        let path = join(container, "__currentUser");
        Ok(self
            .table(&t, &path, container, depth)
            .await?
            .map(|(v, _)| v))
    }
}
