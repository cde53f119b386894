//! The answer of a read, in the form its plan chose: [`AnswerWriter`] is the sink
//! `apijet_exec::read::run` writes into, and holds the writer of that form: one object written
//! as its row is read ([`ObjectSink`]), a list streamed row by row ([`StreamSink`]) or item by
//! item ([`ItemStream`]), or the whole members of a general answer ([`crate::success`]).

use crate::nested::ItemStream;
use crate::object::ObjectSink;
use crate::stream::{Chunk, StreamSink};
use apijet_exec::cell::Cell;
use apijet_exec::sink::{AnswerSink, ColumnNames, Form, ItemSink, RowSink, SinkError};
use bytes::Bytes;
use serde_json::{Map, Value as Json};
use tokio::sync::mpsc;

/// The writer of one read's answer.
pub struct AnswerWriter<'p> {
    writer: Writer<'p>,
    /// Where a streamed answer's chunks go (none: the answer is held whole).
    tx: Option<mpsc::Sender<Chunk>>,
    /// The chunks of an answer held whole whatever its form ([`AnswerWriter::held`]).
    held: Option<mpsc::Receiver<Chunk>>,
    max_rows: usize,
    max_bytes: usize,
}

enum Writer<'p> {
    Unopened,
    Object(ObjectSink<'p>),
    List(StreamSink),
    Items(ItemStream),
    Members(Map<String, Json>, bool, &'p [String]),
}

/// A written answer.
#[derive(Debug)]
pub enum Finished {
    /// The whole answer, written (one object).
    Bytes {
        /// The answer.
        body: Bytes,
        /// Rows it holds.
        rows: u64,
    },
    /// The whole answer as JSON (a general read).
    Json(Json),
    /// The answer went out as chunks.
    Sent {
        /// Rows or items it held.
        rows: u64,
    },
}

impl<'p> AnswerWriter<'p> {
    /// A writer that holds the answer whole (a point lookup, a general read), within
    /// `max_rows` and about `max_bytes`.
    pub fn buffered(max_rows: usize, max_bytes: usize) -> AnswerWriter<'p> {
        AnswerWriter {
            writer: Writer::Unopened,
            tx: None,
            held: None,
            max_rows,
            max_bytes,
        }
    }

    /// A writer that sends the answer's chunks to `tx` as they fill (a list).
    pub fn streamed(
        tx: mpsc::Sender<Chunk>,
        max_rows: usize,
        max_bytes: usize,
    ) -> AnswerWriter<'p> {
        AnswerWriter {
            tx: Some(tx),
            ..AnswerWriter::buffered(max_rows, max_bytes)
        }
    }

    /// A writer that holds the answer whole whatever its form, a list's included (one
    /// request's answer of a multiplexed read): [`AnswerWriter::untimed`] gives it.
    pub fn held(max_rows: usize, max_bytes: usize) -> AnswerWriter<'p> {
        // A list's chunks wait here: nothing flushes them before the answer ends, which then
        // sends its one chunk.
        let (tx, rx) = mpsc::channel(4);
        AnswerWriter {
            held: Some(rx),
            ..AnswerWriter::streamed(tx, max_rows, max_bytes)
        }
    }

    /// The whole answer of a [`AnswerWriter::held`] writer, without its `time`: the text the
    /// answer is compared in, byte for byte what `/get` sends but for `,"time":…` (a general
    /// answer's members are written by the serializer that writes `/get`'s whole answers).
    pub async fn untimed(mut self) -> Result<Bytes, SinkError> {
        let mut rx = self.held.take();
        let body = match self.finish(0, 1).await? {
            Finished::Bytes { body, .. } => body.to_vec(),
            Finished::Sent { .. } => {
                let mut body = Vec::new();
                if let Some(rx) = rx.as_mut() {
                    while let Ok(chunk) = rx.try_recv() {
                        match chunk {
                            Chunk::Data(data) => body.extend_from_slice(&data),
                            // A held answer cut at its budget is not one to share: its
                            // subscriber is read alone, and gets the cut as its own read does.
                            Chunk::Fail(_) | Chunk::Cut(_) => return Err(SinkError::Closed),
                            Chunk::Statements(_) => {}
                        }
                    }
                }
                body
            }
            Finished::Json(answer) => serde_json::to_vec(&answer).map_err(|_| SinkError::Closed)?,
        };
        // Written with `time` 0 last: the envelope ends `,"time":0}`.
        let untimed = body
            .strip_suffix(b",\"time\":0}")
            .ok_or(SinkError::Closed)?;
        let mut text = Vec::with_capacity(untimed.len() + 1);
        text.extend_from_slice(untimed);
        text.push(b'}');
        Ok(Bytes::from(text))
    }

    /// Ends the answer: the envelope after what was written, sent or returned. `statements`
    /// goes before the first chunk of a streamed answer that was held whole.
    pub async fn finish(self, time_ms: u64, statements: usize) -> Result<Finished, SinkError> {
        Ok(match self.writer {
            Writer::Unopened => Finished::Json(crate::success_at(Map::new(), false, time_ms)),
            Writer::Object(sink) => Finished::Bytes {
                rows: sink.rows() as u64,
                body: sink.finish(time_ms),
            },
            Writer::List(sink) => {
                let rows = sink.rows();
                sink.finish(time_ms).await?;
                Finished::Sent { rows }
            }
            Writer::Items(sink) => {
                let rows = sink.items();
                sink.finish(time_ms, statements).await?;
                Finished::Sent { rows }
            }
            Writer::Members(mut members, format, counts) => {
                for key in counts {
                    if let Some(Json::Object(obj)) = members.get_mut(key) {
                        crate::counted(obj);
                    }
                }
                Finished::Json(crate::success_at(members, format, time_ms))
            }
        })
    }

    fn channel(&self) -> mpsc::Sender<Chunk> {
        match &self.tx {
            Some(tx) => tx.clone(),
            // A held answer has no channel: a list opened on it has nowhere to go, and its
            // first row finds the channel closed.
            None => mpsc::channel(1).0,
        }
    }
}

