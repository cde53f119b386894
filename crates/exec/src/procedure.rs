//! Stored-procedure calls (`"@name()": "proc(args)"`, planned by `apijet_plan::procedure`):
//! `CALL proc(?, …)` in a transaction of its own, answered as the reference answers it: a call
//! that returns rows gives `{"count": -1, "update": false, "list": [rows]}` (JDBC's update
//! count of a result set), one that returns none gives no key at all.

use crate::backend::Backend;
use crate::cell::Cell;
use crate::sink::{CollectSink, ColumnNames, RowSink, SinkError};
use crate::ExecError;
use apijet_core::Value;
use apijet_plan::procedure::{ProcArg, ProcedureCall};
use apijet_sql::{Dialect, Statement};
use serde_json::{json, Map, Value as Json};

/// Collects rows and remembers whether the statement had a result set at all.
struct CallSink {
    rows: CollectSink,
    result_set: bool,
}

impl RowSink for CallSink {
    fn columns<'n>(&mut self, names: impl ColumnNames<'n>) {
        self.result_set = names.len() > 0;
        self.rows.columns(names);
    }

    fn row(&mut self, cells: &[Cell<'_>]) -> Result<(), SinkError> {
        self.rows.row(cells)
    }
}

/// `CALL name(?, …)` with the call's arguments, keys taken from `row`.
pub fn statement(
    dialect: &dyn Dialect,
    call: &ProcedureCall,
    row: &Map<String, Json>,
) -> Statement {
    let mut sql = String::from("CALL ");
    dialect.quote(call.name.as_str(), &mut sql);
    sql.push('(');
    let mut binds = Vec::with_capacity(call.args.len());
    for (i, a) in call.args.iter().enumerate() {
        if i > 0 {
            sql.push_str(", ");
        }
        dialect.placeholder(i + 1, &mut sql);
        binds.push(match a {
            ProcArg::Key(k) => row.get(k).map_or(Value::Null, Value::from_json),
            ProcArg::Value(v) => Value::from_json(v),
        });
    }
    sql.push(')');
    Statement {
        sql,
        binds,
        bounded: false,
    }
}

/// Runs the call; `None` when it returned no result set.
pub async fn run(
    backend: &Backend,
    dialect: &dyn Dialect,
    call: &ProcedureCall,
    row: &Map<String, Json>,
    max_rows: usize,
    max_bytes: usize,
) -> Result<Option<Json>, ExecError> {
    let engine = backend.capabilities();
    if !engine.procedures {
        return Err(ExecError::Invalid(format!(
            "{}: {} has no stored procedures; call them on PostgreSQL or MariaDB",
            call.key, engine.name
        )));
    }
    let stmt = statement(dialect, call, row);
    let mut sink = CallSink {
        rows: CollectSink::within(&[], max_rows, max_bytes),
        result_set: false,
    };
    let mut tx = backend.begin().await?;
    tx.fetch(&stmt, &mut sink).await?;
    tx.commit().await?;
    Ok(sink
        .result_set
        .then(|| json!({"count": -1, "update": false, "list": sink.rows.rows})))
}
