//! Under a Request structure, a subquery runs with the role of the object it is in (issue 16,
//! finding 2): a structure that gives `Moment` the role `OWNER` does not let an `id{}@` inside
//! it read as `LOGIN`. Public requests keep the reference's rule (the root role).

use super::hidden_columns::plan;
use crate::query::{CmpOp, Expr, Pred, Select};
use apijet_core::{Method, Value};

/// The subquery of the first `IN (SELECT …)` of `select`'s WHERE.
fn subquery(select: &Select) -> &Select {
    fn find(p: &Pred) -> Option<&Select> {
        match p {
            Pred::InSelect(_, sub) => Some(sub),
            Pred::And(ps) | Pred::Or(ps) => ps.iter().find_map(find),
            Pred::Not(p) => find(p),
            _ => None,
        }
    }
    select.filter.as_ref().and_then(find).expect("a subquery")
}

/// Whether `select`'s WHERE holds `userId = 82001` (the OWNER filter of visitor 82001).
fn owned(select: &Select) -> bool {
    fn find(p: &Pred) -> bool {
        match p {
            Pred::Cmp(Expr::Column { name, .. }, CmpOp::Eq, Expr::Value(Value::Int(82001))) => {
                name.as_str() == "userId"
            }
            Pred::And(ps) => ps.iter().any(find),
            _ => false,
        }
    }
    select.filter.as_ref().is_some_and(find)
}

#[test]
fn a_private_subquery_runs_with_its_objects_role() {
    let body =
        r#"{"Moment":{"@role":"OWNER","id{}@":{"from":"Moment","Moment":{"@column":"id"}}}}"#;
    let private = plan(Method::Gets, body).expect("plans");
    assert!(owned(&private), "{private:?}");
    assert!(owned(subquery(&private)), "{private:?}");
    // Its own @role (which verification lets through only where the structure names it)
    // still decides.
    let own = plan(
        Method::Gets,
        r#"{"Moment":{"@role":"OWNER","id{}@":{"from":"Moment","Moment":{"@role":"LOGIN","@column":"id"}}}}"#,
    )
    .expect("plans");
    assert!(!owned(subquery(&own)), "{own:?}");
}
