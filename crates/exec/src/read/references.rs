//! Which results references can read, so that only those are kept (see [`References`]).

use super::keys::percent_decode;
use apijet_request::{Container, Member, Node, TableEntry, TableObject};
use std::collections::HashSet;

/// What the request's references can read. Results are kept for references only, and keeping
/// one is a copy of it (of everything nested in it, for an array), so a result is kept only
/// when some reference path names its key: an object under its table key, an array when a
/// reference reads it whole (`"Moment-id[]"`) or by item index (`"[]/0/Moment/id"`); other
/// arrays are reached through their items' objects.
#[derive(Default)]
pub(super) struct References {
    pub(super) whole_arrays: HashSet<String>,
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

    pub(super) fn collect(&mut self, c: &Container) {
        for m in &c.members {
            self.member(m);
        }
    }

    /// Whether the object at `path` (ending in its key) may be read by a reference.
    pub(super) fn object(&self, path: &str) -> bool {
        self.keys.contains(path.rsplit('/').next().unwrap_or(path))
    }
}
