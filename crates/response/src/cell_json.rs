//! One database cell written as JSON straight into an output buffer, byte for byte as
//! serializing [`Cell::to_json`]'s value would write it (except JSON documents, copied as
//! stored): the writer shared by streamed lists, nested streams and point answers.

use apijet_exec::cell::{Cell, DateTimeText, MAX_SAFE_INTEGER};
use bytes::BufMut;

/// Writes one non-NULL cell as JSON, exactly as [`Cell::to_json`] would serialize.
pub fn write_cell(cell: &Cell<'_>, as_json: bool, buf: &mut impl BufMut) {
    match cell {
        Cell::Null => buf.put_slice(b"null"),
        Cell::Bool(b) => buf.put_slice(if *b { b"true" } else { b"false" }),
        Cell::Int(i) if i.unsigned_abs() <= MAX_SAFE_INTEGER as u64 => {
            buf.put_slice(itoa::Buffer::new().format(*i).as_bytes())
        }
        Cell::UInt(u) if *u <= MAX_SAFE_INTEGER as u64 => {
            buf.put_slice(itoa::Buffer::new().format(*u).as_bytes())
        }
        // Beyond JavaScript's safe integers: rare, the shared conversion keeps the format.
        Cell::Int(_) | Cell::UInt(_) => write_value(&cell.to_json(false), buf),
        Cell::Decimal(d) => write_string(d, buf),
        Cell::Float(f) if f.is_finite() => write_value(f, buf),
        Cell::Float(_) => buf.put_slice(b"null"),
        Cell::Text(t) if as_json => write_json_text(t, buf),
        Cell::Text(t) => write_string(t, buf),
        Cell::Json(t) => write_json_text(t, buf),
        // Digits and separators only: nothing to escape.
        Cell::DateTime(dt) => write_quoted(DateTimeText::new(dt).as_bytes(), buf),
        Cell::Date(d) => write_quoted(DateTimeText::date(d).as_bytes(), buf),
        Cell::Time(t) => write_quoted(DateTimeText::time(t).as_bytes(), buf),
        Cell::Bytes(_) => write_value(&cell.to_json(as_json), buf),
    }
}

fn write_quoted(s: &[u8], buf: &mut impl BufMut) {
    buf.put_u8(b'"');
    buf.put_slice(s);
    buf.put_u8(b'"');
}

/// Writes `v` as serde_json does, straight into the buffer.
fn write_value<T: serde::Serialize + ?Sized>(v: &T, buf: &mut impl BufMut) {
    if serde_json::to_writer((&mut *buf).writer(), v).is_err() {
        buf.put_slice(b"null");
    }
}

/// JSON documents from the database are copied as they are when valid; text that only
/// claims to be JSON is answered as a string.
fn write_json_text(t: &str, buf: &mut impl BufMut) {
    if serde_json::from_str::<serde::de::IgnoredAny>(t).is_ok() {
        buf.put_slice(t.trim().as_bytes());
    } else {
        write_string(t, buf);
    }
}

/// Writes `s` as a JSON string literal.
pub fn write_string(s: &str, buf: &mut impl BufMut) {
    let bytes = s.as_bytes();
    // Most names and values need no escape: one pass without early exit (which the compiler
    // vectorizes) tells, and they are copied whole.
    let escapes = bytes.iter().fold(false, |any, &b| {
        any | (b < 0x20) | (b == b'"') | (b == b'\\')
    });
    if !escapes {
        write_quoted(bytes, buf);
        return;
    }
    buf.put_u8(b'"');
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let esc: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0x08 => b"\\b",
            0x0c => b"\\f",
            0..=0x1f => {
                buf.put_slice(&bytes[start..i]);
                const HEX: &[u8; 16] = b"0123456789abcdef";
                buf.put_slice(&[
                    b'\\',
                    b'u',
                    b'0',
                    b'0',
                    HEX[usize::from(b >> 4)],
                    HEX[usize::from(b & 15)],
                ]);
                start = i + 1;
                continue;
            }
            _ => continue,
        };
        buf.put_slice(&bytes[start..i]);
        buf.put_slice(esc);
        start = i + 1;
    }
    buf.put_slice(&bytes[start..]);
    buf.put_u8(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_escape_like_serde_json() {
        for s in [
            "plain",
            "quote\"back\\slash",
            "line\nbreak\ttab",
            "ctl\u{1}",
            "backspace\u{8} formfeed\u{c} del\u{7f}",
            "雪 emoji 🦀",
            "",
            "\"",
            "a long name with nothing to escape, past the width of any vector register",
            "a long name that ends with what must be escaped, past any vector register\u{1f}",
        ] {
            let mut b = Vec::new();
            write_string(s, &mut b);
            assert_eq!(
                std::str::from_utf8(&b).expect("utf8"),
                serde_json::to_string(s).expect("json")
            );
        }
    }

    #[test]
    fn cells_write_as_the_buffered_answer_serializes_them() {
        let dt = chrono::NaiveDate::from_ymd_opt(2017, 2, 1)
            .and_then(|d| d.and_hms_micro_opt(11, 21, 50, 123_456))
            .expect("valid");
        let cells = [
            Cell::Bool(true),
            Cell::Int(0),
            Cell::Int(-MAX_SAFE_INTEGER),
            Cell::Int(MAX_SAFE_INTEGER + 1),
            Cell::Int(i64::MIN),
            Cell::UInt(u64::MAX),
            Cell::Float(0.1),
            Cell::Float(-0.0),
            Cell::Float(1e300),
            Cell::Float(5e-324),
            Cell::Float(f64::NAN),
            Cell::Float(f64::INFINITY),
            Cell::Decimal("-0.05".into()),
            Cell::Text("q\"b\\s\n\u{1} 雪".into()),
            Cell::DateTime(dt),
            Cell::Date(dt.date()),
            Cell::Time(dt.time()),
            Cell::Bytes(b"\x00\xffA".as_slice().into()),
        ];
        for cell in &cells {
            let mut b = Vec::new();
            write_cell(cell, false, &mut b);
            assert_eq!(
                std::str::from_utf8(&b).expect("utf8"),
                serde_json::to_string(&cell.to_json(false)).expect("json"),
                "{cell:?}"
            );
        }
    }
}
