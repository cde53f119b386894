//! Recognizes the requests whose answer can stream: one list of plain single-table objects.
//!
//! Such a list (`{"Moment[]":{"count":N,"Moment":{…conditions…}}}` or the same under `[]`)
//! needs no other object's results and no per-row work beyond encoding, so its rows can go
//! from the cursor to the socket. Everything else takes the buffered path in [`crate::read`].

use crate::read::ReadEnv;
use crate::ExecError;
use apijet_plan::array::{self, QueryMode};
use apijet_plan::{Ctx, TablePlan};
use apijet_request::{Node, Request, TableEntry};
use apijet_sql::{render, Statement};

/// A list to stream.
pub struct ListQuery {
    /// The response key of the list (`Moment[]`, `[]`).
    pub list_key: String,
    /// For `[]` lists, the table key wrapping each row.
    pub wrap_key: Option<String>,
    /// The statement; `None` when the conditions cannot match (an empty list).
    pub statement: Option<Statement>,
    /// Output columns answered as JSON.
    pub json_outputs: Vec<String>,
}

/// The streamable list of `req`, or `None` when the request needs the buffered path.
pub fn list_query(req: &Request, env: &ReadEnv<'_>) -> Result<Option<ListQuery>, ExecError> {
    if req.format || !env.method.is_query() || env.method.is_count() {
        return Ok(None);
    }
    let [member] = req.root.members.as_slice() else {
        return Ok(None);
    };
    let Node::Array(a) = &member.node else {
        return Ok(None);
    };
    let [item] = a.items.members.as_slice() else {
        return Ok(None);
    };
    let Node::Table(t) = &item.node else {
        return Ok(None);
    };
    let plain = t.entries.iter().all(|e| {
        matches!(
            e,
            TableEntry::Condition { .. }
                | TableEntry::Slot { .. }
                | TableEntry::Keyword { .. }
                | TableEntry::SubqueryCondition { .. }
        )
    });
    let unwrapped = a.key.table.is_some() && a.key.extract.is_empty();
    if !plain || a.join.is_some() || !(unwrapped || a.key.name.is_empty()) {
        return Ok(None);
    }
    let customs =
        apijet_plan::keywords::check_root_keywords(&req.globals, env.method, env.options)?;
    if !customs.is_empty() {
        // Custom root keys are echoed after the list: the general read answers them.
        return Ok(None);
    }
    let opts = env.options;
    let paging = array::paging(a, &member.key, opts.max_count, opts.max_page)?;
    if paging.mode != QueryMode::Rows {
        return Ok(None);
    }
    let ctx = Ctx {
        schema: env.schema,
        options: env.options,
        method: env.method,
        visitor: env.visitor,
        global_role: req.global("role"),
        global_explain: req
            .global("explain")
            .and_then(|v| v.as_bool())
            .unwrap_or(false),
        subqueries: None,
        trusted: false,
    };
    let plan = TablePlan::new(t, &ctx)?;
    if plan.explain || plan.drop || !plan.echoes.is_empty() || !plan.procedures.is_empty() {
        return Ok(None);
    }
    let statement = plan.select(env.values, &mut |_| None)?.map(|mut s| {
        s.limit = Some(paging.count);
        s.offset = paging.page * paging.count;
        render(env.dialect, &s)
    });
    Ok(Some(ListQuery {
        list_key: member.key.clone(),
        wrap_key: (!unwrapped).then(|| item.key.clone()),
        statement,
        json_outputs: plan.json_outputs,
    }))
}
