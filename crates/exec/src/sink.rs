//! The seam between a backend's cursor and whoever consumes its rows.
//!
//! A backend drives its cursor and hands each row to a [`RowSink`]; the sink encodes it
//! (into JSON values for the buffered path, straight into response bytes for the streaming
//! path) and says when its buffer wants flushing. Flushing is where a streaming sink waits
//! for the client, which is how a slow client pauses the database cursor.

use crate::cell::Cell;
use serde_json::{Map, Value as Json};
use std::future::Future;

/// Why a sink stopped taking rows.
#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    /// The client went away (or a buffering sink reached its budget and says so itself).
    #[error("the client closed the connection")]
    Closed,
    /// The answer would pass `max_answer_bytes` (the value) with the next row.
    #[error(
        "the answer would be larger than max_answer_bytes ({0} bytes): ask for fewer rows or \
         columns, or shorter values"
    )]
    TooLarge(usize),
}

impl From<SinkError> for crate::ExecError {
    fn from(e: SinkError) -> Self {
        match e {
            SinkError::Closed => crate::ExecError::ClientGone,
            too_large @ SinkError::TooLarge(_) => {
                crate::ExecError::Plan(apijet_plan::PlanError::Limit(too_large.to_string()))
            }
        }
    }
}

/// The output column names of a statement, in select order; a sink may walk them more than
/// once.
pub trait ColumnNames<'n>: ExactSizeIterator<Item = &'n str> + Clone {}

impl<'n, I: ExactSizeIterator<Item = &'n str> + Clone> ColumnNames<'n> for I {}

