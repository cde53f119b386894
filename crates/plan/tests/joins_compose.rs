//! How a join's keywords compose, over every join character and every placement of `@group`,
//! `@having`, `@order` and `@column` on the main object, the joined object and its ON object
//! (4,096 requests): the joined statement groups, filters and orders by the ON object's
//! clause where it names one, else by the joined object's own (for an inner kind; a LEFT or
//! RIGHT join keeps the joined object's own clauses in its own statement), after the main
//! object's; the ON object's conditions are in the ON clause; and where the joined rows come
//! with the main rows (`& < > )`), the joined object's answer is its part of the joined row,
//! never a statement of its own, grouped or not. A grouped joined object answered from a
//! statement of its own per item was the silent wrong answer this pins (`count(1)` 1 where
//! the reference counts the joined rows).

use apijet_core::Role;
use apijet_plan::query::{Expr, OrderItem, Pred, Select};
use apijet_plan::read::{MemberPlan, ReadPlan};
use apijet_plan::schema::{ColumnKind, SchemaCache, Table};
use apijet_plan::shape::take_values;
use apijet_plan::verify::RequestRules;
use apijet_plan::{Context, PlanOptions};
use apijet_request::Request;
use serde_json::{json, Map, Value as Json};

fn schema() -> SchemaCache {
    use ColumnKind::*;
    let roles = [Role::Unknown, Role::Login];
    let mut s = SchemaCache::new();
    s.insert(Table::granted(
        "User",
        "apijson_user",
        &[("id", Int), ("name", Text), ("sex", Int)],
        &roles,
    ));
    s.insert(Table::granted(
        "Comment",
        "Comment",
        &[("id", Int), ("userId", Int), ("content", Text)],
        &roles,
    ));
    s
}

/// One placement of the keywords.
#[derive(Debug, Clone, Copy)]
struct Case {
    kind: char,
    main_group: bool,
    vice_group: bool,
    vice_having: bool,
    vice_order: bool,
    on_group: bool,
    on_having: bool,
    on_order: bool,
    on_column: bool,
    vice_count: bool,
}

impl Case {
    fn all() -> impl Iterator<Item = Case> {
        ['&', '<', '>', ')', '|', '!', '^', '(']
            .into_iter()
            .flat_map(|kind| {
                (0..512u32).map(move |bits| {
                    let bit = |n: u32| bits & (1 << n) != 0;
                    Case {
                        kind,
                        main_group: bit(0),
                        vice_group: bit(1),
                        vice_having: bit(2),
                        vice_order: bit(3),
                        on_group: bit(4),
                        on_having: bit(5),
                        on_order: bit(6),
                        on_column: bit(7),
                        vice_count: bit(8),
                    }
                })
            })
    }

    fn request(&self) -> Json {
        let mut main = Map::new();
        main.insert("@column".into(), json!("userId"));
        if self.main_group {
            main.insert("@group".into(), json!("userId"));
        }
        let mut vice = Map::new();
        vice.insert("id@".into(), json!("/Comment/userId"));
        vice.insert("sex".into(), json!(1));
        let columns = if self.vice_count {
            "id;count(1):n"
        } else {
            "id,name"
        };
        vice.insert("@column".into(), json!(columns));
        if self.vice_group {
            vice.insert("@group".into(), json!("id"));
        }
        if self.vice_having {
            vice.insert("@having".into(), json!("(id)%5>1"));
        }
        if self.vice_order {
            vice.insert("@order".into(), json!("id-"));
        }
        let mut on = Map::new();
        on.insert("name$".into(), json!("%a%"));
        if self.on_group {
            on.insert("@group".into(), json!("name"));
        }
        if self.on_having {
            on.insert("@having".into(), json!("(id)%7!=0"));
        }
        if self.on_order {
            on.insert("@order".into(), json!("name+"));
        }
        if self.on_column {
            on.insert("@column".into(), json!("id,name"));
        }
        json!({"[]": {"count": 3, "join": {format!("{}/User", self.kind): on},
            "Comment": main, "User": vice}})
    }

    fn carries(&self) -> bool {
        matches!(self.kind, '&' | '<' | '>' | ')')
    }

    fn left_or_right(&self) -> bool {
        matches!(self.kind, '<' | '>')
    }

    /// The joined object's own statement groups or aggregates.
    fn vice_grouped(&self) -> bool {
        self.vice_group || self.vice_having || self.vice_count
    }
}

