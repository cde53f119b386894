//! How a recorded answer and ours are compared: ignored keys dropped, numbers by value,
//! timestamps without a trailing `.0`, key order after content; and when a difference on
//! PostgreSQL may be due only to row order the request leaves to the engine.

use serde_json::{Map, Value};

use super::{Case, SHOW_CHARS};
use crate::support::truncate;

/// A failure line's text: the difference, then both answers (without the ignored keys), cut.
pub(crate) fn describe(why: &str, expected: &Value, got: &Value) -> String {
    format!(
        "{why} (expected {} / got {})",
        truncate(&strip_ignored(expected).to_string(), SHOW_CHARS),
        truncate(&strip_ignored(got).to_string(), SHOW_CHARS)
    )
}

fn code_of(answer: &Value) -> Option<i64> {
    answer.get("code").and_then(Value::as_i64)
}

/// Whether a PostgreSQL answer that differs may differ only because the request leaves row order
/// to the engine: both answers are successes, the request has an array without `@order` (or a
/// single object whose first matching row is the engine's choice: no `@order`, no `id`), and the
/// answers have the same shape (keys in the same order, same array lengths, same value types; only
/// values and the order of array items may differ). Another shape is a real failure.
pub(crate) fn may_depend_on_row_order(case: &Case, got: &Value) -> bool {
    code_of(&case.response) == Some(200)
        && code_of(got) == Some(200)
        && (has_unordered_array(&case.request) || has_unpinned_object(&case.request))
        && shape(&strip_ignored(&case.response)) == shape(&strip_ignored(got))
}

/// The structure of a value without its scalar values: object keys in order (`@explain` by
/// presence only), array items as a sorted list of their shapes, scalars by type.
fn shape(value: &Value) -> String {
    match value {
        Value::Object(m) => {
            let fields: Vec<String> = m
                .iter()
                .map(|(k, v)| {
                    if k == "@explain" {
                        k.clone()
                    } else {
                        format!("{k:?}:{}", shape(v))
                    }
                })
                .collect();
            format!("{{{}}}", fields.join(","))
        }
        Value::Array(a) => {
            let mut items: Vec<String> = a.iter().map(shape).collect();
            items.sort();
            format!("[{}]", items.join(","))
        }
        Value::Number(_) => "n".into(),
        Value::String(_) => "s".into(),
        Value::Bool(_) => "b".into(),
        Value::Null => "null".into(),
    }
}

/// Whether the request has an array (`key[]` with an object value) with no `@order` anywhere inside.
fn has_unordered_array(request: &Value) -> bool {
    fn has_order(v: &Value) -> bool {
        match v {
            Value::Object(m) => m.iter().any(|(k, v)| k == "@order" || has_order(v)),
            Value::Array(a) => a.iter().any(has_order),
            _ => false,
        }
    }
    match request {
        Value::Object(m) => m.iter().any(|(k, v)| {
            (k.ends_with("[]") && v.is_object() && !has_order(v)) || has_unordered_array(v)
        }),
        Value::Array(a) => a.iter().any(has_unordered_array),
        _ => false,
    }
}

/// Whether the request has a table object (`Table` with an object value) that neither orders its
/// rows nor names one by `id`: its one answered row is whichever the engine finds first.
fn has_unpinned_object(request: &Value) -> bool {
    match request {
        Value::Object(m) => m.iter().any(|(k, v)| {
            let table = k.starts_with(|c: char| c.is_ascii_uppercase()) && !k.ends_with("[]");
            match v {
                Value::Object(o) if table => {
                    (!o.contains_key("@order") && !o.contains_key("id")) || has_unpinned_object(v)
                }
                _ => has_unpinned_object(v),
            }
        }),
        _ => false,
    }
}

fn is_ignored_key(key: &str) -> bool {
    key == "time"
        || ["debug:", "sql:", "trace:", "depth:", "time:"]
            .iter()
            .any(|p| key.starts_with(p))
}

/// `value` without the ignored keys, at every level, in the same key order.
fn strip_ignored(value: &Value) -> Value {
    match value {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| !is_ignored_key(k))
                .map(|(k, v)| (k.clone(), strip_ignored(v)))
                .collect::<Map<_, _>>(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(strip_ignored).collect()),
        other => other.clone(),
    }
}

