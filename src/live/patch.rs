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
    use apijet_testkit::json_patch::apply;
    use apijet_testkit::Rng;
    use serde_json::{json, Map, Value as Json};

    /// Random answers from a seeded generator: the same cases on every run.
    struct Gen(Rng);

    impl Gen {
        fn next(&mut self, n: u64) -> u64 {
            self.0.below(n)
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
        let mut g = Gen(Rng::new(0x9e37_79b9_7f4a_7c15));
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