/// Receives the rows of one statement.
pub trait RowSink: Send {
    /// Called once before the first row with the output column names, in select order. An
    /// iterator over the backend's own names, so that no statement copies them.
    fn columns<'n>(&mut self, names: impl ColumnNames<'n>);

    /// Takes one row (cells in column order).
    fn row(&mut self, cells: &[Cell<'_>]) -> Result<(), SinkError>;

    /// True when enough has been buffered that [`RowSink::flush`] should run now.
    fn wants_flush(&self) -> bool {
        false
    }

    /// Hands buffered output on; may wait for the consumer.
    fn flush(&mut self) -> impl Future<Output = Result<(), SinkError>> + Send {
        async { Ok(()) }
    }

    /// True when nothing leaves the sink before the statement ends, so that the statement may
    /// be stopped and run again from the start after [`RowSink::restart`].
    fn restartable(&self) -> bool {
        false
    }

    /// Forgets everything taken so far (only called when [`RowSink::restartable`]).
    fn restart(&mut self) {}
}

/// Collects rows as JSON objects: NULL columns omitted, JSON columns parsed.
#[derive(Debug)]
pub struct CollectSink {
    names: Vec<String>,
    json: Vec<bool>,
    json_outputs: Vec<String>,
    /// The rows read.
    pub rows: Vec<Map<String, Json>>,
    /// Roughly how many bytes of JSON the rows make.
    pub bytes: usize,
    max_rows: usize,
    max_bytes: usize,
    /// The rows went past `max_rows` or `max_bytes`: the cursor was stopped there.
    pub over_budget: bool,
}

impl CollectSink {
    /// A sink that parses the columns named in `json_outputs` as JSON.
    pub fn new(json_outputs: &[String]) -> CollectSink {
        CollectSink::within(json_outputs, usize::MAX, usize::MAX)
    }

    /// A sink that stops the cursor once it holds more than `max_rows` rows or about
    /// `max_bytes` bytes, so a buffered answer never grows past its budget.
    pub fn within(json_outputs: &[String], max_rows: usize, max_bytes: usize) -> CollectSink {
        CollectSink {
            names: Vec::new(),
            json: Vec::new(),
            json_outputs: json_outputs.to_vec(),
            rows: Vec::new(),
            bytes: 0,
            max_rows,
            max_bytes,
            over_budget: false,
        }
    }
}

/// About how many bytes a cell adds to a JSON answer, for budgets (not for framing).
pub fn approx_bytes(cell: &Cell<'_>) -> usize {
    match cell {
        Cell::Null => 0,
        Cell::Bool(_) => 5,
        Cell::Int(_) | Cell::UInt(_) | Cell::Float(_) => 12,
        Cell::Decimal(s) | Cell::Text(s) | Cell::Json(s) => s.len() + 2,
        Cell::DateTime(_) | Cell::Date(_) | Cell::Time(_) => 23,
        Cell::Bytes(b) => b.len() * 2 + 2,
    }
}

/// About how many bytes a row adds to a JSON answer (NULL columns are left out), given the
/// lengths of its column names in order.
pub fn row_bytes(cells: &[Cell<'_>], name_lengths: impl Iterator<Item = usize>) -> usize {
    cells
        .iter()
        .zip(name_lengths)
        .filter(|(cell, _)| !matches!(cell, Cell::Null))
        .map(|(cell, name)| name + 4 + approx_bytes(cell))
        .sum()
}

impl RowSink for CollectSink {
    fn columns<'n>(&mut self, names: impl ColumnNames<'n>) {
        self.json = names
            .clone()
            .map(|n| self.json_outputs.iter().any(|j| j == n))
            .collect();
        self.names = names.map(str::to_owned).collect();
    }

    fn row(&mut self, cells: &[Cell<'_>]) -> Result<(), SinkError> {
        // Measured before anything is copied: a cell past the budget is never buffered.
        let size = row_bytes(cells, self.names.iter().map(String::len));
        if self.rows.len() >= self.max_rows || self.bytes.saturating_add(size) > self.max_bytes {
            self.over_budget = true;
            return Err(SinkError::Closed);
        }
        self.bytes += size;
        let mut obj = Map::with_capacity(cells.len());
        for (i, cell) in cells.iter().enumerate() {
            if matches!(cell, Cell::Null) {
                continue;
            }
            let name = self.names.get(i).cloned().unwrap_or_default();
            obj.insert(
                name,
                cell.to_json(self.json.get(i).copied().unwrap_or(false)),
            );
        }
        self.rows.push(obj);
        Ok(())
    }

    fn restartable(&self) -> bool {
        true
    }

    fn restart(&mut self) {
        self.rows.clear();
        self.bytes = 0;
        self.over_budget = false;
    }
}

/// Where the items of an array go as they are built.
pub trait ItemSink: Send {
    /// Takes the next item.
    fn item(&mut self, item: Json);

    /// True when enough is buffered that [`ItemSink::flush`] should run.
    fn wants_flush(&self) -> bool {
        false
    }

    /// Hands buffered output on; may wait for the consumer.
    fn flush(&mut self) -> impl Future<Output = Result<(), SinkError>> + Send {
        async { Ok(()) }
    }
}

impl ItemSink for Vec<Json> {
    fn item(&mut self, item: Json) {
        self.push(item);
    }
}

/// The form of a read's answer, as its plan chose it (`apijet_plan::read::Mode`).
#[derive(Debug, Clone, Copy)]
pub enum Form<'p> {
    /// One object, whose row comes through [`RowSink`]: answered under `key`.
    Object {
        /// The answer key.
        key: &'p str,
        /// Output names answered as JSON.
        json_outputs: &'p [String],
        /// Where the column names are kept written, when the statement is its shape's
        /// template (the same names every time).
        names: Option<&'p std::sync::OnceLock<apijet_plan::template::WrittenNames>>,
    },
    /// A list of rows, which come through [`RowSink`].
    List {
        /// The answer key of the list.
        key: &'p str,
        /// The table key wrapping each row of a `[]` list (`None` for `Table[]`).
        wrap: Option<&'p str>,
        /// Output names answered as JSON.
        json_outputs: &'p [String],
    },
    /// A list of items, which come through [`ItemSink`].
    Items {
        /// The answer key of the list.
        key: &'p str,
    },
    /// Any other answer: its members come whole, through [`AnswerSink::members`].
    Members {
        /// `format`: the keys in their formatted spelling.
        format: bool,
        /// The members that are counts (the objects of a HEAD), `{"count": n}` each (after
        /// its `@explain`): the answer puts its envelope's members around each.
        counts: &'p [String],
    },
}

/// Where a read's answer goes: `exec::read::run` opens it with the answer's form, then hands
/// it the rows, the items or the members.
pub trait AnswerSink<'p>: RowSink + ItemSink {
    /// Called once, before anything else (again after [`RowSink::restart`]).
    fn open(&mut self, form: Form<'p>);

    /// The members of a general answer, in request order.
    fn members(&mut self, results: Map<String, Json>);

    /// The rows went past the answer's budget and the cursor was stopped there.
    fn over_budget(&self) -> bool {
        false
    }

    /// Bytes of the answer left: it cannot be started again on another database.
    fn started(&self) -> bool {
        false
    }
}
