//! Structures reach nested objects: a subquery (`k@: {…}`, `@from@: {…}`) runs only where the
//! structure declares it, its objects are verified like any other, and a client `@role` inside
//! one does not change the role the enclosing object runs as (issue 16, finding 2).

use super::tests::{fails, passes, row, rules_of, run};
use super::*;
use serde_json::json;

/// The APIJSON demo's permissive private read of users, and a structure that declares a
/// subquery.
fn rules() -> RequestRules {
    rules_of(vec![
        row(
            57,
            Method::Gets,
            "User[]",
            4,
            json!({"User": {"INSERT": {"@role": "CIRCLE"}}, "REFUSE": "query"}),
        ),
        row(
            2,
            Method::Gets,
            "Moment",
            1,
            json!({
                "MUST": "id",
                "userId{}@": {"Privacy": {"MUST": "id", "REFUSE": "_password,_payPassword"}}
            }),
        ),
        row(
            3,
            Method::Delete,
            "Privacy",
            1,
            json!({"MUST": "id", "UPDATE": {"@role": "OWNER"}}),
        ),
    ])
}

fn gets(body: Value) -> Result<Verified, PlanError> {
    run(Method::Gets, &rules(), body)
}

#[test]
fn subqueries_the_structure_does_not_declare_are_refused() {
    // Finding 2 as written: a @from@ subquery, and a password oracle in an id{}@ subquery.
    fails(
        gets(json!({"tag": "User[]", "User[]": {"User": {
            "@from@": {"from": "Privacy", "Privacy": {"@role": "CIRCLE"}},
            "@column": "id,phone,email,balance"
        }}})),
        403,
        "@from@",
    );
    fails(
        gets(json!({"tag": "User[]", "User[]": {"User": {
            "id{}@": {"from": "Privacy", "Privacy": {
                "@role": "CIRCLE", "@column": "id", "id": 82005, "_password": "123456"
            }}
        }}})),
        403,
        "id{}@",
    );
    // A named subquery at the root, used by @from@ as a string.
    fails(
        gets(json!({
            "tag": "User[]",
            "sql@": {"from": "Privacy", "Privacy": {"@column": "id"}},
            "User[]": {"User": {"@from@": "sql"}}
        })),
        403,
        "sql@",
    );
    // A reference is a value, not an object: it stays allowed.
    passes(gets(json!({
        "tag": "User[]",
        "User[]": {"User": {"id@": "/User/id"}}
    })));
}

#[test]
fn declared_subqueries_are_verified_like_objects() {
    let moment = |privacy: Value| {
        gets(json!({"tag": "Moment", "Moment": {
            "id": 1,
            "userId{}@": {"from": "Privacy", "Privacy": privacy}
        }}))
    };
    passes(moment(json!({"id": 82001})));
    fails(moment(json!({})), 406, "must contain id");
    fails(
        moment(json!({"id": 82001, "_password": "123456"})),
        406,
        "_password",
    );
    // A table the structure's subquery does not declare.
    fails(
        gets(json!({"tag": "Moment", "Moment": {
            "id": 1,
            "userId{}@": {"from": "Privacy", "Privacy": {"id": 82001}, "User": {"id": 1}}
        }})),
        403,
        "User:{}",
    );
    // The subquery's objects run with the enclosing object's role: a client may not choose one.
    fails(
        moment(json!({"id": 82001, "@role": "CIRCLE"})),
        403,
        "@role",
    );
    // The declared subquery is required, as any declared object.
    fails(
        gets(json!({"tag": "Moment", "Moment": {"id": 1}})),
        406,
        "userId{}@",
    );
}

#[test]
fn delete_conditions_on_hidden_columns_need_naming() {
    fails(
        run(
            Method::Delete,
            &rules(),
            json!({"tag": "Privacy", "Privacy": {"id": 82001, "_password": "123456"}}),
        ),
        403,
        "hidden column",
    );
    passes(run(
        Method::Delete,
        &rules(),
        json!({"tag": "Privacy", "Privacy": {"id": 82001}}),
    ));
}
