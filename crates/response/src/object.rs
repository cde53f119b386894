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
use bytes::Bytes;

/// Writes the answer of one table object from its first row.
#[derive(Debug)]
pub struct ObjectSink<'a> {
    key: &'a str,
    json_outputs: &'a [String],
    /// The escaped column names, each followed by `:`, end to end.
    names: Vec<u8>,
    /// Where each column's name ends in `names`, its length unescaped (for the budget), and
    /// whether it is answered as JSON.
    columns: Vec<(usize, usize, bool)>,
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
    /// A sink for the object answered under `key`, within the buffered path's budget.
    pub fn new(
        key: &'a str,
        json_outputs: &'a [String],
        max_rows: usize,
        max_bytes: usize,
    ) -> ObjectSink<'a> {
        ObjectSink {
            key,
            json_outputs,
            names: Vec::new(),
            columns: Vec::new(),
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

impl RowSink for ObjectSink<'_> {
    fn columns<'n>(&mut self, names: impl ColumnNames<'n>) {
        self.names.clear();
        self.columns.clear();
        // Sized once: grown a doubling at a time, the buffers were reallocated several times
        // per lookup.
        self.names
            .reserve(names.clone().map(|n| n.len() + 3).sum::<usize>());
        self.columns.reserve(names.len());
        for n in names {
            write_string(n, &mut self.names);
            self.names.push(b':');
            let json = self.json_outputs.iter().any(|j| j == n);
            self.columns.push((self.names.len(), n.len(), json));
        }
    }

    fn row(&mut self, cells: &[Cell<'_>]) -> Result<(), SinkError> {
        self.rows += 1;
        // Measured before anything is copied: a cell past the budget is never buffered.
        let size = row_bytes(cells, self.columns.iter().map(|&(_, len, _)| len));
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
            for (cell, &(end, _, json)) in cells.iter().zip(&self.columns) {
                let name = &self.names[start..end];
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
        let mut sink = ObjectSink::new("User:u", &json, 10, 1 << 20);
        sink.columns(names.iter().copied());
        sink.row(&cells).expect("row");
        let got = sink.finish(7);
        assert_eq!(
            std::str::from_utf8(&got).expect("utf8"),
            buffered("User:u", &names, &cells, &json)
        );
    }

    #[test]
    fn no_row_is_the_bare_envelope_and_the_budget_holds() {
        let sink = ObjectSink::new("User", &[], 10, 1 << 20);
        assert_eq!(
            &sink.finish(7)[..],
            br#"{"ok":true,"code":200,"msg":"success","time":7}"#
        );
        let mut sink = ObjectSink::new("User", &[], 10, 8);
        sink.columns(["name"].into_iter());
        assert!(sink.row(&[Cell::Text("longer than eight".into())]).is_err());
        assert!(sink.over_budget);
    }
}
