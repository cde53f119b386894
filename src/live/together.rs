//! The read of subscriptions that differ only in their first object's `id`, made from their
//! shape: the request tree with its values in slots (`apijet_plan::shape`), which every
//! subscription of a plan shape shares. Its root members become the items of one array,
//! `"[]": {"Moment": {…, "id{}": <slot>}, …}`, the `id` slot a list of every id, and
//! references to the root's members (`"userId@": "Moment/userId"`) point into the item
//! (`"[]/Moment/userId"`); relative ones (`"/Moment/userId"`) resolve against the item already.

use super::registry::Query;
use apijet_core::Method;
use apijet_plan::shape::Slots;
use apijet_request::{
    ArrayKey, ArrayObject, ConditionKey, Container, Member, Node, Request, TableEntry,
};
use serde_json::Value as Json;

/// The key of the array the subscriptions become items of.
pub const ITEMS: &str = "[]";

/// What a query read together needs of its form.
pub struct Form {
    /// The first member's key: the items are split by its `id`.
    pub first: String,
    /// The slot of its `id`.
    pub slot: usize,
}

/// The form of `query`, when it is one that is read together: a GET of table objects and
/// arrays without global keys, the first a table object chosen by a plain `id` (a number or
/// a text) and no `id{}`.
pub fn form(query: &Query) -> Option<Form> {
    let req = &query.read.req;
    let plain = query.method == Method::Get
        && req.tag.is_none()
        && req.version.is_none()
        && !req.format
        && req.globals.is_empty();
    let (first, rest) = req.root.members.split_first()?;
    let Node::Table(t) = &first.node else {
        return None;
    };
    let rest_ok = rest.iter().all(|m| match &m.node {
        Node::Table(_) => true,
        Node::Array(_) => m.key != ITEMS,
        _ => false,
    });
    let mut slot = None;
    for e in &t.entries {
        match e {
            TableEntry::Slot { key, slot: at } if key.raw == "id" => slot = Some(*at),
            TableEntry::Slot { key, .. }
            | TableEntry::Condition { key, .. }
            | TableEntry::RefCondition { key, .. }
            | TableEntry::SubqueryCondition { key, .. }
                if key.raw == "id{}" =>
            {
                return None
            }
            _ => {}
        }
    }
    let slot = slot?;
    let id = query.read.values.get(slot)?;
    (plain && rest_ok && (id.is_number() || id.is_string())).then(|| Form {
        first: first.key.clone(),
        slot,
    })
}

/// The request that reads `ids` as the items of one array, and its values: `values` with the
/// id slot holding every id.
pub fn request(
    req: &Request,
    slot: usize,
    values: &[Json],
    ids: &[Json],
) -> Option<(Request, Slots)> {
    let roots: Vec<&str> = req.root.members.iter().map(|m| m.key.as_str()).collect();
    let mut members = req.root.members.clone();
    for m in &mut members {
        into_item(m, &roots, 0);
    }
    let Some(Member {
        node: Node::Table(first),
        ..
    }) = members.first_mut()
    else {
        return None;
    };
    let listed = ConditionKey::parse("id{}").ok()?;
    for e in &mut first.entries {
        if let TableEntry::Slot { key, slot: at } = e {
            if *at == slot {
                *key = listed.clone();
            }
        }
    }
    let mut values = values.to_vec();
    *values.get_mut(slot)? = Json::Array(ids.to_vec());
    let items = ArrayObject {
        key: ArrayKey::parse(ITEMS)?,
        count: Some(Json::from(ids.len())),
        page: None,
        query: None,
        compat: None,
        join: None,
        items: Container { members },
    };
    let together = Request {
        root: Container {
            members: vec![Member {
                key: ITEMS.into(),
                node: Node::Array(Box::new(items)),
            }],
        },
        ..Request::default()
    };
    Some((together, values))
}

/// The tree's nesting, bounded by the JSON parser, never goes deeper than this.
const MAX_DEPTH: usize = 256;

/// `m` with every absolute reference to a root member pointed into the array item.
fn into_item(m: &mut Member, roots: &[&str], depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    match &mut m.node {
        Node::Table(t) => {
            for e in &mut t.entries {
                match e {
                    TableEntry::RefCondition { path, .. } => point_into_item(path, roots),
                    TableEntry::SubqueryCondition { subquery, .. }
                    | TableEntry::FromSubquery(subquery) => {
                        container(&mut subquery.items, roots, depth)
                    }
                    TableEntry::Child(child) => into_item(child, roots, depth + 1),
                    _ => {}
                }
            }
        }
        Node::Array(a) => container(&mut a.items, roots, depth),
        Node::Subquery(q) => container(&mut q.items, roots, depth),
        Node::Reference(path) => point_into_item(path, roots),
        Node::Function(_) | Node::Value(_) => {}
    }
}

fn container(c: &mut Container, roots: &[&str], depth: usize) {
    for m in &mut c.members {
        into_item(m, roots, depth + 1);
    }
}

fn point_into_item(path: &mut String, roots: &[&str]) {
    let head = path.split('/').next().unwrap_or_default();
    if !path.starts_with('/') && roots.contains(&head) {
        *path = format!("{ITEMS}/{path}");
    }
}

#[cfg(test)]
mod tests {
    use super::{form, request};
    use crate::live::registry::Query;
    use apijet_core::Method;
    use apijet_plan::read::ShapeKey;
    use serde_json::json;

    #[test]
    fn references_to_the_root_point_into_the_item_and_the_id_slot_lists_every_id() {
        let q = Query::parsed(json!({
            "Moment": {"id": 7, "@column": "id,userId"},
            "User": {"id@": "Moment/userId", "x@": "/Moment/id"},
            "Comment[]": {"count": 3, "Comment": {"momentId@": "Moment/id", "toId@": "Comment[]/x"}}
        }));
        let f = form(&q).expect("read together");
        assert_eq!((f.first.as_str(), f.slot), ("Moment", 0));
        let (req, values) =
            request(&q.read.req, f.slot, &q.read.values, &[json!(7), json!(8)]).expect("a request");
        // What the planner makes of the request written out by hand.
        let expected = Query::parsed(json!({"[]": {
            "count": 2,
            "Moment": {"id{}": [7, 8], "@column": "id,userId"},
            "User": {"id@": "[]/Moment/userId", "x@": "/Moment/id"},
            "Comment[]": {"count": 3, "Comment": {"momentId@": "[]/Moment/id", "toId@": "[]/Comment[]/x"}}
        }}));
        assert_eq!(ShapeKey::of(&req, Method::Get, false), expected.shape);
        assert_eq!(values, expected.read.values);
    }
}
