//! Hidden columns are read in no position: every key form and keyword that names a column
//! reaches the same gate (issue 16, finding 3), and only the exact condition key of a private
//! request passes it (finding 2's password oracle inside a subquery does not).

use crate::gate::{uses, Use};
use crate::query::Select;
use crate::schema::{ColumnKind, SchemaCache, Table};
use crate::{plan_subquery, Context, PlanError, PlanOptions, Scope, TablePlan};
use apijet_core::{Method, Role, Visitor};
use apijet_request::{Node, Request, TableEntry};

pub(super) fn schema() -> SchemaCache {
    let roles = vec![Role::Unknown, Role::Login, Role::Owner, Role::Circle];
    let table = |api: &str, sql: &str, columns: &[(&str, ColumnKind)]| {
        Table::granted(api, sql, columns, &roles)
    };
    let mut s = SchemaCache::new();
    s.insert(table(
        "Privacy",
        "apijson_privacy",
        &[
            ("id", ColumnKind::Int),
            ("phone", ColumnKind::Text),
            ("balance", ColumnKind::Decimal),
            ("_password", ColumnKind::Text),
            ("_payPassword", ColumnKind::Text),
        ],
    ));
    s.insert(table(
        "Moment",
        "Moment",
        &[
            ("id", ColumnKind::Int),
            ("userId", ColumnKind::Int),
            ("content", ColumnKind::Text),
        ],
    ));
    s
}

/// Plans the first object of `body` for `method` (logged in as 82001 unless public) and
/// completes it as execution would.
pub(super) fn plan(method: Method, body: &str) -> Result<Select, PlanError> {
    let schema = schema();
    let options = PlanOptions::default();
    let visitor = Visitor {
        id: 82001,
        contacts: vec![82002],
        foreign_schema: None,
    };
    let req = Request::from_map(apijet_request::parse_body(body.as_bytes()).expect("json"))
        .expect("request");
    let Node::Table(t) = &req.root.members[0].node else {
        panic!("a table object first")
    };
    let rules = crate::verify::RequestRules::default();
    let ctx = Scope::new(Context {
        schema: &schema,
        rules: &rules,
        options: &options,
        method,
        visitor: (!method.is_public()).then_some(&visitor),
        trusted: false,
    });
    let plan = TablePlan::new(t, &ctx)?;
    Ok(plan.select(&[], &mut |_| None)?.expect("a statement"))
}

#[track_caller]
fn refused(method: Method, body: &str) {
    match plan(method, body) {
        Err(PlanError::Forbidden(m)) => assert!(m.contains("hidden column"), "{body}: {m}"),
        other => panic!("{body}: expected a 403 naming a hidden column, got {other:?}"),
    }
}

#[test]
fn hidden_columns_are_refused_in_every_position_of_a_public_read() {
    for body in [
        // Finding 3 as written, and the same column in the other expression positions.
        r#"{"Privacy":{"id":82001,"@column":"substr(_password,1,64):p"}}"#,
        r#"{"Privacy":{"id":82001,"@column":"id;concat(id,lower(substr(_password,1,1))):p"}}"#,
        r#"{"Privacy":{"id":82001,"@column":"id","@having":"substr(_password,1,1)='1'"}}"#,
        r#"{"Privacy":{"id":82001,"@column":"id","@having&":"length(_payPassword)>0"}}"#,
        r#"{"Privacy":{"id":82001,"@order":"_password-"}}"#,
        r#"{"Privacy":{"id":82001,"@group":"id,_password"}}"#,
        r#"{"Privacy":{"@key":"k:substr(_password,1,1)","k":"1"}}"#,
        r#"{"Privacy":{"@key":"k:(_password)","k$":"1%"}}"#,
        r#"{"Privacy":{"id{}":"length(_password)>1"}}"#,
        // Every operator of a condition key.
        r#"{"Privacy":{"id":82001,"_password":"123456"}}"#,
        r#"{"Privacy":{"id":82001,"_password$":"1%"}}"#,
        r#"{"Privacy":{"id":82001,"_password~":"^1"}}"#,
        r#"{"Privacy":{"id":82001,"_password{}":["1","2"]}}"#,
        r#"{"Privacy":{"id":82001,"_password>":"1"}}"#,
        r#"{"Privacy":{"id":82001,"_password[{}":">5"}}"#,
        // Subqueries and @from@.
        r#"{"Moment":{"userId{}@":{"from":"Privacy","Privacy":{"@column":"id","_password":"1"}}}}"#,
        r#"{"Moment":{"userId@":{"from":"Privacy","Privacy":{"@column":"id","@order":"_password"}}}}"#,
        r#"{"Privacy":{"@from@":{"from":"Privacy","Privacy":{"@column":"id;substr(_password,1,1):p"}}}}"#,
    ] {
        refused(Method::Get, body);
    }
}

