//! JSON Patch (RFC 6902) from one answer to the next, for subscribers that asked for patches.
//!
//! Objects are compared member by member and arrays item by item (items added or removed at
//! the end); anything else that differs is replaced whole. The patch is not the shortest one,
//! but applying it to the old answer always gives the new one, which the property test checks.

use serde_json::{json, Map, Value as Json};

/// The operations that turn `old` into `new`.
pub fn diff(old: &Map<String, Json>, new: &Map<String, Json>) -> Vec<Json> {
    let mut ops = Vec::new();
    let mut path = String::new();
    objects(old, new, &mut path, &mut ops);
    ops
}

fn objects(
    old: &Map<String, Json>,
    new: &Map<String, Json>,
    path: &mut String,
    ops: &mut Vec<Json>,
) {
    for k in old.keys().filter(|k| !new.contains_key(*k)) {
        let at = path.len();
        push_segment(path, k);
        ops.push(json!({"op": "remove", "path": path.as_str()}));
        path.truncate(at);
    }
    for (k, v) in new {
        let at = path.len();
        push_segment(path, k);
        match old.get(k) {
            Some(before) => values(before, v, path, ops),
            None => ops.push(json!({"op": "add", "path": path.as_str(), "value": v})),
        }
        path.truncate(at);
    }
}

fn values(old: &Json, new: &Json, path: &mut String, ops: &mut Vec<Json>) {
    if old == new {
        return;
    }
    match (old, new) {
        (Json::Object(a), Json::Object(b)) => objects(a, b, path, ops),
        (Json::Array(a), Json::Array(b)) => {
            let common = a.len().min(b.len());
            for i in 0..common {
                let at = path.len();
                push_segment(path, &i.to_string());
                values(&a[i], &b[i], path, ops);
                path.truncate(at);
            }
            // From the end, so that each index is still valid when its operation applies.
            for i in (common..a.len()).rev() {
                ops.push(json!({"op": "remove", "path": format!("{path}/{i}")}));
            }
            for (i, v) in b.iter().enumerate().skip(common) {
                ops.push(json!({"op": "add", "path": format!("{path}/{i}"), "value": v}));
            }
        }
        _ => ops.push(json!({"op": "replace", "path": path.as_str(), "value": new})),
    }
}

/// `/segment` with `~` and `/` escaped (RFC 6901).
fn push_segment(path: &mut String, segment: &str) {
    path.push('/');
    for c in segment.chars() {
        match c {
            '~' => path.push_str("~0"),
            '/' => path.push_str("~1"),
            c => path.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::diff;
    use serde_json::{json, Map, Value as Json};

    /// RFC 6902 `add`, `remove` and `replace`, as a client applies them.
    fn apply(doc: &mut Json, ops: &[Json]) {
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
                    Json::Object(m) => m.get_mut(s).expect("member"),
                    Json::Array(a) => &mut a[s.parse::<usize>().expect("index")],
                    _ => panic!("no container at {path}"),
                };
            }
            let value = op.get("value").cloned();
            match (op["op"].as_str().expect("op"), target) {
                ("add" | "replace", Json::Object(m)) => {
                    m.insert(last.clone(), value.expect("value"));
                }
                ("remove", Json::Object(m)) => {
                    m.remove(last).expect("present");
                }
                ("add", Json::Array(a)) => {
                    a.insert(last.parse().expect("index"), value.expect("v"))
                }
                ("replace", Json::Array(a)) => {
                    a[last.parse::<usize>().expect("index")] = value.expect("v")
                }
                ("remove", Json::Array(a)) => {
                    a.remove(last.parse().expect("index"));
                }
                (op, _) => panic!("cannot {op} at {path}"),
            }
        }
    }

    /// A small deterministic generator (xorshift): the same cases on every run.
    struct Gen(u64);

    impl Gen {
        fn next(&mut self, n: u64) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 % n
        }

        fn value(&mut self, depth: u32) -> Json {
            match self.next(if depth == 0 { 4 } else { 6 }) {
                0 => Json::Null,
                1 => json!(self.next(3)),
                2 => json!(["a", "b/c", "~d"][self.next(3) as usize]),
                3 => json!(self.next(2) == 0),
                4 => Json::Array((0..self.next(4)).map(|_| self.value(depth - 1)).collect()),
                _ => Json::Object(self.object(depth - 1)),
            }
        }

        fn object(&mut self, depth: u32) -> Map<String, Json> {
            (0..self.next(4))
                .map(|_| {
                    let key = ["id", "a/b", "~x", "list"][self.next(4) as usize].to_string();
                    (key, self.value(depth))
                })
                .collect()
        }
    }

    #[test]
    fn a_patch_applied_to_the_old_answer_gives_the_new_one() {
        let mut g = Gen(0x9e37_79b9_7f4a_7c15);
        for _ in 0..5000 {
            let (old, new) = (g.object(3), g.object(3));
            let ops = diff(&old, &new);
            let mut doc = Json::Object(old.clone());
            apply(&mut doc, &ops);
            assert_eq!(
                doc,
                Json::Object(new.clone()),
                "{old:?} → {new:?} by {ops:?}"
            );
            assert!(diff(&new, &new).is_empty());
        }
    }
}
