//! Nested lists answered as they are read: `{"[]":{"count":N,"Moment":{…},"User":{…},
//! "Comment[]":{…}}}` and the like, a list alone at the root whose items hold more than
//! their row.
//!
//! The items are built exactly as for the buffered answer (same planning, batching and
//! references, see `arrays`), but handed to an [`ItemSink`] one by one, which encodes each
//! and forgets it. A page longer than one chunk of parents is read a chunk at a time, with one
//! statement per nesting level per chunk, so what the answer holds at once does not grow with
//! the page.
//!
//! Under a byte cap (`max_answer_bytes`) of up to [`HOLD_BYTES`], the default, the answer is
//! held back until complete, so every refusal, a cap overrun included, is still an error
//! envelope. An operator who raises the cap past that asks for answers too large to hold: they
//! are held only for their first [`EARLY_BYTES`], and a read that goes wrong after the first
//! byte aborts the body (the sink's work), never closes a valid but truncated answer.
//!
//! Items may refer to their own objects and to their parents, never to other items: a
//! reference naming the list with an index (`"[]/0/Moment/id"`) keeps the buffered path, and
//! the results kept for references are dropped with each chunk.

use super::arrays::Prepared;
use super::references::References;
use super::{ReadEnv, Reader};
use crate::sink::ItemSink;
use crate::ExecError;
use apijet_core::Method;
use apijet_plan::array::{self, QueryMode};
use apijet_plan::PlanError;
use apijet_request::{Node, Request};

/// The largest byte cap under which a streamed answer is held back until complete (the default
/// `max_answer_bytes`).
pub const HOLD_BYTES: usize = 16 << 20;

/// Budget bytes held back under a larger cap before an answer may be sent incomplete.
pub const EARLY_BYTES: usize = 1 << 20;

/// About how many rows a chunk of parents brings at most with its nested rows.
const CHUNK_ROWS: u64 = 2_000;

/// Most parents read by one statement.
const CHUNK_PARENTS: u64 = 1_000;

/// Fewest parents read by one statement: a page within the default `max_count` is never
/// split, so it runs exactly the statements of the buffered answer.
const MIN_CHUNK_PARENTS: u64 = 100;

/// A nested list to stream.
pub struct Nested {
    /// The response key of the list (`[]`, `Moment[]`).
    pub list_key: String,
}

/// The list of `req` that can stream item by item, or `None` for the buffered path (plain
/// lists stream through [`crate::list_query`] first).
pub fn nested_list(req: &Request, env: &ReadEnv<'_>) -> Option<Nested> {
    if req.format || !matches!(env.method, Method::Get | Method::Gets) {
        return None;
    }
    let [member] = req.root.members.as_slice() else {
        return None;
    };
    let Node::Array(a) = &member.node else {
        return None;
    };
    let plain_root =
        apijet_plan::keywords::check_root_keywords(&req.globals, env.method, env.options)
            .is_ok_and(|customs| customs.is_empty());
    if !plain_root {
        // Custom root keys are echoed after the list, refusals answered: the buffered read.
        return None;
    }
    let opts = env.options;
    let paging = array::paging(a, &member.key, opts.max_count, opts.max_page).ok()?;
    if paging.mode != QueryMode::Rows || a.join.is_some() || opts.max_arrays == 0 {
        return None;
    }
    let mut refs = References::default();
    refs.collect(&req.root);
    if refs.whole_arrays.contains(&member.key) {
        return None;
    }
    Some(Nested {
        list_key: member.key.clone(),
    })
}

/// Reads the list `nested_list` recognized, handing its items to `out`; returns the
/// statements it ran.
pub async fn read_nested<S: ItemSink>(
    req: &Request,
    env: &ReadEnv<'_>,
    out: &mut S,
) -> Result<usize, ExecError> {
    apijet_plan::keywords::check_root_keywords(&req.globals, env.method, env.options)?;
    let [member] = req.root.members.as_slice() else {
        return Err(PlanError::Invalid("a streamed list is alone in its request".into()).into());
    };
    let Node::Array(a) = &member.node else {
        return Err(PlanError::Invalid("a streamed list is alone in its request".into()).into());
    };
    let mut reader = Reader::new(req, env);
    let cap = env.options.max_answer_bytes;
    reader.send_after = Some(if cap <= HOLD_BYTES { cap } else { EARLY_BYTES });
    if let Prepared::Run(mut run) = reader.prepare_array(a, &member.key, "", 1).await? {
        let per_item = run.rows_per_item(env.options.max_count);
        let chunk = (CHUNK_ROWS / per_item).clamp(MIN_CHUNK_PARENTS, CHUNK_PARENTS);
        let count = run.select.limit.unwrap_or(0);
        let key = run.plan.table.column("id").map(|c| c.name.clone());
        // Chunks need a total order; a select that cannot have one is read whole.
        let chunked = chunk < count
            && !run.plan.aggregate
            && key.is_some_and(|k| run.select.order_totally_by(&k));
        reader
            .run_items(&run, chunked.then_some(chunk), out)
            .await?;
    }
    Ok(reader.statements.into_inner())
}
