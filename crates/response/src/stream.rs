//! The streaming writer: rows go from the database cursor to the socket as JSON bytes.
//!
//! [`StreamSink`] encodes each row straight into a reused buffer (pre-escaped keys, NULLs
//! omitted, no `serde_json::Value` per row) and hands ~128 KiB chunks to the HTTP body through
//! a bounded channel. A slow client fills the channel, `flush` waits, the backend stops
//! reading its cursor, and memory stays flat whatever the row count.
//!
//! Its answer has the byte budget of every answer, `max_answer_bytes`: each row is measured
//! before it is encoded, so a row (a cell) past the budget is refused before it is copied, as
//! a 406 envelope when nothing was sent yet. Once bytes have left, the list is cut there and
//! the answer still ends as JSON, its envelope saying why: `"ok":false,"code":406` and a
//! message naming `max_answer_bytes` ([`Chunk::Cut`]).
//!
//! The list key is written only when the first row arrives, so an empty list is omitted as
//! in the buffered path, and `ok`/`code`/`msg`/`time` come last. Other failures after the
//! first chunk cannot change the answer any more: the body is aborted instead of closed, so no
//! client can take a truncated list for a whole one.

use crate::cell_json::{write_cell, write_string};
use crate::ApiError;
use apijet_exec::cell::Cell;
use apijet_exec::sink::{row_bytes, ColumnNames, RowSink, SinkError};
use bytes::{Bytes, BytesMut};
use tokio::sync::mpsc;

/// What the producer sends to the HTTP body.
#[derive(Debug)]
pub enum Chunk {
    /// Bytes of the answer.
    Data(Bytes),
    /// The request failed; before any data this becomes an error envelope, after it an abort.
    Fail(ApiError),
    /// How many statements the whole answer ran, when all ran before its first byte (sent
    /// just before the first `Data`, for the `x-apijet-statements` header).
    Statements(usize),
    /// The last bytes of an answer cut at its byte budget after bytes had left: they end the
    /// answer as JSON whose envelope says so; whatever follows is not sent.
    Cut(Bytes),
}

/// Bytes per chunk sent to the body: large enough that handing chunks over (a channel send, a
/// task wake-up, a socket write) stays a small share of a long list's time.
pub(crate) const CHUNK: usize = 128 * 1024;

/// Encodes rows of a list into JSON chunks.
pub struct StreamSink {
    tx: mpsc::Sender<Chunk>,
    buf: BytesMut,
    /// `{"Moment[]":[` (or `{"[]":[`), written before the first row.
    open: Vec<u8>,
    /// `{"Moment":` for `[]` lists, empty for `Table[]`.
    item_prefix: Vec<u8>,
    item_suffix: &'static [u8],
    /// `,"name":` per column.
    keys: Vec<Vec<u8>>,
    json: Vec<bool>,
    json_outputs: Vec<String>,
    rows: u64,
    /// About how many bytes the rows made so far, against `max_bytes`.
    bytes: usize,
    max_bytes: usize,
    /// Bytes left for the client.
    sent: bool,
    /// The answer reached its budget after bytes had left, and was ended there.
    cut: bool,
}

impl StreamSink {
    /// A sink for the list `list_key`; `wrap_key` is the table key that wraps each item of a
    /// `[]` list (`None` for `Table[]`, whose items are the rows themselves). Its rows may make
    /// about `max_bytes` of JSON.
    pub fn new(
        tx: mpsc::Sender<Chunk>,
        list_key: &str,
        wrap_key: Option<&str>,
        json_outputs: Vec<String>,
        max_bytes: usize,
    ) -> StreamSink {
        let mut open = b"{".to_vec();
        write_string(list_key, &mut open);
        open.extend_from_slice(b":[");
        let (item_prefix, item_suffix): (Vec<u8>, &'static [u8]) = match wrap_key {
            Some(k) => {
                let mut p = b"{".to_vec();
                write_string(k, &mut p);
                p.push(b':');
                (p, b"}")
            }
            None => (Vec::new(), b""),
        };
        StreamSink {
            tx,
            buf: BytesMut::with_capacity(CHUNK + 4096),
            open,
            item_prefix,
            item_suffix,
            keys: Vec::new(),
            json: Vec::new(),
            json_outputs,
            rows: 0,
            bytes: 0,
            max_bytes,
            sent: false,
            cut: false,
        }
    }

    /// Rows written so far.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Whether bytes have left: after that the answer can only be completed or aborted.
    pub fn started(&self) -> bool {
        self.sent
    }

