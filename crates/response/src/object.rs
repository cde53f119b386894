//! The answer of a single-object read, written as bytes while its row is read.
//!
//! [`ObjectSink`] takes the row of a point lookup and writes the whole envelope,
//! `{"Key":{…},"ok":true,"code":200,"msg":"success","time":…}`, exactly as serializing the
//! buffered path's JSON value would (NULL columns left out, members in column order), without
//! building that value. It keeps the buffered path's budget: a row past `max_rows` or about
//! `max_answer_bytes` stops the cursor and sets [`ObjectSink::over_budget`].

use crate::cell_json::{write_cell, write_string};
use apijet_exec::cell::Cell;
use apijet_exec::sink::{row_bytes, ColumnNames, RowSink, SinkError};
use apijet_plan::template::WrittenNames;
use bytes::Bytes;
use std::sync::OnceLock;

/// Writes the answer of one table object from its first row.
#[derive(Debug)]
pub struct ObjectSink<'a> {
    key: &'a str,
    json_outputs: &'a [String],
    /// Where the statement's column names are kept written, when it is its shape's template.
    keep: Option<&'a OnceLock<WrittenNames>>,
    /// The kept names, when they are this statement's.
    kept: Option<&'a WrittenNames>,
    /// The names written for this statement alone, when none are kept for it.
    own: WrittenNames,
    /// `{"Key":{…}` once a row arrived: the answer up to the envelope's members.
    object: Vec<u8>,
    rows: usize,
    bytes: usize,
    max_rows: usize,
    max_bytes: usize,
    /// The row went past `max_rows` or `max_bytes`: the cursor was stopped there.
    pub over_budget: bool,
}

impl<'a> ObjectSink<'a> {
    /// A sink for the object answered under `key`, within the buffered path's budget; the
    /// column names are kept written in `keep` (the statement's template) when there is one.
    pub fn new(
        key: &'a str,
        json_outputs: &'a [String],
        keep: Option<&'a OnceLock<WrittenNames>>,
        max_rows: usize,
        max_bytes: usize,
    ) -> ObjectSink<'a> {
        ObjectSink {
            key,
            json_outputs,
            keep,
            kept: None,
            own: WrittenNames::default(),
            object: Vec::new(),
            rows: 0,
            bytes: 0,
            max_rows,
            max_bytes,
            over_budget: false,
        }
    }

    /// Rows taken (0 or 1 for a lookup).
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// The whole answer: the object when a row was read, then the envelope.
    pub fn finish(self, time_ms: u64) -> Bytes {
        let mut out = self.object;
        if out.is_empty() {
            out.reserve(64);
            out.push(b'{');
        } else {
            out.push(b',');
        }
        out.extend_from_slice(crate::SUCCEEDED_UNTIL_TIME);
        out.extend_from_slice(itoa::Buffer::new().format(time_ms).as_bytes());
        out.push(b'}');
        Bytes::from(out)
    }
}

/// The column names `names` as the answer writes them, with whether each is answered as
/// JSON (named in `json_outputs`).
pub fn written_names<'n>(names: impl ColumnNames<'n>, json_outputs: &[String]) -> WrittenNames {
    // Sized once: grown a doubling at a time, the buffers were reallocated several times.
    let mut out = WrittenNames {
        given: String::with_capacity(names.clone().map(str::len).sum()),
        written: Vec::with_capacity(names.clone().map(|n| n.len() + 3).sum()),
        columns: Vec::with_capacity(names.len()),
    };
    for n in names {
        out.given.push_str(n);
        write_string(n, &mut out.written);
        out.written.push(b':');
        let json = json_outputs.iter().any(|j| j == n);
        out.columns.push((out.given.len(), out.written.len(), json));
    }
    out
}

impl RowSink for ObjectSink<'_> {
    fn columns<'n>(&mut self, names: impl ColumnNames<'n>) {
        self.kept = None;
        if let Some(keep) = self.keep {
            // Written once per template: its statement answers the same names every time.
            // A kept set that is not this statement's names is not used (nor replaced).
            let json_outputs = self.json_outputs;
            let kept = keep.get_or_init(|| written_names(names.clone(), json_outputs));
            if kept.are(names.clone()) {
                self.kept = Some(kept);
                return;
            }
        }
        self.own = written_names(names, self.json_outputs);
    }

    fn row(&mut self, cells: &[Cell<'_>]) -> Result<(), SinkError> {
        self.rows += 1;
        let names = self.kept.unwrap_or(&self.own);
        let lengths = names.columns.iter().scan(0, |start, &(end, _, _)| {
            let len = end - *start;
            *start = end;
            Some(len)
        });
        // Measured before anything is copied: a cell past the budget is never buffered.
        let size = row_bytes(cells, lengths);
        if self.rows > self.max_rows || self.bytes.saturating_add(size) > self.max_bytes {
            self.over_budget = true;
            return Err(SinkError::Closed);
        }
        if self.rows == 1 {
            self.bytes += size;
            let out = &mut self.object;
            // The envelope's members follow in `finish`, in the same buffer.
            out.reserve(size + self.key.len() + 8 + 64);
            out.push(b'{');
            write_string(self.key, out);
            out.extend_from_slice(b":{");
            let mut start = 0;
            let mut first = true;
            for (cell, &(_, end, json)) in cells.iter().zip(&names.columns) {
                let name = &names.written[start..end];
                start = end;
                if matches!(cell, Cell::Null) {
                    continue;
                }
                if !first {
                    out.push(b',');
                }
                first = false;
                out.extend_from_slice(name);
                write_answer_cell(cell, json, out);
            }
            out.push(b'}');
        }
        Ok(())
    }

    fn restartable(&self) -> bool {
        true
    }

    fn restart(&mut self) {
        self.object.clear();
        self.rows = 0;
        self.bytes = 0;
        self.over_budget = false;
    }
}

