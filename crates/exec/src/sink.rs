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
    /// The client went away.
    #[error("the client closed the connection")]
    Closed,
}

/// Receives the rows of one statement.
pub trait RowSink: Send {
    /// Called once before the first row with the output column names, in select order.
    fn columns(&mut self, names: &[String]);

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
}

/// Collects rows as JSON objects: NULL columns omitted, JSON columns parsed.
#[derive(Debug, Default)]
pub struct CollectSink {
    names: Vec<String>,
    json: Vec<bool>,
    json_outputs: Vec<String>,
    /// The rows read.
    pub rows: Vec<Map<String, Json>>,
}

impl CollectSink {
    /// A sink that parses the columns named in `json_outputs` as JSON.
    pub fn new(json_outputs: &[String]) -> CollectSink {
        CollectSink {
            json_outputs: json_outputs.to_vec(),
            ..CollectSink::default()
        }
    }
}

impl RowSink for CollectSink {
    fn columns(&mut self, names: &[String]) {
        self.json = names
            .iter()
            .map(|n| self.json_outputs.contains(n))
            .collect();
        self.names = names.to_vec();
    }

    fn row(&mut self, cells: &[Cell<'_>]) -> Result<(), SinkError> {
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
}
