//! The shape of a read: its request with the condition values taken out into slots.
//!
//! Planning a read never looks at a condition value: it plans the request's *shape*, where each
//! `column<op>: value` of a table object is a [`TableEntry::Slot`], and the values are bound
//! when the plan runs ([`crate::TablePlan::select`]), where everything a value decides (an `id`
//! that cannot match, the items of a list, a pattern) is decided again for each request. So
//! requests that differ only in their condition values have one shape and share one plan.
//!
//! What stays in the shape, verbatim: every key, every keyword, the values of arrays' `count`,
//! `page`, `query` and `join`, echoed values, and the conditions of objects marked `@raw` (their
//! values name the operator's fragments) and of subqueries (planned into complete statements).

use crate::PlanError;
use apijet_request::{Container, Member, Node, Request, TableEntry, TableObject};
use serde_json::Value as Json;

/// The condition values of one request, in the order their slots were numbered.
pub type Slots = Vec<Json>;

/// Takes the condition values out of `req` into slots, after the checks that read them all.
pub fn take_values(req: &mut Request, limits: &crate::ExprLimits) -> Result<Slots, PlanError> {
    crate::check_pattern_budget(req, limits)?;
    let mut slots = Vec::new();
    container(&mut req.root, &mut slots);
    Ok(slots)
}

/// The JSON nesting of a request (at most 128 levels, the parser's limit) bounds this walk.
fn container(c: &mut Container, slots: &mut Slots) {
    for m in &mut c.members {
        member(m, slots);
    }
}

fn member(m: &mut Member, slots: &mut Slots) {
    match &mut m.node {
        Node::Table(t) => table(t, slots),
        Node::Array(a) => container(&mut a.items, slots),
        // Subqueries are planned into complete statements: their values stay in the shape.
        Node::Subquery(_) | Node::Reference(_) | Node::Function(_) | Node::Value(_) => {}
    }
}

fn table(t: &mut TableObject, slots: &mut Slots) {
    let raw = t
        .entries
        .iter()
        .any(|e| matches!(e, TableEntry::Keyword { name, .. } if name == "raw"));
    for e in &mut t.entries {
        match e {
            TableEntry::Condition { .. } if !raw => {
                let hole = TableEntry::Echo {
                    key: String::new(),
                    value: serde_json::Value::Null,
                };
                if let TableEntry::Condition { key, value } = std::mem::replace(e, hole) {
                    slots.push(value);
                    *e = TableEntry::Slot {
                        key,
                        slot: slots.len() - 1,
                    };
                }
            }
            TableEntry::Child(m) => member(m, slots),
            _ => {}
        }
    }
}