/// One non-NULL cell as the buffered answer writes it: JSON documents re-serialized compactly
/// (that path parses them), everything else by the shared cell writer.
fn write_answer_cell(cell: &Cell<'_>, as_json: bool, out: &mut Vec<u8>) {
    let reparsed = match cell {
        Cell::Json(_) => true,
        Cell::Text(_) => as_json,
        _ => false,
    };
    if reparsed {
        // Writing a value into a vector cannot fail.
        let _ = serde_json::to_writer(&mut *out, &cell.to_json(as_json));
    } else {
        write_cell(cell, as_json, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Map, Value};

    /// What the buffered path answers for the same row.
    fn buffered(key: &str, names: &[&str], cells: &[Cell<'_>], json: &[String]) -> String {
        let mut obj = Map::new();
        for (n, c) in names.iter().zip(cells) {
            if !matches!(c, Cell::Null) {
                obj.insert(n.to_string(), c.to_json(json.iter().any(|j| j == n)));
            }
        }
        let mut m = Map::new();
        m.insert(key.into(), Value::Object(obj));
        let mut v = crate::success(m, false);
        v["time"] = json!(7);
        serde_json::to_string(&v).expect("json")
    }

    #[test]
    fn a_row_is_written_as_the_buffered_path_serializes_it() {
        let names = ["id", "name", "gone", "tags", "big", "price", "note"];
        let cells = [
            Cell::Int(82001),
            Cell::Text("a \"quoted\"\u{8} name\u{c}\n".into()),
            Cell::Null,
            Cell::Text("[1, 2, {\"a\": 1.50}]".into()),
            Cell::Int(1 << 60),
            Cell::Float(2.5),
            Cell::Decimal("157782.61".into()),
        ];
        let json = vec!["tags".to_string()];
        let mut sink = ObjectSink::new("User:u", &json, None, 10, 1 << 20);
        sink.columns(names.iter().copied());
        sink.row(&cells).expect("row");
        let got = sink.finish(7);
        assert_eq!(
            std::str::from_utf8(&got).expect("utf8"),
            buffered("User:u", &names, &cells, &json)
        );
    }

    fn strs(names: &[String]) -> Vec<&str> {
        names.iter().map(String::as_str).collect()
    }

    /// One lookup's answer through a sink whose names are kept in `keep`.
    fn through(
        keep: &OnceLock<WrittenNames>,
        names: &[String],
        cells: &[Cell<'_>],
        json: &[String],
    ) -> String {
        let mut sink = ObjectSink::new("T", json, Some(keep), 10, 1 << 20);
        sink.columns(names.iter().map(String::as_str));
        sink.row(cells).expect("row");
        String::from_utf8(sink.finish(7).to_vec()).expect("utf8")
    }

    proptest::proptest! {
        /// Names kept written with a template answer as names written for each lookup do,
        /// whatever they hold (quotes, backslashes, control characters, any Unicode), and a
        /// statement answering other names than those kept is written with its own.
        #[test]
        fn kept_names_answer_as_names_written_afresh(
            names in proptest::collection::btree_set("(?s).{0,12}", 1..6),
            other in proptest::collection::btree_set("(?s).{0,12}", 1..6),
            json_at in proptest::collection::vec(proptest::bool::ANY, 6),
        ) {
            // A statement's output names are distinct.
            let names: Vec<String> = names.into_iter().rev().collect();
            let other: Vec<String> = other.into_iter().collect();
            let json: Vec<String> = names
                .iter()
                .zip(&json_at)
                .filter(|(_, j)| **j)
                .map(|(n, _)| n.clone())
                .collect();
            let row = |names: &[String]| -> Vec<Cell<'static>> {
                (0..names.len()).map(|i| Cell::Text(format!("[{i}, \"{i}\"]").into())).collect()
            };
            let keep = OnceLock::new();
            for _ in 0..2 {
                let cells = row(&names);
                let fresh = buffered("T", &strs(&names), &cells, &json);
                proptest::prop_assert_eq!(through(&keep, &names, &cells, &json), fresh);
            }
            let cells = row(&other);
            let fresh = buffered("T", &strs(&other), &cells, &json);
            proptest::prop_assert_eq!(through(&keep, &other, &cells, &json), fresh);
            proptest::prop_assert_eq!(keep.get(), Some(&written_names(names.iter().map(String::as_str), &json)));
        }
    }

    #[test]
    fn no_row_is_the_bare_envelope_and_the_budget_holds() {
        let sink = ObjectSink::new("User", &[], None, 10, 1 << 20);
        assert_eq!(
            &sink.finish(7)[..],
            br#"{"ok":true,"code":200,"msg":"success","time":7}"#
        );
        let mut sink = ObjectSink::new("User", &[], None, 10, 8);
        sink.columns(["name"].into_iter());
        assert!(sink.row(&[Cell::Text("longer than eight".into())]).is_err());
        assert!(sink.over_budget);
    }
}
