//! Runs the plan of a shape over a list of values ([`MultiplexPlan`]): one statement, whose
//! rows are routed to the sink of the value they answer by the key each row carries (its first
//! column), never by a column of the answer. Each sink gets the answer of its value's request
//! in the form the shape's own read gives it, as if it had run alone.

use super::arrays::ArrayRun;
use super::{ReadEnv, Reader};
use crate::backend::Backend;
use crate::cell::Cell;
use crate::sink::{AnswerSink, CollectSink, ColumnNames, Form, RowSink, SinkError};
use crate::ExecError;
use apijet_plan::read::{
    ListKind, MultiplexForm, MultiplexPlan, ReadPlan, RecordMember, RecordPlan,
};
use apijet_plan::template::Template;
use apijet_plan::PlanError;
use apijet_sql::{render_multiplexed, Statement};
use serde_json::{Map, Value as Json};

/// What a multiplexed read did.
#[derive(Debug, Default)]
pub struct Multiplexed {
    /// The keys whose sink refused a row (its answer's budget): their answers are not whole,
    /// and each is read alone.
    pub refused: Vec<usize>,
}

/// Runs `plan` (made from `read`, the plan of its shape) for the values `listed` (all of
/// `kind`, one per sink, in order) with the other slots' values `env.values`, into `sinks`:
/// `sinks[i]` gets the answer of the request whose slot holds `listed[i]`.
pub async fn run_multiplexed<'p, S: AnswerSink<'p>>(
    read: &'p ReadPlan,
    plan: &'p MultiplexPlan,
    env: &ReadEnv<'_>,
    listed: &[Json],
    kind: ListKind,
    sinks: &mut [S],
) -> Result<Multiplexed, ExecError> {
    if listed.len() != sinks.len() {
        return Err(ExecError::Invalid(
            "a multiplexed read needs one sink per listed value".into(),
        ));
    }
    let form = match &plan.form {
        MultiplexForm::Object { key } => Form::Object {
            key,
            json_outputs: &plan.json_outputs,
            names: None,
        },
        MultiplexForm::List { key, wrap } => Form::List {
            key,
            wrap: wrap.as_deref(),
            json_outputs: &plan.json_outputs,
        },
        MultiplexForm::Items { key } => {
            for sink in sinks.iter_mut() {
                sink.open(Form::Items { key });
            }
            return read_items(read, plan, key, env, listed, kind, sinks).await;
        }
        MultiplexForm::Record { key } => {
            let Some(record) = &plan.record else {
                return Err(ExecError::Invalid(
                    "a multiplexed record view needs its record plan".into(),
                ));
            };
            for sink in sinks.iter_mut() {
                sink.open(Form::Members {
                    format: read.format,
                    counts: read.counts(),
                });
            }
            return read_record(read, plan, (key, record), env, listed, kind, sinks).await;
        }
    };
    for sink in sinks.iter_mut() {
        sink.open(form);
    }
    let stmt = statement(plan, env, listed, kind)?;
    let mut routed = Routed {
        refused: vec![false; sinks.len()],
        sinks,
    };
    let result = env.backend.fetch(&stmt, &mut routed).await;
    let result = match (result, env.fallback) {
        (Err(e), Some(primary)) if e.is_unreachable() => {
            // Reads change nothing: a replica that could not answer is replaced by the
            // primary (nothing of these answers has left: they are held whole).
            routed.restart();
            for sink in routed.sinks.iter_mut() {
                sink.open(form);
            }
            primary.fetch(&stmt, &mut routed).await
        }
        (result, _) => result,
    };
    result?;
    let refused = (routed.refused.iter().enumerate())
        .filter_map(|(key, refused)| refused.then_some(key))
        .collect();
    Ok(Multiplexed { refused })
}

