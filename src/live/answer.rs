//! One answer of a subscription as its streams send it: written once, shared by every stream,
//! and held only until each stream that follows it took it. What a result keeps of its latest
//! answer after that is its id (a hash of its content) and its size, not the answer: the next
//! answer is compared by id.

use bytes::Bytes;
use serde_json::{Map, Value as Json};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// What a stream sends of an answer: the answer as `/get` writes it, and the JSON patch from
/// the answer with id `.0` to it, when someone asked for patches.
pub type Sendable = (Bytes, Option<(String, Bytes)>);

/// An answer, written as JSON, with the id of its content.
#[derive(Debug)]
pub struct LiveAnswer {
    /// The content's id (a hash of the answer without `time`): the same answer has the same
    /// id on every instance, so a client that reconnects elsewhere skips what it has.
    pub id: String,
    /// The size of the answer without `time`: answers are the same when their sizes and ids
    /// are.
    pub size: usize,
    /// The answer (and its patch) until every stream that follows it took it.
    held: Mutex<Option<Sendable>>,
    /// Streams yet to take it.
    pending: AtomicUsize,
}

impl LiveAnswer {
    /// An answer that `streams` streams will take.
    pub fn new(written: &Written, patch: Option<(String, Bytes)>, streams: usize) -> Self {
        let full = written.full();
        LiveAnswer {
            id: written.id.clone(),
            size: written.text.len(),
            held: Mutex::new((streams > 0).then_some((full, patch))),
            pending: AtomicUsize::new(streams),
        }
    }

    /// An answer no stream takes (the first, which its subscriber sent itself): its id and
    /// size.
    pub fn sent(id: String, size: usize) -> Self {
        LiveAnswer {
            id,
            size,
            held: Mutex::new(None),
            pending: AtomicUsize::new(0),
        }
    }

    /// The answer for one stream; the last stream to take it leaves only its id and size.
    pub fn take(&self) -> Option<Sendable> {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let out = held.clone();
        self.release(&mut held);
        out
    }

    /// A stream that has this answer already (its own first read) takes nothing.
    pub fn seen(&self) {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        self.release(&mut held);
    }

    fn release(&self, held: &mut Option<Sendable>) {
        let before = self
            .pending
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
            .unwrap_or(0);
        if before <= 1 {
            *held = None;
        }
    }

    /// Bytes of the answer (and its patch) still held for streams that have yet to take it.
    pub fn held_bytes(&self) -> usize {
        let held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        held.as_ref().map_or(0, |(full, patch)| {
            full.len()
                + patch
                    .as_ref()
                    .map_or(0, |(base, ops)| base.len() + ops.len())
        })
    }

    /// Whether it is `written`'s content.
    pub fn is(&self, written: &Written) -> bool {
        self.size == written.text.len() && self.id == written.id
    }
}

/// An answer written without its `time`, the form answers are compared in.
pub struct Written {
    /// The answer without `time`, as JSON text.
    pub text: Bytes,
    /// The answer as JSON, when it was read as JSON (a whole answer): patches are made from it.
    pub content: Option<Map<String, Json>>,
    /// Its id.
    pub id: String,
    /// The `time` it was answered at.
    pub time: Json,
}

impl Written {
    /// Splits `time` off an envelope and writes the rest.
    pub fn of(answer: Json) -> Written {
        let mut content = match answer {
            Json::Object(m) => m,
            other => {
                let mut m = Map::new();
                m.insert("answer".into(), other);
                m
            }
        };
        let time = content.remove("time").unwrap_or(Json::Null);
        let text = Bytes::from(serde_json::to_vec(&content).unwrap_or_default());
        Written {
            id: content_id(&text),
            content: Some(content),
            text,
            time,
        }
    }

    /// A successful answer written as text without its `time` (a multiplexed read's).
    pub fn untimed(text: Bytes, time_ms: u64) -> Written {
        Written {
            id: content_id(&text),
            content: None,
            text,
            time: Json::from(time_ms),
        }
    }

    /// The answer as `/get` writes it: the content, then `time` last.
    pub fn full(&self) -> Bytes {
        let mut out = Vec::with_capacity(self.text.len() + 24);
        match self.text.split_last() {
            Some((b'}', body)) if body.len() > 1 => {
                out.extend_from_slice(body);
                out.extend_from_slice(b",\"time\":");
            }
            _ => {
                out.extend_from_slice(b"{\"time\":");
            }
        }
        out.extend_from_slice(self.time.to_string().as_bytes());
        out.push(b'}');
        Bytes::from(out)
    }
}

/// FNV-1a over the answer's text: stable across builds and instances, unlike the standard
/// library's hasher, and an id needs no secrecy.
fn content_id(text: &[u8]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

#[cfg(test)]
mod tests {
    use super::{LiveAnswer, Written};
    use bytes::Bytes;
    use serde_json::json;

    #[test]
    fn the_full_answer_puts_time_back_last() {
        let w =
            Written::of(json!({"Moment":{"id":1},"ok":true,"code":200,"msg":"success","time":5}));
        assert_eq!(
            std::str::from_utf8(&w.full()).expect("utf-8"),
            r#"{"Moment":{"id":1},"ok":true,"code":200,"msg":"success","time":5}"#
        );
        let again =
            Written::of(json!({"Moment":{"id":1},"ok":true,"code":200,"msg":"success","time":9}));
        assert_eq!(w.id, again.id, "time is not part of the content");
        let other =
            Written::of(json!({"Moment":{"id":2},"ok":true,"code":200,"msg":"success","time":5}));
        assert_ne!(w.id, other.id);
        let untimed = Written::untimed(
            Bytes::from_static(br#"{"Moment":{"id":1},"ok":true,"code":200,"msg":"success"}"#),
            5,
        );
        assert_eq!(untimed.id, w.id, "one content, one id, however it was read");
        assert_eq!(untimed.full(), w.full());
    }

    #[test]
    fn an_answer_is_held_until_every_stream_took_it_then_only_its_id_and_size() {
        let text = format!(r#"{{"User":{{"name":"{}"}}}}"#, "x".repeat(1000));
        let written = Written::untimed(Bytes::from(text), 5);
        let a = LiveAnswer::new(&written, None, 2);
        assert!(a.held_bytes() > 1000);
        assert_eq!(a.take().map(|(f, _)| f), Some(written.full()));
        assert!(a.held_bytes() > 1000, "one stream has yet to take it");
        a.seen();
        assert_eq!(a.held_bytes(), 0);
        assert!(a.is(&written), "its id and size are kept");
        assert!(a.take().is_none());
        assert_eq!(LiveAnswer::new(&written, None, 0).held_bytes(), 0);
    }
}