    /// Writes the closing bytes and the envelope, and sends what is left.
    pub async fn finish(mut self, time_ms: u64) -> Result<(), SinkError> {
        close_answer(&mut self.buf, self.rows == 0, time_ms);
        self.flush().await
    }
}

impl StreamSink {
    /// Ends the answer after the rows written with an envelope that says it was cut at its
    /// budget; the next flush hands it over as the answer's end. Only once bytes have left
    /// (before, the refusal is an envelope of its own), so the list is open.
    fn cut(&mut self) {
        self.cut = true;
        let msg = format!(
            "the answer reached max_answer_bytes ({} bytes) after {} rows and was cut there: \
             the list above is incomplete; ask for fewer rows (count, page) or columns",
            self.max_bytes, self.rows
        );
        let buf = &mut self.buf;
        buf.extend_from_slice(b"],\"ok\":false,\"code\":406,\"msg\":");
        write_string(&msg, buf);
        buf.extend_from_slice(b",\"time\":");
        buf.extend_from_slice(itoa::Buffer::new().format(crate::now_ms()).as_bytes());
        buf.extend_from_slice(b"}");
    }
}

/// Ends an answer whose list was opened unless `empty`: the list's `]` and the envelope.
pub(crate) fn close_answer(buf: &mut BytesMut, empty: bool, time_ms: u64) {
    if empty {
        buf.extend_from_slice(b"{");
    } else {
        buf.extend_from_slice(b"],");
    }
    buf.extend_from_slice(crate::SUCCEEDED_UNTIL_TIME);
    buf.extend_from_slice(itoa::Buffer::new().format(time_ms).as_bytes());
    buf.extend_from_slice(b"}");
}

impl RowSink for StreamSink {
    fn columns<'n>(&mut self, names: impl ColumnNames<'n>) {
        self.keys = names
            .clone()
            .map(|n| {
                let mut k = Vec::with_capacity(n.len() + 4);
                k.push(b',');
                write_string(n, &mut k);
                k.push(b':');
                k
            })
            .collect();
        self.json = names
            .map(|n| self.json_outputs.iter().any(|j| j == n))
            .collect();
    }

    fn row(&mut self, cells: &[Cell<'_>]) -> Result<(), SinkError> {
        // Each key's bytes count its comma and colon, as `row_bytes` counts them.
        let size = row_bytes(cells, self.keys.iter().map(|k| k.len().saturating_sub(4)));
        self.bytes = self.bytes.saturating_add(size);
        if self.cut || (self.bytes > self.max_bytes && !self.sent) {
            return Err(SinkError::TooLarge(self.max_bytes));
        }
        if self.bytes > self.max_bytes {
            // Bytes have left: the answer ends here, said so, at the next flush.
            self.cut();
            return Ok(());
        }
        let buf = &mut self.buf;
        if self.rows == 0 {
            buf.extend_from_slice(&self.open);
        } else {
            buf.extend_from_slice(b",");
        }
        buf.extend_from_slice(&self.item_prefix);
        buf.extend_from_slice(b"{");
        // Each key carries its leading comma; the first written skips it.
        let mut skip = 1;
        for ((cell, key), &json) in cells.iter().zip(&self.keys).zip(&self.json) {
            if matches!(cell, Cell::Null) {
                continue;
            }
            buf.extend_from_slice(key.get(skip..).unwrap_or_default());
            skip = 0;
            write_cell(cell, json, buf);
        }
        buf.extend_from_slice(b"}");
        buf.extend_from_slice(self.item_suffix);
        self.rows += 1;
        Ok(())
    }

    fn wants_flush(&self) -> bool {
        self.cut || self.buf.len() >= CHUNK
    }

    async fn flush(&mut self) -> Result<(), SinkError> {
        if self.cut {
            let end = self.buf.split().freeze();
            let _ = self.tx.send(Chunk::Cut(end)).await;
            // The statement stops here.
            return Err(SinkError::TooLarge(self.max_bytes));
        }
        self.sent |= !self.buf.is_empty();
        send_chunk(&mut self.buf, &self.tx).await
    }
}