/// The multiplexed statement for the values `listed`.
fn statement(
    plan: &MultiplexPlan,
    env: &ReadEnv<'_>,
    listed: &[Json],
    kind: ListKind,
) -> Result<Statement, ExecError> {
    let text = plan.text(kind, |p, k| render_multiplexed(env.dialect, p, k));
    // The list is bound in its slot's place, as one JSON array text.
    let mut values = env.values.to_vec();
    let Some(slot) = values.get_mut(plan.slot) else {
        return Err(ExecError::Invalid("the listed slot has no value".into()));
    };
    *slot = Json::String(Json::Array(listed.to_vec()).to_string());
    Ok(Statement {
        sql: text.sql.clone(),
        binds: Template::binds(text, &values),
        bounded: false,
    })
}

/// Most items built at once: as a nested list's own read, each level's members are read by
/// one statement per this many parents.
const ITEMS_AT_ONCE: usize = 1_000;

/// A nested list for every listed value: the items' main rows by the multiplexed statement,
/// each key's within its share of the answer's budget; then the items of all keys built
/// together as the shape's own read builds them (`arrays`: its members batched by their
/// parents' keys, one statement per level for up to [`ITEMS_AT_ONCE`] items of any keys),
/// and handed to the sink of their key. Each chunk of keys stays within one answer's budget
/// (`max_rows`, `max_answer_bytes`), so none answers what its own read would refuse, and all
/// of them within one answer's bytes; the keys of a chunk past either are refused (each is
/// read alone, which answers its own refusal).
async fn read_items<'p, S: AnswerSink<'p>>(
    read: &'p ReadPlan,
    plan: &'p MultiplexPlan,
    key: &str,
    env: &ReadEnv<'_>,
    listed: &[Json],
    kind: ListKind,
    sinks: &mut [S],
) -> Result<Multiplexed, ExecError> {
    let Some((_, list)) = read.list() else {
        return Err(ExecError::Invalid(
            "a multiplexed nested list needs its shape's list".into(),
        ));
    };
    let stmt = statement(plan, env, listed, kind)?;
    let opts = env.options;
    let (mut rows, backend, mut refused) = main_rows(plan, env, &stmt, listed.len()).await?;
    let run = ArrayRun::at_root(list, key, plan.select.clone());
    // Bytes of the answers built so far: together within one answer's budget.
    let mut held = 0usize;
    let mut next = 0;
    while next < rows.len() {
        // Whole keys, up to ITEMS_AT_ONCE main rows (at least one key). Each chunk is read
        // within one answer's budget, so no key's answer passes what its own read allows;
        // a chunk past it is read alone, key by key.
        let first = next;
        let (mut mains, mut owners, mut bytes) = (Vec::new(), Vec::new(), 0);
        while let Some(sink) = rows.get_mut(next) {
            if !mains.is_empty() && mains.len() + sink.rows.len() > ITEMS_AT_ONCE {
                break;
            }
            if !refused[next] {
                owners.extend(std::iter::repeat_n(next, sink.rows.len()));
                bytes += sink.bytes;
                mains.append(&mut sink.rows);
            }
            next += 1;
        }
        let n = mains.len();
        let reader = Reader::new(read, env, backend);
        let mut items: Vec<Json> = Vec::with_capacity(n);
        let built = match reader.hold(n, bytes) {
            Ok(()) => {
                let mut reader = reader;
                let built = reader.chunk_items(&run, mains, 0, &stmt, &mut items).await;
                built.map(|()| reader.held_bytes.load(std::sync::atomic::Ordering::Relaxed))
            }
            Err(e) => Err(e),
        };
        match built {
            Ok(chunk_bytes) if held.saturating_add(chunk_bytes) <= opts.max_answer_bytes => {
                held += chunk_bytes;
            }
            Ok(_) | Err(ExecError::Plan(PlanError::Limit(_))) => {
                refused[first..next].fill(true);
                continue;
            }
            Err(e) => return Err(e),
        }
        if items.len() != n {
            return Err(ExecError::Invalid(
                "a multiplexed nested list built other than one item per row".into(),
            ));
        }
        for (item, k) in items.into_iter().zip(owners) {
            if let Some(sink) = sinks.get_mut(k) {
                sink.item(item);
            }
        }
    }
    let refused = (refused.iter().enumerate())
        .filter_map(|(key, refused)| refused.then_some(key))
        .collect();
    Ok(Multiplexed { refused })
}

