//! Rules hold for columns, not spellings (issue 8, finding 3), and a client cannot widen the
//! role a structure gives (finding 4).

use super::tests::{fails, passes, row, rules_of, run, run_as};
use super::*;
use serde_json::json;

fn demo_rules() -> RequestRules {
    rules_of(vec![
        row(
            1,
            Method::Put,
            "Moment",
            1,
            json!({
                "MUST": "id",
                "REFUSE": "userId,date",
                "TYPE": {"content": "STRING", "praiseUserIdList": "NUMBER[]"},
                "UPDATE": {"@role": "OWNER"}
            }),
        ),
        row(
            2,
            Method::Put,
            "Privacy",
            1,
            json!({
                "MUST": "id",
                "REFUSE": "certified,balance",
                "VERIFY": {"_password[{}": ">=6"},
                "UPDATE": {"@role": "OWNER"}
            }),
        ),
        row(
            3,
            Method::Put,
            "balance+",
            1,
            json!({"Privacy": {
                "MUST": "id,balance+",
                "REFUSE": "!",
                "VERIFY": {"balance+&{}": ">0,<=10000"},
                "UPDATE": {"@role": "OWNER"}
            }}),
        ),
        row(
            4,
            Method::Gets,
            "Privacy",
            2,
            json!({"MUST": "id", "REFUSE": "_password,_payPassword", "UPDATE": {"@role": "OWNER"}}),
        ),
        row(
            5,
            Method::Gets,
            "Privacy",
            4,
            json!({"MUST": "id", "INSERT": {"@role": "OWNER"}, "REFUSE": "!"}),
        ),
        row(
            6,
            Method::Heads,
            "Privacy",
            1,
            json!({"MUST": "id", "REFUSE": "!_password,!", "UPDATE": {"@role": "OWNER"}}),
        ),
        row(
            7,
            Method::Put,
            "Comment",
            1,
            json!({"MUST": "id", "INSERT": {"@role": "OWNER"}}),
        ),
        row(
            8,
            Method::Post,
            "register",
            1,
            json!({
                "Privacy": {"MUST": "phone,_password", "REFUSE": "id", "VERIFY": {"phone~": "PHONE"}},
                "User": {"MUST": "name", "REFUSE": "id", "UPDATE": {"id@": "Privacy/id"}}
            }),
        ),
        row(
            9,
            Method::Post,
            "Privacy",
            1,
            json!({"MUST": "phone", "UNIQUE": "phone"}),
        ),
    ])
}

#[test]
fn a_refused_column_is_refused_in_every_spelling() {
    let rules = demo_rules();
    for key in [
        "userId", "userId+", "userId-", "userId{}", "userId!", "userId@", "date+",
    ] {
        fails(
            run(
                Method::Put,
                &rules,
                json!({"tag": "Moment", "Moment": {"id": 1, key: 82002}}),
            ),
            406,
            key,
        );
    }
    fails(
        run(
            Method::Put,
            &rules,
            json!({"tag": "Privacy", "Privacy": {"id": 82001, "balance+": 1000000}}),
        ),
        406,
        "balance+",
    );
    fails(
        run(
            Method::Put,
            &rules,
            json!({"tag": "Privacy", "Privacy": {"id": 82001, "certified+": 1}}),
        ),
        406,
        "certified+",
    );
    passes(run(
        Method::Put,
        &rules,
        json!({"tag": "Privacy", "Privacy": {"id": 82001, "email": "a@b.c"}}),
    ));
}

#[test]
fn refusing_a_hidden_column_refuses_its_like_oracle() {
    let rules = demo_rules();
    for key in [
        "_password",
        "_password$",
        "_password%$",
        "_password~",
        "_password{}",
        "_password>",
    ] {
        fails(
            run(
                Method::Gets,
                &rules,
                json!({"tag": "Privacy", "version": 2, "Privacy": {"id": 82001, key: "1%"}}),
            ),
            406,
            key,
        );
    }
    // `!_password` lets the exact key through (a password check), not another operator.
    passes(run(
        Method::Heads,
        &rules,
        json!({"tag": "Privacy", "Privacy": {"id": 82001, "_password": "123456"}}),
    ));
    fails(
        run(
            Method::Heads,
            &rules,
            json!({"tag": "Privacy", "Privacy": {"id": 82001, "_password$": "1%"}}),
        ),
        406,
        "_password$",
    );
}

#[test]
fn hidden_columns_need_naming_in_reads_and_a_plain_key_in_writes() {
    let rules = rules_of(vec![
        row(1, Method::Gets, "Privacy", 1, json!({"MUST": "id"})),
        row(2, Method::Put, "Privacy", 1, json!({"MUST": "id"})),
    ]);
    fails(
        run(
            Method::Gets,
            &rules,
            json!({"tag": "Privacy", "Privacy": {"id": 1, "_password$": "1%"}}),
        ),
        403,
        "hidden column",
    );
    passes(run(
        Method::Put,
        &rules,
        json!({"tag": "Privacy", "Privacy": {"id": 1, "_password": "secret1"}}),
    ));
    fails(
        run(
            Method::Put,
            &rules,
            json!({"tag": "Privacy", "Privacy": {"id": 1, "_password+": "x"}}),
        ),
        403,
        "_password+",
    );
}