/// Sends what `buf` holds as one chunk (nothing when it is empty).
pub(crate) async fn send_chunk(
    buf: &mut BytesMut,
    tx: &mpsc::Sender<Chunk>,
) -> Result<(), SinkError> {
    if buf.is_empty() {
        return Ok(());
    }
    let chunk = buf.split().freeze();
    // `split` hands the whole allocation on; without a fresh one the next chunk would grow
    // from nothing through a series of reallocations.
    buf.reserve(CHUNK + 4096);
    tx.send(Chunk::Data(chunk))
        .await
        .map_err(|_| SinkError::Closed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn rows_stream_in_the_envelope_and_empty_lists_are_omitted() {
        let (tx, mut rx) = mpsc::channel(4);
        let mut sink = StreamSink::new(tx, "User[]", None, vec!["tags".into()], 1 << 20);
        sink.columns(["id", "name", "tags"].into_iter());
        sink.row(&[Cell::Int(1), Cell::Null, Cell::Text("[1,2]".into())])
            .expect("row");
        sink.row(&[Cell::Int(2), Cell::Text("b".into()), Cell::Null])
            .expect("row");
        sink.finish(7).await.expect("finish");
        let Some(Chunk::Data(d)) = rx.recv().await else {
            panic!("data")
        };
        assert_eq!(
            std::str::from_utf8(&d).expect("utf8"),
            r#"{"User[]":[{"id":1,"tags":[1,2]},{"id":2,"name":"b"}],"ok":true,"code":200,"msg":"success","time":7}"#
        );
        let (tx, mut rx) = mpsc::channel(4);
        let mut sink = StreamSink::new(tx, "[]", Some("User"), Vec::new(), 1 << 20);
        sink.columns(["id"].into_iter());
        sink.finish(7).await.expect("finish");
        let Some(Chunk::Data(d)) = rx.recv().await else {
            panic!("data")
        };
        assert_eq!(
            std::str::from_utf8(&d).expect("utf8"),
            r#"{"ok":true,"code":200,"msg":"success","time":7}"#
        );
    }

    #[tokio::test]
    async fn a_list_past_its_budget_after_bytes_left_ends_as_json_that_says_so() {
        let (tx, mut rx) = mpsc::channel(8);
        let mut sink = StreamSink::new(tx, "User[]", None, Vec::new(), 2 * CHUNK);
        sink.columns(["id", "name"].into_iter());
        let name = "n".repeat(1000);
        let mut written = 0;
        let stopped = loop {
            match sink.row(&[Cell::Int(written), Cell::Text(name.as_str().into())]) {
                Ok(()) => written += 1,
                Err(e) => break e,
            }
            if sink.wants_flush() {
                if let Err(e) = sink.flush().await {
                    break e;
                }
            }
        };
        assert!(matches!(stopped, SinkError::TooLarge(_)), "{stopped:?}");
        drop(sink);
        let mut body = Vec::new();
        let mut cut = false;
        while let Some(chunk) = rx.recv().await {
            match chunk {
                Chunk::Data(d) => body.extend_from_slice(&d),
                Chunk::Cut(d) => {
                    body.extend_from_slice(&d);
                    cut = true;
                }
                other => panic!("{other:?}"),
            }
        }
        assert!(cut, "the last bytes end the answer");
        let answer: serde_json::Value = serde_json::from_slice(&body).expect("valid JSON");
        assert_eq!(answer["ok"], false);
        assert_eq!(answer["code"], 406);
        let msg = answer["msg"].as_str().expect("msg");
        assert!(msg.contains("max_answer_bytes"), "{msg}");
        let rows = answer["User[]"]
            .as_array()
            .expect("the rows before the cut")
            .len();
        assert!(rows > 100 && rows < written as usize, "{rows} of {written}");
    }

    #[tokio::test]
    async fn a_row_past_the_byte_budget_is_refused_before_it_is_encoded() {
        let (tx, _rx) = mpsc::channel(4);
        let mut sink = StreamSink::new(tx, "User[]", None, Vec::new(), 100);
        sink.columns(["id", "name"].into_iter());
        sink.row(&[Cell::Int(1), Cell::Text("a".into())])
            .expect("within the budget");
        let written = sink.buf.len();
        let big = "x".repeat(200);
        let refused = sink.row(&[Cell::Int(2), Cell::Text(big.as_str().into())]);
        assert!(
            matches!(refused, Err(SinkError::TooLarge(100))),
            "{refused:?}"
        );
        assert_eq!(
            sink.buf.len(),
            written,
            "nothing of the refused row was written"
        );
        assert_eq!(sink.rows(), 1);
        let msg = apijet_exec::ExecError::from(SinkError::TooLarge(100)).to_string();
        assert!(msg.contains("max_answer_bytes"), "{msg}");
    }
}
