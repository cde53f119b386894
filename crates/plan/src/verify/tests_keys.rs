//! Keys of one object: ids, REFUSE, the keys no private request may carry, declared
//! children, REMOVE/REPLACE and the UNIQUE/EXIST checks.

use super::tests::{demo, fails, passes, row, rules_of, run};
use super::*;
use serde_json::json;

#[test]
fn post_may_not_choose_ids_and_writes_must_name_rows() {
    let rules = demo();
    // REF-W03
    fails(
        run(
            Method::Post,
            &rules,
            json!({"Moment": {"id": 123, "content": "x"}, "tag": "Moment"}),
        ),
        406,
        "/Moment may not contain id",
    );
    // REF-W11
    fails(
        run(
            Method::Put,
            &rules,
            json!({"Moment": {"content": "x"}, "tag": "Moment"}),
        ),
        406,
        "/Moment needs at least one of id,id{},id{}@",
    );
    fails(
        run(
            Method::Put,
            &rules,
            json!({"Moment": {"id": [1], "content": "x"}, "tag": "Moment"}),
        ),
        406,
        "Long or a String",
    );
    // IS_ID_CONDITION_MUST: false lifts the rule; true imposes it on a read.
    passes(run(
        Method::Put,
        &rules,
        json!({"tag": "Chain-group", "Chain": {"groupId": 3, "groupName": "g"}}),
    ));
    passes(run(
        Method::Gets,
        &rules,
        json!({"tag": "Privacy", "Privacy": {"id": 1}}),
    ));
    fails(
        run(Method::Gets, &rules, json!({"tag": "Secret", "Secret": {}})),
        406,
        "needs at least one of id",
    );
    passes(run(
        Method::Gets,
        &rules,
        json!({"tag": "Secret", "Secret": {"id{}@": "ids"}}),
    ));
}

#[test]
fn id_lists_are_bounded_and_positive() {
    let rules = rules_of(vec![row(
        1,
        Method::Put,
        "Comment[]",
        1,
        json!({"Comment": {"MUST": "id{}"}}),
    )]);
    let put = |comment: Value| {
        run(
            Method::Put,
            &rules,
            json!({"tag": "Comment[]", "Comment": comment}),
        )
    };
    passes(put(json!({"id{}": [1, 2, "3"], "content": "x"})));
    // REF-WC13
    fails(
        put(json!({"id{}": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11], "content": "x"})),
        406,
        "/Comment: id{}:[] may hold at most 10 items",
    );
    fails(put(json!({"id{}": [1, 0]})), 406, "<= 0");
    fails(put(json!({"id{}": [1, null]})), 406, "null");
    fails(put(json!({"id{}": [" "]})), 406, "empty string");
    fails(put(json!({"id{}": [{"a": 1}]})), 406, "Long or a String");
    fails(put(json!({"id{}": ">1"})), 406, "must be an array");
    fails(put(json!({"id{}": [1], "userId{}": [-1]})), 406, "userId{}");
    let small = rules.clone().with_max_update_count(2);
    fails(
        run(
            Method::Put,
            &small,
            json!({"tag": "Comment[]", "Comment": {"id{}": [1, 2, 3]}}),
        ),
        406,
        "at most 2",
    );
}

#[test]
fn refuse_lists_and_refuse_everything_else() {
    let rules = demo();
    // REF-WC10
    fails(
        run(
            Method::Put,
            &rules,
            json!({"User": {"id": 82001, "phone": "13000000000"}, "tag": "User"}),
        ),
        406,
        "User may not contain phone (none of [phone])",
    );
    // "!" refuses what MUST does not name; @ keys stay allowed, and so does the injected @column.
    let circle = |privacy: Value| {
        run(
            Method::Gets,
            &rules,
            json!({"tag": "Privacy-CIRCLE", "Privacy": privacy}),
        )
    };
    passes(circle(json!({"id": 82001, "@explain": true})));
    passes(circle(json!({"id@": "/User/id"})));
    fails(
        circle(json!({"id": 82001, "balance": 1})),
        406,
        "Privacy may not contain balance",
    );
    // "!key" whitelists one key from "!".
    let request = |extra: Value| {
        let mut r = json!({"method": "GET", "tag": "x", "structure": "{}"});
        if let (Value::Object(r), Value::Object(extra)) = (&mut r, extra) {
            r.extend(extra);
        }
        run(
            Method::Post,
            &rules,
            json!({"tag": "Request", "Request": r}),
        )
    };
    passes(request(json!({"detail": "d"})));
    fails(request(json!({"debug": 1})), 406, "may not contain debug");
}