/// Whether `e` names the column `name`.
fn names(e: &Expr, name: &str) -> bool {
    match e {
        Expr::Column { name: n, .. } => n.as_str() == name,
        Expr::Arith { lhs, rhs, .. } | Expr::Compare(lhs, _, rhs) => {
            names(lhs, name) || names(rhs, name)
        }
        _ => false,
    }
}

fn pred_names(p: &Pred, name: &str) -> bool {
    match p {
        Pred::And(ps) | Pred::Or(ps) => ps.iter().any(|p| pred_names(p, name)),
        Pred::Not(p) => pred_names(p, name),
        Pred::Cmp(l, _, r) => names(l, name) || names(r, name),
        Pred::Like(e, _) | Pred::In(e, _) => names(e, name),
        _ => false,
    }
}

/// The joined statement of the array, and whether the joined object answers from it.
fn planned(case: &Case) -> Result<(Select, bool), String> {
    let Json::Object(map) = case.request() else {
        unreachable!()
    };
    let mut req = Request::from_map(map).map_err(|e| e.to_string())?;
    let options = PlanOptions::default();
    let values = take_values(&mut req, &options.expr).map_err(|e| e.to_string())?;
    let schema = schema();
    let rules = RequestRules::default();
    let inputs = Context {
        schema: &schema,
        rules: &rules,
        options: &options,
        method: apijet_core::Method::Get,
        visitor: None,
        trusted: false,
    };
    let plan = ReadPlan::build(&req, &inputs).map_err(|e| e.to_string())?;
    let Some(MemberPlan::Array { plan: Ok(a), .. }) = plan.root.members.first() else {
        return Err(format!("no array: {plan}"));
    };
    let select = a
        .select(&values, &mut |_| None)
        .map_err(|e| e.to_string())?
        .ok_or("the array cannot match")?;
    Ok((select, !a.carried.is_empty()))
}

#[test]
fn a_joins_keywords_compose_into_the_joined_statement_as_the_reference_composes_them() {
    let mut checked = 0;
    for case in Case::all() {
        let (select, carried) = match planned(&case) {
            Ok(p) => p,
            // A LEFT or RIGHT join's ON object cannot name the columns of a grouped object
            // read through its own statement: refused, named.
            Err(e)
                if case.left_or_right()
                    && case.on_column
                    && case.vice_grouped()
                    && e.contains("ON object") =>
            {
                continue;
            }
            Err(e) => panic!("{case:?}: {e}"),
        };
        checked += 1;
        assert_eq!(carried, case.carries(), "{case:?}: {select}");
        let group_names = |n: &str| select.group.iter().any(|g| names(g, n));
        let vice_own = !case.left_or_right();
        // GROUP BY: the main object's, then the ON object's where it names one, else the
        // joined object's own (an inner kind's).
        assert_eq!(group_names("userId"), case.main_group, "{case:?}: {select}");
        assert_eq!(
            group_names("name"),
            case.on_group,
            "{case:?}: the ON object's @group: {select}"
        );
        assert_eq!(
            group_names("id"),
            !case.on_group && case.vice_group && vice_own,
            "{case:?}: the joined object's own @group: {select}"
        );
        // HAVING likewise.
        let having = select.having.as_ref();
        let having_of =
            |n: i64| having.is_some_and(|h| format!("{h}").contains(&format!("% {n})")));
        assert_eq!(having_of(7), case.on_having, "{case:?}: {select}");
        assert_eq!(
            having_of(5),
            !case.on_having && case.vice_having && vice_own,
            "{case:?}: {select}"
        );
        // ORDER BY likewise (the main object's default order of its groups first).
        let ordered_by = |n: &str| {
            select
                .order
                .iter()
                .any(|o| matches!(o, OrderItem::By(e, _) if names(e, n)))
        };
        assert_eq!(ordered_by("name"), case.on_order, "{case:?}: {select}");
        if !case.on_order {
            assert_eq!(
                ordered_by("id"),
                case.vice_order && vice_own,
                "{case:?}: {select}"
            );
        }
        // The ON object's condition is in the ON clause, not in WHERE.
        let join = select.joins.first().expect("a SQL join");
        assert!(pred_names(&join.on, "name"), "{case:?}: {select}");
        assert!(
            !select
                .filter
                .as_ref()
                .is_some_and(|f| pred_names(f, "name")),
            "{case:?}: {select}"
        );
        // The joined object's answer comes with the joined row, its columns in the select.
        if case.carries() {
            assert!(
                select
                    .columns
                    .iter()
                    .any(|c| c.alias.as_str().starts_with("__j0_")),
                "{case:?}: {select}"
            );
        }
    }
    assert!(checked > 3500, "{checked} cases planned");
}
