//! The typed request tree: every key of the client's JSON classified, nothing resolved.
//!
//! Classification follows protocol §3: a key is a table, an array, a reference, a subquery, a
//! function call, a keyword or a plain value by its spelling and its value's JSON type (the
//! classification is `classify.rs`, one for a body's text and an object already parsed). Whether
//! a table or column exists is not known here; that is the planner's question.

use crate::key::{ArrayKey, ConditionKey, TableKey};
use serde_json::Value;

/// A JSON object whose members are parsed in request order: the root, or an array item.
#[derive(Debug, Clone, Default)]
pub struct Container {
    /// Members in request order.
    pub members: Vec<Member>,
}

/// One key of a container.
#[derive(Debug, Clone)]
pub struct Member {
    /// The key exactly as sent; the response uses it verbatim.
    pub key: String,
    /// What the key asks for.
    pub node: Node,
}

/// What a container member asks for.
#[derive(Debug, Clone)]
pub enum Node {
    /// `"Table": {…}`
    Table(TableObject),
    /// `"key[]": {…}`
    Array(Box<ArrayObject>),
    /// `"name@": "path"` — answered under `name`.
    Reference(String),
    /// `"name@": {…}` — a named subquery, usable as a reference target.
    Subquery(Box<SubqueryObject>),
    /// `"name()": "fn(args)"` and its `-()`/`+()` variants.
    Function(String),
    /// Any other value: echoed back unchanged.
    Value(Value),
}

/// `"Table": {…}` or `"Table:alias": {…}`.
#[derive(Debug, Clone)]
pub struct TableObject {
    /// The table key.
    pub key: TableKey,
    /// Entries in request order.
    pub entries: Vec<TableEntry>,
}

/// One key inside a table object.
#[derive(Debug, Clone)]
pub enum TableEntry {
    /// `column<op>: value`.
    Condition {
        /// Parsed key.
        key: ConditionKey,
        /// The value as sent.
        value: Value,
    },
    /// `column<op>: value` once the planner took its value out of the tree into the request's
    /// slots (never made by parsing): requests that differ only in such values have the same
    /// shape and share one plan, which binds each request's values.
    Slot {
        /// Parsed key.
        key: ConditionKey,
        /// The index of its value among the request's slot values.
        slot: usize,
    },
    /// `column<op>@: "path"` — a condition whose value comes from another object.
    RefCondition {
        /// Parsed key (with `reference` set).
        key: ConditionKey,
        /// The path.
        path: String,
    },
    /// `column<op>@: {…}` — a condition against a subquery.
    SubqueryCondition {
        /// Parsed key.
        key: ConditionKey,
        /// The subquery.
        subquery: Box<SubqueryObject>,
    },
    /// `@from@: {…}` — select from a subquery.
    FromSubquery(Box<SubqueryObject>),
    /// `@name: value` — a keyword (known or echoed).
    Keyword {
        /// The keyword without its leading `@`.
        name: String,
        /// Its value.
        value: Value,
    },
    /// A nested table or array, answered inside this object's row.
    Child(Box<Member>),
    /// `key()`, `key-()`, `key+()`: a remote function.
    Function {
        /// The key as sent.
        key: String,
        /// The call text.
        call: String,
    },
    /// An object under a non-table key: echoed, not a condition (protocol §3.2).
    Echo {
        /// Key.
        key: String,
        /// Value.
        value: Value,
    },
}

/// `"key[]": {…}`.
#[derive(Debug, Clone)]
pub struct ArrayObject {
    /// The parsed array key.
    pub key: ArrayKey,
    /// `count` as sent.
    pub count: Option<Value>,
    /// `page` as sent.
    pub page: Option<Value>,
    /// `query` as sent.
    pub query: Option<Value>,
    /// `compat` as sent.
    pub compat: Option<Value>,
    /// `join` as sent.
    pub join: Option<Value>,
    /// The item template.
    pub items: Container,
}

/// `"k@": {"from": …, "range": …, "Table": {…}}`.
#[derive(Debug, Clone)]
pub struct SubqueryObject {
    /// `from`: the table key to select from (default: the first table).
    pub from: Option<String>,
    /// `range`: `ANY` or `ALL`.
    pub range: Option<Value>,
    /// `count` as sent.
    pub count: Option<Value>,
    /// `page` as sent.
    pub page: Option<Value>,
    /// `join` as sent.
    pub join: Option<Value>,
    /// `with` as sent: the reference writes the subquery as a `WITH` clause, which changes
    /// the SQL's form, not its rows.
    pub with: Option<Value>,
    /// The tables.
    pub items: Container,
}

