//! The functions of a written object: `k-()` validations before its statement, `k()` calls
//! after it (their results join the answer), and the demo's functions that write.

use super::outcome::Written;
use super::WriteEnv;
use crate::backend::Tx;
use crate::sink::CollectSink;
use crate::ExecError;
use apijet_core::Value;
use apijet_plan::call::Planned;
use apijet_plan::write;
use apijet_plan::write::ObjectCalls;
use apijet_sql::{render, render_delete};
use serde_json::{json, Map, Value as Json};

/// `k-()` functions injected by the structure run before the statement (validations).
pub(super) fn before(calls: &ObjectCalls, env: &WriteEnv<'_>) -> Result<(), ExecError> {
    for call in &calls.before {
        crate::functions::call(call, &calls.values, env.visitor)?;
    }
    Ok(())
}

/// `k()` functions run after the statement; their results join the answer.
pub(super) async fn after(
    tx: &mut Tx<'_>,
    calls: &ObjectCalls,
    env: &WriteEnv<'_>,
    written: &mut Written,
) -> Result<(), ExecError> {
    for (name, call) in &calls.after {
        let result = match write_function(tx, call, &calls.values, env).await? {
            Some(v) => Some(v),
            None => crate::functions::call(call, &calls.values, env.visitor)?,
        };
        if let Some(v) = result {
            written.results.push((name.clone(), v));
        }
    }
    Ok(())
}

/// The demo's functions that write: deleting a moment's comments, a comment's replies.
async fn write_function(
    tx: &mut Tx<'_>,
    call: &Planned,
    values: &Map<String, Json>,
    env: &WriteEnv<'_>,
) -> Result<Option<Json>, ExecError> {
    let Some(writing) = apijet_plan::write::writing_call(call) else {
        return Ok(None);
    };
    let (column, recursive) = (writing.column, writing.recursive);
    let Some(id) = values.get("id").cloned() else {
        return Ok(Some(json!(0)));
    };
    let Some(table) = env.schema.table(writing.table) else {
        return Ok(Some(json!(0)));
    };
    let mut total = 0u64;
    let mut parents = vec![Value::from_json(&id)];
    while !parents.is_empty() {
        let mut next = Vec::new();
        if recursive {
            // Replies of replies go too: collect the next level before deleting this one.
            let select = write::ids_where(table, column, parents.clone())?;
            let mut sink = CollectSink::new(&[]);
            tx.fetch(&render(env.dialect, &select), &mut sink).await?;
            next.extend(
                sink.rows
                    .iter()
                    .filter_map(|r| r.get("id"))
                    .map(Value::from_json),
            );
        }
        let delete = write::delete_where(table, column, parents)?;
        total += tx.execute(&render_delete(env.dialect, &delete)).await?;
        parents = if recursive { next } else { Vec::new() };
    }
    Ok(Some(json!(total)))
}
