//! JSON Patch (RFC 6902) `add`, `remove` and `replace`, applied as a client applies them: what
//! the tests of live answers hold the server's patches against.

use serde_json::Value;

/// Applies `ops` to `doc`; panics on an operation the document cannot take.
pub fn apply(doc: &mut Value, ops: &[Value]) {
    for op in ops {
        let path = op["path"].as_str().expect("path");
        let segments: Vec<String> = path
            .split('/')
            .skip(1)
            .map(|s| s.replace("~1", "/").replace("~0", "~"))
            .collect();
        let (last, parents) = segments.split_last().expect("not the root");
        let mut target = &mut *doc;
        for s in parents {
            target = match target {
                Value::Object(m) => m.get_mut(s).expect("member"),
                Value::Array(a) => &mut a[s.parse::<usize>().expect("index")],
                _ => panic!("no container at {path}"),
            };
        }
        let value = op.get("value").cloned();
        match (op["op"].as_str().expect("op"), target) {
            ("add" | "replace", Value::Object(m)) => {
                m.insert(last.clone(), value.expect("value"));
            }
            ("remove", Value::Object(m)) => {
                m.remove(last).expect("present");
            }
            ("add", Value::Array(a)) => a.insert(last.parse().expect("index"), value.expect("v")),
            ("replace", Value::Array(a)) => {
                a[last.parse::<usize>().expect("index")] = value.expect("v")
            }
            ("remove", Value::Array(a)) => {
                a.remove(last.parse().expect("index"));
            }
            (op, _) => panic!("cannot {op} at {path}"),
        }
    }
}
