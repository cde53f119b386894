//! One answer of a subscription as its streams send it: written once, shared by every stream.

use bytes::Bytes;
use serde_json::{Map, Value as Json};

/// An answer, written as JSON, with the id of its content.
#[derive(Debug)]
pub struct LiveAnswer {
    /// The content's id (a hash of the answer without `time`): the same answer has the same
    /// id on every instance, so a client that reconnects elsewhere skips what it has.
    pub id: String,
    /// The answer as `/get` writes it, `time` included.
    pub full: Bytes,
    /// The JSON patch from the answer with id `.0` to this one, when someone asked for patches.
    pub patch: Option<(String, Bytes)>,
}

/// An answer written without its `time`, the form answers are compared in.
pub struct Written {
    /// The answer without `time`.
    pub content: Map<String, Json>,
    /// `content` as JSON text.
    pub text: Vec<u8>,
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
        let text = serde_json::to_vec(&content).unwrap_or_default();
        let id = content_id(&text);
        Written {
            content,
            text,
            id,
            time,
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
    use super::Written;
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
    }
}
