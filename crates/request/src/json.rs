//! Body bytes → an ordered JSON object.
//!
//! APIJSON clients routinely send bodies with `//` and `/* */` comments (the Java server's JSON
//! library tolerates them, and the upstream examples are full of them), so comments are blanked
//! out before `serde_json` sees the text. Blanking with spaces instead of removing keeps the
//! error offsets that serde_json reports pointing at the client's own text.

use crate::RequestError;
use serde_json::{Map, Value};
use std::borrow::Cow;

/// Parses a request body: JSON text, optionally with comments, whose top level is an object.
pub fn parse_body(body: &[u8]) -> Result<Map<String, Value>, RequestError> {
    match serde_json::from_str::<Value>(&text(body)?) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(RequestError::NotAnObject),
        Err(e) => Err(RequestError::InvalidJson(e.to_string())),
    }
}

/// A body's JSON text: UTF-8, not blank, its comments blanked out.
pub(crate) fn text(body: &[u8]) -> Result<Cow<'_, str>, RequestError> {
    let text = std::str::from_utf8(body)
        .map_err(|_| RequestError::InvalidJson("the body is not UTF-8 text".into()))?;
    let text = if text.contains('/') {
        Cow::Owned(blank_comments(text))
    } else {
        Cow::Borrowed(text)
    };
    if text.trim().is_empty() {
        return Err(RequestError::InvalidJson("the body is empty".into()));
    }
    Ok(text)
}

/// Replaces `//…` and `/*…*/` outside string literals with spaces (newlines are kept).
fn blank_comments(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    let mut in_string = false;
    while i < bytes.len() {
        let b = bytes[i];
        if in_string {
            out.push(b);
            if b == b'\\' && i + 1 < bytes.len() {
                out.push(bytes[i + 1]);
                i += 2;
                continue;
            }
            if b == b'"' {
                in_string = false;
            }
            i += 1;
            continue;
        }
        match (b, bytes.get(i + 1)) {
            (b'"', _) => {
                in_string = true;
                out.push(b);
                i += 1;
            }
            (b'/', Some(b'/')) => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    out.push(b' ');
                    i += 1;
                }
            }
            (b'/', Some(b'*')) => {
                out.extend_from_slice(b"  ");
                i += 2;
                while i < bytes.len() && !(bytes[i] == b'*' && bytes.get(i + 1) == Some(&b'/')) {
                    out.push(if bytes[i] == b'\n' { b'\n' } else { b' ' });
                    i += 1;
                }
                if i < bytes.len() {
                    out.extend_from_slice(b"  ");
                    i += 2;
                }
            }
            _ => {
                out.push(b);
                i += 1;
            }
        }
    }
    // Only ASCII bytes were replaced by ASCII bytes, so the text is still UTF-8.
    String::from_utf8(out).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_are_ignored_but_not_inside_strings() {
        let body = br#"{ // a comment
            "User": { /* block */ "name": "a//b/*c*/" }
        }"#;
        let map = parse_body(body).expect("parses");
        assert_eq!(map["User"]["name"], "a//b/*c*/");
    }

    #[test]
    fn key_order_is_kept() {
        let map = parse_body(br#"{"b":1,"a":2,"c":3}"#).expect("parses");
        let keys: Vec<_> = map.keys().cloned().collect();
        assert_eq!(keys, ["b", "a", "c"]);
    }

    #[test]
    fn truncated_body_is_invalid_json() {
        assert!(matches!(
            parse_body(br#"{"User":"#),
            Err(RequestError::InvalidJson(_))
        ));
        assert!(matches!(parse_body(b"[1]"), Err(RequestError::NotAnObject)));
    }
}
