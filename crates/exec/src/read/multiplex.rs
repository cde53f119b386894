//! Runs the plan of a shape over a list of values ([`MultiplexPlan`]): one statement, whose
//! rows are routed to the sink of the value they answer by the key each row carries (its first
//! column), never by a column of the answer. Each sink gets the answer of its value's request
//! in the form the shape's own read gives it, as if it had run alone.

use super::ReadEnv;
use crate::cell::Cell;
use crate::sink::{AnswerSink, ColumnNames, Form, RowSink, SinkError};
use crate::ExecError;
use apijet_plan::read::{ListKind, MultiplexForm, MultiplexPlan};
use apijet_plan::template::Template;
use apijet_sql::{render_multiplexed, Statement};
use serde_json::Value as Json;

/// What a multiplexed read did.
#[derive(Debug, Default)]
pub struct Multiplexed {
    /// The keys whose sink refused a row (its answer's budget): their answers are not whole,
    /// and each is read alone.
    pub refused: Vec<usize>,
}

/// Runs `plan` for the values `listed` (all of `kind`, one per sink, in order) with the other
/// slots' values `env.values`, into `sinks`: `sinks[i]` gets the answer of the request whose
/// slot holds `listed[i]`.
pub async fn run_multiplexed<'p, S: AnswerSink<'p>>(
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
        },
        MultiplexForm::List { key, wrap } => Form::List {
            key,
            wrap: wrap.as_deref(),
            json_outputs: &plan.json_outputs,
        },
    };
    for sink in sinks.iter_mut() {
        sink.open(form);
    }
    let text = plan.text(kind, |p, k| render_multiplexed(env.dialect, p, k));
    // The list is bound in its slot's place, as one JSON array text.
    let mut values = env.values.to_vec();
    let Some(slot) = values.get_mut(plan.slot) else {
        return Err(ExecError::Invalid("the listed slot has no value".into()));
    };
    *slot = Json::String(Json::Array(listed.to_vec()).to_string());
    let stmt = Statement {
        sql: text.sql.clone(),
        binds: Template::binds(text, &values),
    };
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