#[test]
fn keys_no_private_request_may_carry() {
    let rules = demo();
    let post = |comment: Value| {
        run(
            Method::Post,
            &rules,
            json!({"tag": "Comment", "Comment": comment}),
        )
    };
    fails(
        post(json!({"momentId": 1, "content": "x", "n()": "count(id)"})),
        403,
        "remote functions",
    );
    fails(
        post(json!({"momentId": 1, "content": "x", "@key": "len:length(content)"})),
        403,
        "@key",
    );
    fails(
        post(json!({"momentId": 1, "content": "x", "x": {"a": 1}})),
        403,
        "Comment may not contain x:{}",
    );
    fails(
        post(json!({"momentId": 1, "content": "x", "Moment[]": [{}]})),
        403,
        "Moment[]:[]",
    );
    // Plain arrays are values, not batches.
    passes(post(json!({"momentId": 1, "content": "x", "tags": ["a"]})));
    // REF-W14: a client's @combine is refused (406) even before the tag is looked at.
    fails(
        run(
            Method::Put,
            &rules,
            json!({"Moment": {"id": 15, "content": "x", "@combine": "content"}, "tag": "Moment"}),
        ),
        406,
        "Moment:{} may not contain @combine",
    );
    fails(
        run(Method::Put, &rules, json!({"Moment": {"@combine": "a"}})),
        406,
        "@combine",
    );
    fails(
        run(
            Method::Post,
            &rules,
            json!({"tag": "Comment:[]", "Comment[]": [{"@combine": "a"}]}),
        ),
        406,
        "Comment[]:{} may not contain @combine",
    );
    // A value that merely holds such a key is data, not a condition.
    passes(post(
        json!({"momentId": 1, "content": "x", "tags": [{"@combine": "a"}]}),
    ));
    // Objects the structure does not declare.
    fails(
        run(
            Method::Post,
            &rules,
            json!({"tag": "Comment", "Comment": {"momentId": 1, "content": "x"}, "User": {}}),
        ),
        403,
        "the request root may not contain User:{}",
    );
    fails(
        run(
            Method::Post,
            &rules,
            json!({"tag": "Comment", "Comment": {"momentId": 1, "content": "x"}, "r()": "f()"}),
        ),
        403,
        "remote functions",
    );
}

#[test]
fn declared_objects_are_required() {
    let rules = demo();
    // REF-W17
    fails(
        run(
            Method::Post,
            &rules,
            json!({"[]": {"Comment": {"content": "x"}}, "tag": "Comment"}),
        ),
        406,
        "put Comment:{} inside the request root",
    );
    fails(
        run(
            Method::Post,
            &rules,
            json!({"Comment": null, "tag": "Comment"}),
        ),
        406,
        "put Comment:{}",
    );
    fails(
        run(
            Method::Post,
            &rules,
            json!({"Comment": [1], "tag": "Comment"}),
        ),
        415,
        "OBJECT",
    );
    // register: both tables are declared, so both are required.
    fails(
        run(
            Method::Post,
            &rules,
            json!({"tag": "register", "User": {"name": "n"}}),
        ),
        406,
        "put Privacy:{}",
    );
}

#[test]
fn structure_may_inject_combine_and_checks_lengths() {
    let rules = demo();
    let put = |privacy: Value| {
        run(
            Method::Put,
            &rules,
            json!({"tag": "Privacy-phone", "Privacy": privacy}),
        )
    };
    let v = passes(put(
        json!({"id": 82001, "phone": 13000082001_i64, "_password": "123456"}),
    ));
    assert_eq!(
        v.request["Privacy"],
        json!({"id": 82001, "phone": 13000082001_i64, "_password": "123456", "@role": "OWNER", "@combine": "_password"})
    );
    fails(
        put(json!({"id": 82001, "phone": "130", "_password": "123456"})),
        406,
        "phone[{}",
    );
    fails(
        put(json!({"id": 82001, "phone": "13000082001", "_password": "123"})),
        406,
        "_password:value is invalid",
    );
}

#[test]
fn remove_and_replace() {
    let rules = rules_of(vec![row(
        1,
        Method::Put,
        "Moment",
        1,
        json!({"REMOVE": "debug,content", "MUST": "id", "REFUSE": "content", "REPLACE": {"date": "now", "@role": "OWNER"}}),
    )]);
    let v = passes(run(
        Method::Put,
        &rules,
        json!({"tag": "Moment", "Moment": {"id": 1, "debug": true, "content": "x", "date": "then"}}),
    ));
    assert_eq!(v.request["Moment"], json!({"id": 1, "date": "now"}));
}

#[test]
fn unique_and_exist_become_checks() {
    let rules = demo();
    // The demo's register row: UNIQUE phone, PHONE pattern, id@ injected into User.
    let v = passes(run(
        Method::Post,
        &rules,
        json!({"tag": "register", "User": {"name": "n"}, "Privacy": {"phone": "13000082001", "_password": "123456"}}),
    ));
    assert_eq!(v.request["User"], json!({"name": "n", "id@": "Privacy/id"}));
    assert_eq!(
        v.checks,
        [ExistenceCheck {
            table: "Privacy".into(),
            values: vec![("phone".into(), json!("13000082001"))],
            must_exist: false,
            exclude_id: None,
        }]
    );
    fails(
        run(
            Method::Post,
            &rules,
            json!({"tag": "register", "User": {"name": "n"}, "Privacy": {"phone": "12345", "_password": "1"}}),
        ),
        406,
        "phone:value is invalid: it must match phone~",
    );

    let rules = rules_of(vec![row(
        1,
        Method::Put,
        "User",
        1,
        json!({"MUST": "id", "UNIQUE": "phone,name", "EXIST": "contactId"}),
    )]);
    let put = |user: Value| {
        passes(run(
            Method::Put,
            &rules,
            json!({"tag": "User", "User": user}),
        ))
        .checks
    };
    assert_eq!(
        put(json!({"id": 82001, "name": "n", "contactId": 7})),
        [
            ExistenceCheck {
                table: "User".into(),
                values: vec![("contactId".into(), json!(7))],
                must_exist: true,
                exclude_id: None,
            },
            ExistenceCheck {
                table: "User".into(),
                values: vec![("phone".into(), Value::Null), ("name".into(), json!("n"))],
                must_exist: false,
                exclude_id: Some(json!(82001)),
            },
        ]
    );
    assert!(put(json!({"id": 82001, "sex": 1})).is_empty());
}