/// The rows of the multiplexed statement `stmt`, collected per key (of `keys`), each key's
/// within its share of one answer's budget; the backend that answered (the primary when the
/// replica could not), and per key whether its rows passed its share.
async fn main_rows<'e>(
    plan: &MultiplexPlan,
    env: &ReadEnv<'e>,
    stmt: &Statement,
    keys: usize,
) -> Result<(Vec<CollectSink>, &'e Backend, Vec<bool>), ExecError> {
    let opts = env.options;
    let share = opts.max_answer_bytes / keys.max(1);
    let mut rows: Vec<CollectSink> = (0..keys)
        .map(|_| CollectSink::within(&plan.json_outputs, opts.max_rows, share))
        .collect();
    let mut routed = Routed {
        refused: vec![false; keys],
        sinks: &mut rows,
    };
    let mut backend = env.backend;
    let result = env.backend.fetch(stmt, &mut routed).await;
    let result = match (result, env.fallback) {
        (Err(e), Some(primary)) if e.is_unreachable() => {
            routed.restart();
            backend = primary;
            primary.fetch(stmt, &mut routed).await
        }
        (result, _) => result,
    };
    result?;
    let refused = std::mem::take(&mut routed.refused);
    Ok((rows, backend, refused))
}

/// A record view for every listed value: each key's first object by the multiplexed
/// statement (its row, within its share of the answer's budget); then each later member read
/// for the first objects of up to [`ITEMS_AT_ONCE`] keys at once (fewer when that many would
/// pass one answer's `max_rows`), one statement per member
/// (as a nested list's members are read for its items, `batch`); then each key's answer
/// assembled as the shape's own read assembles it: the first object, the later members in
/// request order, the custom root keys. A key whose first object has no row answers nothing
/// but those keys (the first-child rule empties the root). As for nested lists, each chunk
/// of keys is read within one answer's budget, and all chunks within one answer's bytes; the
/// keys of a chunk past either are refused (each is read alone).
async fn read_record<'p, S: AnswerSink<'p>>(
    read: &'p ReadPlan,
    plan: &'p MultiplexPlan,
    (key, record): (&str, &RecordPlan),
    env: &ReadEnv<'_>,
    listed: &[Json],
    kind: ListKind,
    sinks: &mut [S],
) -> Result<Multiplexed, ExecError> {
    let stmt = statement(plan, env, listed, kind)?;
    let opts = env.options;
    let (mut rows, backend, mut refused) = main_rows(plan, env, &stmt, listed.len()).await?;
    // Keys per chunk: as many as one answer's rows hold at most, so that a chunk is refused
    // on rows only where one key's own answer may pass them.
    let per_key = usize::try_from(record.rows_per_key).unwrap_or(usize::MAX);
    let at_once = (opts.max_rows / per_key.max(1)).clamp(1, ITEMS_AT_ONCE);
    let mut held = 0usize;
    let mut next = 0;
    while next < rows.len() {
        let first = next;
        let (mut mains, mut owners, mut bytes) = (Vec::new(), Vec::new(), 0);
        while let Some(sink) = rows.get_mut(next) {
            if mains.len() >= at_once {
                break;
            }
            // The statement keeps one row per key.
            if let (false, Some(row)) = (refused[next], sink.rows.pop()) {
                owners.push(next);
                bytes += sink.bytes;
                mains.push(row);
            }
            next += 1;
        }
        let mut reader = Reader::new(read, env, backend);
        let members = match reader.hold(mains.len(), bytes) {
            Ok(()) => record_members(&mut reader, record, &mains).await,
            Err(e) => Err(e),
        };
        let chunk_bytes = reader.held_bytes.load(std::sync::atomic::Ordering::Relaxed);
        let mut members = match members {
            Ok(m) if held.saturating_add(chunk_bytes) <= opts.max_answer_bytes => {
                held += chunk_bytes;
                m
            }
            Ok(_) | Err(ExecError::Plan(PlanError::Limit(_))) => {
                refused[first..next].fill(true);
                continue;
            }
            Err(e) => return Err(e),
        };
        let mut mains = mains.into_iter().zip(owners).enumerate().peekable();
        for (k, _) in (first..next)
            .zip(&refused[first..next])
            .filter(|(_, r)| !**r)
        {
            let mut out = Map::new();
            if let Some((i, (main, _))) = mains.next_if(|(_, (_, owner))| *owner == k) {
                out.insert(key.to_string(), Json::Object(main));
                for (m, member) in record.members.iter().enumerate() {
                    match member {
                        RecordMember::Batch { key, .. } => {
                            let value = members.get_mut(m).and_then(|per| per.get_mut(i));
                            if let Some(v) = value.and_then(Option::take) {
                                out.insert(key.clone(), v);
                            }
                        }
                        RecordMember::Value { key, value } => {
                            out.insert(key.clone(), value.clone());
                        }
                    }
                }
            }
            // Custom root `@` keys come back after the objects, as the shape's own read
            // answers them (after the first-child rule too).
            out.extend(read.customs.clone());
            if let Some(sink) = sinks.get_mut(k) {
                sink.members(out);
            }
        }
    }
    let refused = (refused.iter().enumerate())
        .filter_map(|(key, refused)| refused.then_some(key))
        .collect();
    Ok(Multiplexed { refused })
}

