//! The writer of a streamed nested list: items (JSON values built by `exec`, one at a time) go
//! into the answer's bytes as they come, encoded exactly as the buffered answer encodes them.
//!
//! `exec` decides when the bytes may leave (see `apijet_exec::read`, nested lists): until then
//! they stay here, so a refusal found meanwhile is still an error envelope. When the answer
//! ends before any byte left, the statement count goes first ([`Chunk::Statements`]) for the
//! `x-apijet-statements` header.

use crate::stream::{close_answer, send_chunk, Chunk, CHUNK};
use apijet_exec::sink::{ItemSink, SinkError};
use bytes::{BufMut, BytesMut};
use serde_json::Value as Json;
use tokio::sync::mpsc;

/// Encodes the items of one list into the answer's chunks.
pub struct ItemStream {
    tx: mpsc::Sender<Chunk>,
    buf: BytesMut,
    /// `{"[]":[`, written before the first item.
    open: Vec<u8>,
    items: u64,
    sent: bool,
}

impl ItemStream {
    /// A writer for the list `list_key`.
    pub fn new(tx: mpsc::Sender<Chunk>, list_key: &str) -> ItemStream {
        let mut open = b"{".to_vec();
        // Infallible for a string; the same encoder as the buffered answer.
        let _ = serde_json::to_writer(&mut open, list_key);
        open.extend_from_slice(b":[");
        ItemStream {
            tx,
            buf: BytesMut::with_capacity(CHUNK + 4096),
            open,
            items: 0,
            sent: false,
        }
    }

    /// Items written so far.
    pub fn items(&self) -> u64 {
        self.items
    }

    /// Whether bytes have left: after that the answer can only be completed or aborted.
    pub fn started(&self) -> bool {
        self.sent
    }

    /// Forgets what was written (only before anything left), to read the list again.
    pub fn restart(&mut self) {
        debug_assert!(!self.sent);
        self.buf.clear();
        self.items = 0;
    }

    /// Writes the end of the answer and sends what is left, with the statement count first
    /// when the whole answer is still here.
    pub async fn finish(mut self, time_ms: u64, statements: usize) -> Result<(), SinkError> {
        if !self.sent {
            self.tx
                .send(Chunk::Statements(statements))
                .await
                .map_err(|_| SinkError::Closed)?;
        }
        close_answer(&mut self.buf, self.items == 0, time_ms);
        self.flush().await
    }
}

impl ItemSink for ItemStream {
    fn item(&mut self, item: Json) {
        if self.items == 0 {
            self.buf.extend_from_slice(&self.open);
        } else {
            self.buf.put_u8(b',');
        }
        // Writing a JSON value into memory cannot fail.
        let _ = serde_json::to_writer((&mut self.buf).writer(), &item);
        self.items += 1;
    }

    fn wants_flush(&self) -> bool {
        self.buf.len() >= CHUNK
    }

    async fn flush(&mut self) -> Result<(), SinkError> {
        self.sent |= !self.buf.is_empty();
        send_chunk(&mut self.buf, &self.tx).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    async fn answer(items: Vec<Json>) -> String {
        let (tx, mut rx) = mpsc::channel(4);
        let mut sink = ItemStream::new(tx, "[]");
        for item in items {
            sink.item(item);
        }
        sink.finish(7, 3).await.expect("finish");
        assert!(matches!(rx.recv().await, Some(Chunk::Statements(3))));
        let Some(Chunk::Data(d)) = rx.recv().await else {
            panic!("data")
        };
        String::from_utf8(d.to_vec()).expect("utf8")
    }

    #[tokio::test]
    async fn items_are_encoded_as_the_buffered_answer_encodes_them() {
        let items = vec![
            json!({"Moment": {"id": 1, "content": "a\"b"}, "User": {"id": 2, "name": "雪"}}),
            json!({"Moment": {"id": 3, "pictureList": [1.5, null]}}),
        ];
        let mut whole = serde_json::Map::new();
        whole.insert("[]".into(), Json::Array(items.clone()));
        let whole = crate::success(whole, false);
        let mut expected = serde_json::to_string(&whole).expect("json");
        let time = whole["time"].to_string();
        expected = expected.replace(&format!("\"time\":{time}"), "\"time\":7");
        assert_eq!(answer(items).await, expected);
        assert_eq!(
            answer(Vec::new()).await,
            r#"{"ok":true,"code":200,"msg":"success","time":7}"#
        );
    }
}