/// A whole request: the root container and its global keys.
#[derive(Debug, Clone, Default)]
pub struct Request {
    /// Tables, arrays and values of the root.
    pub root: Container,
    /// `tag`.
    pub tag: Option<String>,
    /// `version`.
    pub version: Option<Value>,
    /// `format`.
    pub format: bool,
    /// Root `@` keys (`@role`, `@explain`, `@database`, …) without the `@`, in request order.
    pub globals: Vec<(String, Value)>,
}

impl Request {
    /// The value of a root `@keyword`.
    pub fn global(&self, name: &str) -> Option<&Value> {
        self.globals.iter().find(|(k, _)| k == name).map(|(_, v)| v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::parse_body;

    fn req(s: &str) -> Request {
        Request::from_map(parse_body(s.as_bytes()).expect("json")).expect("request")
    }

    #[test]
    fn root_members_are_classified() {
        let r = req(
            r#"{"tag":"Moment","format":true,"@role":"LOGIN","Moment":{"id":1},
                "[]":{"count":3,"User":{}},"total@":"/[]/total","x":1}"#,
        );
        assert_eq!(r.tag.as_deref(), Some("Moment"));
        assert!(r.format);
        assert_eq!(r.global("role"), Some(&Value::from("LOGIN")));
        let kinds: Vec<&str> = r
            .root
            .members
            .iter()
            .map(|m| match m.node {
                Node::Table(_) => "table",
                Node::Array(_) => "array",
                Node::Reference(_) => "ref",
                Node::Value(_) => "value",
                _ => "other",
            })
            .collect();
        assert_eq!(kinds, ["table", "array", "ref", "value"]);
    }

    #[test]
    fn null_members_ask_for_nothing_at_every_level() {
        let r = req(r#"{"tag":null,"@role":null,"x":null,
                "[]":{"count":null,"join":null,"Chain":null,"Document":{"id@":null,"name$":null,"id":1},
                      "[]":{"page":null,"Column":null,"Table":{"x":null}}},
                "n@":{"from":null,"range":null,"Moment":{"userId":null,"@column":"id"}}}"#);
        assert!(r.tag.is_none() && r.globals.is_empty());
        let keys: Vec<&str> = r.root.members.iter().map(|m| m.key.as_str()).collect();
        assert_eq!(keys, ["[]", "n@"]);
        let Node::Array(a) = &r.root.members[0].node else {
            panic!("array expected")
        };
        assert!(a.count.is_none() && a.join.is_none());
        let keys: Vec<&str> = a.items.members.iter().map(|m| m.key.as_str()).collect();
        assert_eq!(keys, ["Document", "[]"], "Chain:null is no member");
        let Node::Table(t) = &a.items.members[0].node else {
            panic!("table expected")
        };
        assert_eq!(t.entries.len(), 1, "only id is left: {:?}", t.entries);
        let Node::Array(inner) = &a.items.members[1].node else {
            panic!("array expected")
        };
        let keys: Vec<&str> = inner.items.members.iter().map(|m| m.key.as_str()).collect();
        assert!(inner.page.is_none());
        assert_eq!(keys, ["Table"]);
        let Node::Subquery(sq) = &r.root.members[1].node else {
            panic!("subquery expected")
        };
        assert!(sq.from.is_none() && sq.range.is_none());
        let Node::Table(t) = &sq.items.members[0].node else {
            panic!("table expected")
        };
        assert_eq!(t.entries.len(), 1);
    }

    #[test]
    fn arrays_with_nothing_to_list_are_skipped() {
        let r = req(
            r#"{"[]":{"count":5,"page":3},"User":{"id":1,"[]":{"count":2}},
                "Moment[]":{"count":1,"Moment":{}}}"#,
        );
        let keys: Vec<&str> = r.root.members.iter().map(|m| m.key.as_str()).collect();
        assert_eq!(keys, ["User", "Moment[]"]);
        let Node::Table(t) = &r.root.members[0].node else {
            panic!("table expected")
        };
        assert_eq!(t.entries.len(), 1, "{:?}", t.entries);
    }

    #[test]
    fn table_entries_are_classified() {
        let r = req(r#"{"User":{"id{}":[1,2],"@column":"id","name@":"/Moment/x",
                "Moment[]":{"Moment":{}},"f()":"isContain(a,b)","x":{"a":1}}}"#);
        let Node::Table(t) = &r.root.members[0].node else {
            panic!("table expected")
        };
        assert!(matches!(t.entries[0], TableEntry::Condition { .. }));
        assert!(matches!(t.entries[1], TableEntry::Keyword { .. }));
        assert!(matches!(t.entries[2], TableEntry::RefCondition { .. }));
        assert!(matches!(t.entries[3], TableEntry::Child(_)));
        assert!(matches!(t.entries[4], TableEntry::Function { .. }));
        assert!(matches!(t.entries[5], TableEntry::Echo { .. }));
    }
}