#[test]
fn type_checks_what_plus_and_minus_add_and_remove() {
    let rules = demo_rules();
    fails(
        run(
            Method::Put,
            &rules,
            json!({"tag": "Moment", "Moment": {"id": 1, "praiseUserIdList+": ["x"]}}),
        ),
        415,
        "praiseUserIdList+",
    );
    fails(
        run(
            Method::Put,
            &rules,
            json!({"tag": "Moment", "Moment": {"id": 1, "praiseUserIdList-": "x"}}),
        ),
        415,
        "praiseUserIdList-",
    );
    fails(
        run(
            Method::Put,
            &rules,
            json!({"tag": "Moment", "Moment": {"id": 1, "content+": 5}}),
        ),
        415,
        "content+",
    );
    passes(run(
        Method::Put,
        &rules,
        json!({"tag": "Moment", "Moment": {"id": 1, "praiseUserIdList+": [82001]}}),
    ));
}

#[test]
fn verify_holds_for_the_column_whatever_operator_writes_it() {
    let rules = demo_rules();
    fails(
        run(
            Method::Put,
            &rules,
            json!({"tag": "balance+", "Privacy": {"id": 82001, "balance+": 1000000}}),
        ),
        406,
        "balance+",
    );
    passes(run(
        Method::Put,
        &rules,
        json!({"tag": "balance+", "Privacy": {"id": 82001, "balance+": 100}}),
    ));
    fails(
        run(
            Method::Put,
            &rules,
            json!({"tag": "Privacy", "Privacy": {"id": 82001, "_password+": "longer-suffix"}}),
        ),
        403,
        "_password+",
    );
    fails(
        run(
            Method::Post,
            &rules,
            json!({"tag": "Privacy", "Privacy": {"phone": "13000000001", "phone+": "1"}}),
        ),
        406,
        "phone+",
    );
}

#[test]
fn remove_and_update_hold_for_every_spelling() {
    let rules = rules_of(vec![row(
        1,
        Method::Put,
        "Moment",
        1,
        json!({"MUST": "id", "REMOVE": "date", "UPDATE": {"userId": 82001}}),
    )]);
    let v = passes(run(
        Method::Put,
        &rules,
        json!({"tag": "Moment", "Moment": {"id": 1, "date+": 1, "userId+": 5}}),
    ));
    let moment = &v.request["Moment"];
    assert_eq!(moment.get("date+"), None);
    assert_eq!(moment.get("userId+"), None);
    assert_eq!(moment["userId"], json!(82001));
}

#[test]
fn a_client_role_cannot_widen_the_structure_role() {
    let rules = demo_rules();
    // REFUSE "!" refuses a client @role the structure does not name.
    fails(
        run(
            Method::Gets,
            &rules,
            json!({"tag": "Privacy", "Privacy": {"id": 70793, "@role": "CIRCLE"}}),
        ),
        406,
        "@role",
    );
    // A root @role does not reach an object whose structure gives it one.
    let v = passes(run(
        Method::Gets,
        &rules,
        json!({"tag": "Privacy", "@role": "CIRCLE", "Privacy": {"id": 70793}}),
    ));
    assert_eq!(v.request["Privacy"]["@role"], json!("OWNER"));
    // Nor one whose structure refuses every key it does not name.
    let strict = rules_of(vec![row(
        1,
        Method::Gets,
        "Privacy",
        1,
        json!({"MUST": "id", "REFUSE": "!"}),
    )]);
    fails(
        run(
            Method::Gets,
            &strict,
            json!({"tag": "Privacy", "@role": "CIRCLE", "Privacy": {"id": 70793}}),
        ),
        406,
        "@role",
    );
    let v = passes(run(
        Method::Gets,
        &rules,
        json!({"tag": "Privacy", "Privacy": {"id": 70793}}),
    ));
    assert_eq!(v.request["Privacy"]["@role"], json!("OWNER"));
    // INSERT gives the role: the client may repeat it, not replace it.
    fails(
        run(
            Method::Put,
            &rules,
            json!({"tag": "Comment", "Comment": {"id": 1, "content": "x", "@role": "ADMIN"}}),
        ),
        403,
        "@role",
    );
    passes(run(
        Method::Put,
        &rules,
        json!({"tag": "Comment", "Comment": {"id": 1, "content": "x", "@role": "OWNER"}}),
    ));
}

#[test]
fn register_sets_only_what_its_structure_names() {
    let rules = demo_rules();
    let ok = json!({
        "tag": "register",
        "Privacy": {"phone": "13000000001", "_password": "secret1"},
        "User": {"name": "New"}
    });
    passes(run_as(Method::Post, &rules, ok.clone(), true));
    for (table, key) in [
        ("User", "contactIdList"),
        ("User", "@role"),
        ("Privacy", "balance"),
    ] {
        let mut bad = ok.clone();
        bad[table][key] = json!([82001]);
        fails(run_as(Method::Post, &rules, bad, true), 406, key);
    }
}
