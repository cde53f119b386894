//! Which results references can read, so that only those are kept (see [`References`]), how
//! their paths are spelt, and the automatic keys of arrays' totals.

use crate::condition::path::percent_decode;
use apijet_request::{Container, Member, Node, TableEntry, TableObject};
use std::collections::HashSet;

/// What the request's references can read. Results are kept for references only, and keeping
/// one is a copy of it (of everything nested in it, for an array), so a result is kept only
/// when some reference path names its key: an object under its table key, an array when a
/// reference reads it whole (`"Moment-id[]"`) or by item index (`"[]/0/Moment/id"`); other
/// arrays are reached through their items' objects.
#[derive(Debug, Default, Clone)]
pub struct References {
    /// Array keys a reference reads whole or by item index.
    pub whole_arrays: HashSet<String>,
    keys: HashSet<String>,
}

impl References {
    fn path(&mut self, p: &str) {
        let decoded = percent_decode(p);
        let segments: Vec<&str> = decoded.split('/').collect();
        for (i, seg) in segments.iter().enumerate() {
            let next = segments.get(i + 1);
            if seg.ends_with("[]") && next.is_none_or(|n| n.parse::<usize>().is_ok()) {
                self.whole_arrays.insert((*seg).to_string());
            }
            self.keys.insert((*seg).to_string());
        }
    }

    fn table(&mut self, t: &TableObject) {
        for e in &t.entries {
            match e {
                TableEntry::RefCondition { path, .. } => self.path(path),
                TableEntry::SubqueryCondition { subquery, .. } => self.collect(&subquery.items),
                TableEntry::FromSubquery(subquery) => self.collect(&subquery.items),
                TableEntry::Child(m) => self.member(m),
                _ => {}
            }
        }
    }

    fn member(&mut self, m: &Member) {
        match &m.node {
            Node::Table(t) => self.table(t),
            Node::Array(a) => self.collect(&a.items),
            Node::Reference(p) => self.path(p),
            Node::Subquery(sq) => self.collect(&sq.items),
            _ => {}
        }
    }

    /// Collects what the references under `c` read.
    pub fn collect(&mut self, c: &Container) {
        for m in &c.members {
            self.member(m);
        }
    }

    /// Whether the object at `path` (ending in its key) may be read by a reference.
    pub fn object(&self, path: &str) -> bool {
        self.keys.contains(path.rsplit('/').next().unwrap_or(path))
    }
}

/// `[]` → `list`, `User[]` → `userList`, `Comment:c[]` → `cList`, `Comment-userId[]` →
/// `commentUseridlist`: the reference's JSONResponse.formatArrayKey, whose hyphen rule lowers
/// every part before capitalising its first letter.
pub fn list_key(array_key: &str) -> String {
    fn first(s: &str, upper: bool) -> String {
        let mut c = s.chars();
        match c.next() {
            Some(f) if upper => f.to_uppercase().chain(c).collect(),
            Some(f) => f.to_lowercase().chain(c).collect(),
            None => String::new(),
        }
    }
    let name = array_key.strip_suffix("[]").unwrap_or(array_key);
    let with_suffix = if name.is_empty() {
        "list".to_string()
    } else {
        first(name, false) + "List"
    };
    if let Some((_, alias)) = with_suffix.split_once(':') {
        return alias.to_string();
    }
    if !with_suffix.contains('-') {
        return with_suffix;
    }
    let joined: String = with_suffix
        .split('-')
        .filter(|p| !p.is_empty())
        .map(|p| first(&p.to_lowercase(), true))
        .collect();
    first(&joined, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_keys_follow_the_format_rule() {
        assert_eq!(list_key("[]"), "list");
        assert_eq!(list_key("User[]"), "userList");
        assert_eq!(list_key("User-id[]"), "userIdlist");
        assert_eq!(list_key("Comment-userId[]"), "commentUseridlist");
        assert_eq!(list_key("Comment:c[]"), "cList");
    }
}