/// Each member of `record` after the first object, read for every one of `mains` (values
/// answer no rows: empty).
async fn record_members(
    reader: &mut Reader<'_>,
    record: &RecordPlan,
    mains: &[Map<String, Json>],
) -> Result<Vec<Vec<Option<Json>>>, ExecError> {
    let mut out = Vec::with_capacity(record.members.len());
    for member in &record.members {
        out.push(match member {
            RecordMember::Batch { plan, .. } if !mains.is_empty() => {
                reader.batch(plan, mains).await?
            }
            RecordMember::Batch { .. } | RecordMember::Value { .. } => Vec::new(),
        });
    }
    Ok(out)
}

/// Hands each row, without its key, to the sink of its key.
struct Routed<'s, S> {
    sinks: &'s mut [S],
    /// Per key: its sink refused a row.
    refused: Vec<bool>,
}

/// The key a row carries: its list position, as each engine types it.
fn key_of(cell: Option<&Cell<'_>>) -> Option<usize> {
    match cell? {
        Cell::Int(i) => usize::try_from(*i).ok(),
        Cell::UInt(u) => usize::try_from(*u).ok(),
        Cell::Decimal(s) | Cell::Text(s) => s.trim().parse().ok(),
        Cell::Float(f) if f.fract() == 0.0 && *f >= 0.0 => Some(*f as usize),
        _ => None,
    }
}

impl<S: RowSink> RowSink for Routed<'_, S> {
    fn columns<'n>(&mut self, names: impl ColumnNames<'n>) {
        for sink in self.sinks.iter_mut() {
            sink.columns(names.clone().skip(1));
        }
    }

    fn row(&mut self, cells: &[Cell<'_>]) -> Result<(), SinkError> {
        let Some(key) = key_of(cells.first()) else {
            return Err(SinkError::Closed);
        };
        let (Some(sink), Some(refused)) = (self.sinks.get_mut(key), self.refused.get_mut(key))
        else {
            return Err(SinkError::Closed);
        };
        // A row past one answer's budget spoils that answer only: the others go on.
        if !*refused && sink.row(&cells[1..]).is_err() {
            *refused = true;
        }
        Ok(())
    }

    /// Only when every answer can start over (a list's writer cannot, once it took rows).
    fn restartable(&self) -> bool {
        self.sinks.iter().all(RowSink::restartable)
    }

    fn restart(&mut self) {
        for sink in self.sinks.iter_mut() {
            sink.restart();
        }
        self.refused.fill(false);
    }
}