impl<'p> AnswerSink<'p> for AnswerWriter<'p> {
    fn open(&mut self, form: Form<'p>) {
        self.writer = match form {
            Form::Object {
                key,
                json_outputs,
                names,
            } => Writer::Object(ObjectSink::new(
                key,
                json_outputs,
                names,
                self.max_rows,
                self.max_bytes,
            )),
            Form::List {
                key,
                wrap,
                json_outputs,
            } => Writer::List(StreamSink::new(
                self.channel(),
                key,
                wrap,
                json_outputs.to_vec(),
                self.max_bytes,
            )),
            Form::Items { key } => Writer::Items(ItemStream::new(self.channel(), key)),
            Form::Members { format, counts } => Writer::Members(Map::new(), format, counts),
        };
    }

    fn members(&mut self, results: Map<String, Json>) {
        if let Writer::Members(members, ..) = &mut self.writer {
            *members = results;
        }
    }

    fn over_budget(&self) -> bool {
        matches!(&self.writer, Writer::Object(sink) if sink.over_budget)
    }

    fn started(&self) -> bool {
        match &self.writer {
            Writer::List(sink) => sink.started(),
            Writer::Items(sink) => sink.started(),
            _ => false,
        }
    }
}

impl RowSink for AnswerWriter<'_> {
    fn columns<'n>(&mut self, names: impl ColumnNames<'n>) {
        match &mut self.writer {
            Writer::Object(sink) => sink.columns(names),
            Writer::List(sink) => sink.columns(names),
            _ => {}
        }
    }

    fn row(&mut self, cells: &[Cell<'_>]) -> Result<(), SinkError> {
        match &mut self.writer {
            Writer::Object(sink) => sink.row(cells),
            Writer::List(sink) => sink.row(cells),
            _ => Err(SinkError::Closed),
        }
    }

    fn wants_flush(&self) -> bool {
        matches!(&self.writer, Writer::List(sink) if RowSink::wants_flush(sink))
    }

    async fn flush(&mut self) -> Result<(), SinkError> {
        match &mut self.writer {
            Writer::List(sink) => RowSink::flush(sink).await,
            _ => Ok(()),
        }
    }

    fn restartable(&self) -> bool {
        matches!(self.writer, Writer::Object(_))
    }

    fn restart(&mut self) {
        match &mut self.writer {
            Writer::Object(sink) => sink.restart(),
            // Opened again by the read that starts over.
            _ => self.writer = Writer::Unopened,
        }
    }
}

impl ItemSink for AnswerWriter<'_> {
    fn item(&mut self, item: Json) {
        if let Writer::Items(sink) = &mut self.writer {
            sink.item(item);
        }
    }

    fn wants_flush(&self) -> bool {
        matches!(&self.writer, Writer::Items(sink) if ItemSink::wants_flush(sink))
    }

    async fn flush(&mut self) -> Result<(), SinkError> {
        match &mut self.writer {
            Writer::Items(sink) => ItemSink::flush(sink).await,
            _ => Ok(()),
        }
    }
}