/// `None` when `got` matches `expected`, else the first difference (content before key order).
pub(crate) fn compare(expected: &Value, got: &Value) -> Option<String> {
    let (expected, got) = (strip_ignored(expected), strip_ignored(got));
    if code_of(&expected).is_some_and(|c| c != 200) {
        let (ec, gc) = (expected.get("code"), got.get("code"));
        let (eo, go) = (expected.get("ok"), got.get("ok"));
        let same = |a: Option<&Value>, b: Option<&Value>| match (a, b) {
            (Some(a), Some(b)) => values_equal(a, b),
            (a, b) => a == b,
        };
        if same(ec, gc) && same(eo, go) {
            return None;
        }
        let show = |v: Option<&Value>| v.map_or("(none)".to_string(), Value::to_string);
        return Some(format!(
            "code/ok differ: expected code {} ok {}, got code {} ok {}",
            show(ec),
            show(eo),
            show(gc),
            show(go)
        ));
    }
    let mut diffs = Diffs::default();
    diff(&expected, &got, "", &mut diffs);
    let (first, total) = match (diffs.content.first(), diffs.order.first()) {
        (Some(first), _) => (first, diffs.content.len()),
        (None, Some(first)) => (first, diffs.order.len()),
        (None, None) => return None,
    };
    Some(if total > 1 {
        format!("{first} (+{} more)", total - 1)
    } else {
        first.clone()
    })
}

#[derive(Default)]
struct Diffs {
    content: Vec<String>,
    order: Vec<String>,
}

fn show(v: &Value) -> String {
    truncate(&v.to_string(), 80)
}

fn diff(expected: &Value, got: &Value, path: &str, out: &mut Diffs) {
    let at = if path.is_empty() { "/" } else { path };
    match (expected, got) {
        (Value::Object(e), Value::Object(g)) => {
            for (k, ev) in e {
                match g.get(k) {
                    None => out
                        .content
                        .push(format!("{path}/{k}: missing (expected {})", show(ev))),
                    Some(_) if k == "@explain" => {}
                    Some(gv) => diff(ev, gv, &format!("{path}/{k}"), out),
                }
            }
            for (k, gv) in g.iter().filter(|(k, _)| !e.contains_key(*k)) {
                out.content
                    .push(format!("{path}/{k}: unexpected key (got {})", show(gv)));
            }
            let e_order: Vec<&String> = e.keys().filter(|k| g.contains_key(*k)).collect();
            let g_order: Vec<&String> = g.keys().filter(|k| e.contains_key(*k)).collect();
            if e_order != g_order {
                out.order.push(format!(
                    "{at}: key order differs: expected {e_order:?}, got {g_order:?}"
                ));
            }
        }
        (Value::Array(e), Value::Array(g)) => {
            if e.len() != g.len() {
                out.content
                    .push(format!("{at}: expected {} items, got {}", e.len(), g.len()));
            }
            for (i, (ev, gv)) in e.iter().zip(g).enumerate() {
                diff(ev, gv, &format!("{path}/{i}"), out);
            }
        }
        (e, g) if values_equal(e, g) => {}
        (e, g) => out
            .content
            .push(format!("{at}: expected {}, got {}", show(e), show(g))),
    }
}

/// Scalars: numbers by value (1 == 1.0), timestamps with a trailing `.0` ignored.
fn values_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            match (x.as_i64(), y.as_i64(), x.as_u64(), y.as_u64()) {
                (Some(x), Some(y), _, _) => x == y,
                (_, _, Some(x), Some(y)) => x == y,
                _ => x.as_f64().zip(y.as_f64()).is_some_and(|(x, y)| x == y),
            }
        }
        (Value::String(x), Value::String(y)) => normalize_timestamp(x) == normalize_timestamp(y),
        _ => a == b,
    }
}

