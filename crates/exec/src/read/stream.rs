//! Nested lists answered as they are read: `{"[]":{"count":N,"Moment":{…},"User":{…},
//! "Comment[]":{…}}}` and the like, a list alone at the root whose items hold more than
//! their row.
//!
//! The items are built exactly as for the buffered answer (same plan, batching and
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
use super::{ReadEnv, Reader};
use crate::backend::Backend;
use crate::sink::ItemSink;
use crate::ExecError;
use apijet_plan::read::{ArrayPlan, ReadPlan};

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

/// Reads the nested list `list` (under `key`) of `plan`, handing its items to `out`; returns
/// the statements it ran.
pub(super) async fn read_nested<S: ItemSink>(
    plan: &ReadPlan,
    list: &ArrayPlan,
    key: &str,
    env: &ReadEnv<'_>,
    backend: &Backend,
    out: &mut S,
) -> Result<usize, ExecError> {
    let mut reader = Reader::new(plan, env, backend);
    let cap = env.options.max_answer_bytes;
    reader.send_after = Some(if cap <= HOLD_BYTES { cap } else { EARLY_BYTES });
    if let Prepared::Run(mut run) = reader.prepare_array(list, key, "").await? {
        let chunk =
            (CHUNK_ROWS / list.rows_per_item.max(1)).clamp(MIN_CHUNK_PARENTS, CHUNK_PARENTS);
        let count = run.select.limit.unwrap_or(0);
        // Chunks need a total order; a select that cannot have one is read whole.
        let chunked = chunk < count
            && !list.main.table.aggregate
            && list
                .key_column
                .as_deref()
                .is_some_and(|k| run.select.order_totally_by(k));
        reader
            .run_items(&run, chunked.then_some(chunk), out)
            .await?;
    }
    Ok(reader.statements.into_inner())
}
