//! What a request tells the access log and the metrics beyond its answer: the [`Facts`] the
//! request entry and the HTTP handlers gather, the tables it names, the rows it answered.

use crate::metrics::Metrics;
use apijet_request::{is_table_key, Node, Request};
use serde_json::{Map, Value as Json};
use std::time::Duration;

/// What the pipeline learned about a request, for the access log and metrics; handlers put it
/// in the response's extensions.
#[derive(Debug, Clone, Default)]
pub struct Facts {
    /// The APIJSON code of the answer.
    pub code: u16,
    /// The `table` metrics label: the first table the request names.
    pub table: Option<usize>,
    /// Every table the request names, comma-separated; filled only when the access log is on.
    pub tables: Option<String>,
    /// Whether the stages are timed (`server_timing`): reading the clock around each stage
    /// costs every request, and only the `Server-Timing` header shows the times.
    pub timed: bool,
    /// SQL statements run.
    pub statements: Option<usize>,
    /// Rows answered, when known.
    pub rows: Option<u64>,
    /// Parsing the body.
    pub parse: Option<Duration>,
    /// Planning a streamed list (its database time follows the headers).
    pub plan: Option<Duration>,
    /// Planning and running a buffered read.
    pub exec: Option<Duration>,
    /// Serializing a buffered answer.
    pub encode: Option<Duration>,
    /// A read's `x-apijet-cache`: `hit` or `miss`.
    pub cache: Option<&'static str>,
}

impl Facts {
    /// Facts of a call, its stages timed when `timed` (`server_timing`).
    pub fn timed(timed: bool) -> Facts {
        Facts {
            timed,
            ..Facts::default()
        }
    }

    /// The time a stage starts, when the stages are timed.
    pub fn clock(&self) -> Option<std::time::Instant> {
        self.timed.then(std::time::Instant::now)
    }
}

/// The tables a parsed body names: by its root keys, and the keys inside each list
/// (`"[]": {"User": …}`).
pub fn body_tables(map: &Map<String, Json>) -> impl Iterator<Item = &str> {
    map.iter()
        .flat_map(|(k, v)| {
            let inner = (k.ends_with("[]"))
                .then(|| v.as_object())
                .flatten()
                .into_iter()
                .flat_map(|m| m.keys());
            std::iter::once(k).chain(inner)
        })
        .filter_map(|k| table_of(k))
}

/// The tables a request tree names, as [`body_tables`] reads them from its body (members
/// that ask for nothing, `null` or a list with nothing to list, are not in the tree, and
/// name no table here). A table object's key was read once already.
pub fn tree_tables(req: &Request) -> impl Iterator<Item = &str> {
    req.root.members.iter().flat_map(|m| {
        let inner = match &m.node {
            Node::Array(a) => a.items.members.as_slice(),
            _ => &[],
        };
        std::iter::once(m)
            .chain(inner)
            .filter_map(|m| match &m.node {
                Node::Table(t) => Some(t.key.table.as_str()),
                _ => table_of(&m.key),
            })
    })
}

/// The table a key names: `User` for `User`, `User:me`, `User[]` and `User-id[]`.
fn table_of(k: &str) -> Option<&str> {
    // `trim_end_matches("[]")` and `split([':', '-'])`, by bytes: the generic string
    // searchers cost more than the rest of this function. Every byte looked for is ASCII,
    // so each cut is at a character boundary.
    let mut end = k.len();
    while k.as_bytes()[..end].ends_with(b"[]") {
        end -= 2;
    }
    let end = k.as_bytes()[..end]
        .iter()
        .position(|&b| b == b':' || b == b'-')
        .unwrap_or(end);
    let k = k.get(..end)?;
    is_table_key(k).then_some(k)
}

/// Notes the tables a request names, for metrics (the first) and the access log (all of
/// them, only when it is on), from [`body_tables`] or [`tree_tables`].
pub fn note_tables<'a>(
    metrics: &Metrics,
    mut tables: impl Iterator<Item = &'a str>,
    facts: &mut Facts,
) {
    if tracing::enabled!(tracing::Level::INFO) {
        // Written straight into the log's list: no vector of names, no join.
        let mut all = String::new();
        facts.table = None;
        for t in tables {
            if all.is_empty() {
                facts.table = Some(metrics.table_index(t));
            } else {
                all.push(',');
            }
            all.push_str(t);
        }
        facts.tables = Some(all);
    } else {
        facts.table = tables.next().map(|t| metrics.table_index(t));
    }
}

/// Rows in a buffered answer, for the access log: every object under a table key, and every
/// item of a list. Bounded in depth like the answers themselves.
pub fn rows_in(v: &Json, depth: usize) -> u64 {
    if depth > 16 {
        return 0;
    }
    match v {
        Json::Array(items) => items
            .iter()
            .map(|item| match item {
                Json::Object(m) if m.keys().any(|k| is_table_key(k) || k.ends_with("[]")) => {
                    rows_in(item, depth + 1)
                }
                _ => 1,
            })
            .sum(),
        Json::Object(m) => m
            .iter()
            .map(|(k, child)| match child {
                Json::Object(_) if is_table_key(k) => 1 + rows_in(child, depth + 1),
                Json::Array(_) if k.ends_with("[]") => rows_in(child, depth + 1),
                _ => 0,
            })
            .sum(),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::rows_in;
    use serde_json::json;

    #[test]
    fn the_table_of_a_key_is_its_name_without_brackets_alias_or_suffix() {
        use super::{body_tables, note_tables, tree_tables, Facts};
        use crate::metrics::Metrics;
        let metrics = Metrics::new(["User", "Comment"].into_iter());
        for (key, table) in [
            ("User", Some("User")),
            ("User[]", Some("User")),
            ("User[][]", Some("User")),
            ("User:me", Some("User")),
            ("User-id[]", Some("User")),
            ("Comment:c-x[]", Some("Comment")),
            ("[]", None),
            ("user", None),
            ("@explain", None),
        ] {
            let map = serde_json::json!({ key: {"id": 1} });
            let map = map.as_object().expect("an object");
            let mut facts = Facts::default();
            note_tables(&metrics, body_tables(map), &mut facts);
            let expected = table.map(|t| metrics.table_index(t));
            assert_eq!(facts.table, expected, "{key}");
            let req = apijet_request::Request::from_map(map.clone()).expect("a request");
            let mut facts = Facts::default();
            note_tables(&metrics, tree_tables(&req), &mut facts);
            assert_eq!(facts.table, expected, "{key} in the tree");
        }
    }

    #[test]
    fn rows_count_objects_under_tables_and_list_items() {
        let one = json!({"User": {"id": 1}, "ok": true, "code": 200});
        assert_eq!(rows_in(&one, 0), 1);
        let list = json!({"Moment[]": [{"id": 1}, {"id": 2}, {"id": 3}], "code": 200});
        assert_eq!(rows_in(&list, 0), 3);
        let joined = json!({"[]": [
            {"Moment": {"id": 1}, "User": {"id": 7}},
            {"Moment": {"id": 2}, "User": {"id": 8}, "Comment[]": [{"id": 5}, {"id": 6}]}
        ]});
        assert_eq!(rows_in(&joined, 0), 6);
        let ids = json!({"Moment-id[]": [1, 2]});
        assert_eq!(rows_in(&ids, 0), 2);
    }
}