/// `yyyy-MM-dd HH:mm:ss.0` → `yyyy-MM-dd HH:mm:ss`; any other text as is.
fn normalize_timestamp(s: &str) -> &str {
    let b = s.as_bytes();
    let shape_ok = b.len() >= 19
        && b[..19].iter().enumerate().all(|(i, c)| match i {
            4 | 7 => *c == b'-',
            10 => *c == b' ',
            13 | 16 => *c == b':',
            _ => c.is_ascii_digit(),
        });
    let fraction_ok = match &b[19.min(b.len())..] {
        [] => true,
        [b'.', digits @ ..] => !digits.is_empty() && digits.iter().all(u8::is_ascii_digit),
        _ => false,
    };
    if shape_ok && fraction_ok {
        s.strip_suffix(".0").unwrap_or(s)
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn timestamps_ignore_a_trailing_dot_zero() {
        assert_eq!(
            normalize_timestamp("2017-02-08 08:06:11.0"),
            "2017-02-08 08:06:11"
        );
        assert_eq!(
            normalize_timestamp("2017-02-08 08:06:11.5"),
            "2017-02-08 08:06:11.5"
        );
        assert_eq!(
            normalize_timestamp("x2017-02-08 08:06:11.0"),
            "x2017-02-08 08:06:11.0"
        );
        assert_eq!(normalize_timestamp("1.0"), "1.0");
    }

    #[test]
    fn compare_normalizes_and_reports() {
        let expected = json!({"User": {"id": 1, "date": "2017-02-08 08:06:11.0", "@explain": {"sql": "a"}},
                              "ok": true, "code": 200, "msg": "success"});
        let got = json!({"User": {"id": 1.0, "date": "2017-02-08 08:06:11", "@explain": {"sql": "b"}, "sql:1": "x"},
                         "ok": true, "code": 200, "msg": "success", "time": 3});
        assert_eq!(compare(&expected, &got), None);

        let reordered = json!({"User": {"date": "2017-02-08 08:06:11", "id": 1, "@explain": {}},
                               "ok": true, "code": 200, "msg": "success"});
        let why = compare(&expected, &reordered).expect("key order is checked");
        assert!(why.contains("key order differs"), "{why}");

        let wrong = json!({"User": {"id": 2}, "ok": true, "code": 200, "msg": "success"});
        let why = compare(&expected, &wrong).expect("content differs");
        assert!(why.starts_with("/User/id: expected 1, got 2"), "{why}");

        let error = json!({"ok": false, "code": 406, "msg": "a"});
        assert_eq!(
            compare(&error, &json!({"ok": false, "code": 406, "msg": "b"})),
            None
        );
        assert!(compare(&error, &json!({"ok": false, "code": 400})).is_some());
    }

    #[test]
    fn unordered_arrays_are_found() {
        assert!(has_unordered_array(&json!({"[]": {"User": {}}})));
        assert!(!has_unordered_array(
            &json!({"[]": {"User": {"@order": "id+"}}})
        ));
        assert!(has_unordered_array(
            &json!({"User": {"Moment[]": {"Moment": {}}}})
        ));
        assert!(!has_unordered_array(&json!({"User": {"id": 1}})));
    }

    #[test]
    fn unpinned_objects_are_found() {
        assert!(has_unpinned_object(
            &json!({"Moment": {"date>": "2017-02-01"}})
        ));
        assert!(!has_unpinned_object(&json!({"Moment": {"id": 12}})));
        assert!(!has_unpinned_object(
            &json!({"Moment": {"@order": "date+"}})
        ));
    }

    #[test]
    fn row_order_is_blamed_only_for_same_shapes() {
        let case = |response: Value| Case {
            id: "REF-T".into(),
            method: "/get".into(),
            login: None,
            name: String::new(),
            request: json!({"[]": {"count": 2, "User": {"@column": "id,name"}}}),
            response,
        };
        let expected =
            json!({"[]": [{"User": {"id": 1, "name": "a"}}, {"User": {"id": 2}}], "code": 200});
        let other_rows =
            json!({"[]": [{"User": {"id": 3}}, {"User": {"id": 4, "name": "b"}}], "code": 200});
        assert!(may_depend_on_row_order(
            &case(expected.clone()),
            &other_rows
        ));
        let extra_key = json!({"[]": [{"User": {"id": 3, "@explain": {}}}, {"User": {"id": 4, "name": "b"}}], "code": 200});
        assert!(!may_depend_on_row_order(
            &case(expected.clone()),
            &extra_key
        ));
        let fewer = json!({"[]": [{"User": {"id": 1, "name": "a"}}], "code": 200});
        assert!(!may_depend_on_row_order(&case(expected.clone()), &fewer));
        let failed = json!({"code": 400});
        assert!(!may_depend_on_row_order(&case(expected), &failed));
    }
}