#[test]
fn a_private_request_compares_a_named_hidden_column_with_equals_only() {
    // The login check: `_password = ?` in the object's own WHERE, and nowhere else.
    let select = plan(
        Method::Gets,
        r#"{"Privacy":{"phone":"13000082001","_password":"123456"}}"#,
    )
    .expect("the exact key passes");
    let hidden: Vec<Use> = uses(&select)
        .iter()
        .filter(|u| u.is_hidden())
        .map(|u| u.usage)
        .collect();
    assert_eq!(hidden, [Use::Equality]);
    for body in [
        r#"{"Privacy":{"id":82001,"_password":"1","@column":"id;substr(_password,1,1):p"}}"#,
        r#"{"Privacy":{"id":82001,"_password":"1","@order":"_password"}}"#,
        r#"{"Privacy":{"id":82001,"_password":"1","id{}":"length(_password)>1"}}"#,
        r#"{"Privacy":{"id":82001,"_password":"1","@having":"max(_password)>'1'"}}"#,
        // Another hidden column than the one the key names.
        r#"{"Privacy":{"id":82001,"_password":"1","id{}":"(_payPassword)=1"}}"#,
        // Finding 2's oracle: the exact key inside a subquery feeds another statement.
        r#"{"Moment":{"userId{}@":{"from":"Privacy","Privacy":{"@column":"id","id":82005,"_password":"123456"}}}}"#,
    ] {
        refused(Method::Gets, body);
    }
}

#[test]
fn join_conditions_pass_the_gate_with_the_columns_their_paths_name() {
    let schema = schema();
    let options = PlanOptions::default();
    let rules = crate::verify::RequestRules::default();
    let ctx = Scope::new(Context {
        schema: &schema,
        rules: &rules,
        options: &options,
        method: Method::Get,
        visitor: None,
        trusted: false,
    });
    let subquery = |path: &str| {
        let body = format!(
            r#"{{"Moment":{{"id{{}}@":{{"from":"Privacy","join":"&/Moment/id@",
                "Privacy":{{"@column":"id"}},"Moment":{{"@column":"id","id@":"/Privacy/{path}"}}}}}}}}"#
        );
        let req = Request::from_map(apijet_request::parse_body(body.as_bytes()).expect("json"))
            .expect("request");
        let Node::Table(t) = &req.root.members[0].node else {
            panic!("table")
        };
        let sq = t
            .entries
            .iter()
            .find_map(|e| match e {
                TableEntry::SubqueryCondition { subquery, .. } => Some(subquery.clone()),
                _ => None,
            })
            .expect("subquery");
        plan_subquery(&sq, &ctx)
    };
    subquery("id").expect("a join on a visible column");
    match subquery("_password") {
        Err(PlanError::Forbidden(m)) => assert!(m.contains("join"), "{m}"),
        other => panic!("expected a 403 for a join on _password, got {other:?}"),
    }
    match subquery("nope") {
        Err(PlanError::UnknownColumn { column, .. }) => assert_eq!(column, "nope"),
        other => panic!("expected an unknown column, got {other:?}"),
    }
}
