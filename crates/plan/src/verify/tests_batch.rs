//! Batches (`Table:[]`, `Table[]`), TYPE and VERIFY rules, and the value helpers.

use super::tests::{fails, passes, row, rules_of, run};
use super::value::{is_date, is_datetime, is_time, like};
use super::*;
use serde_json::json;

fn batch_rules() -> RequestRules {
    use Method::*;
    rules_of(vec![
        row(
            1,
            Post,
            "Comment",
            1,
            json!({"MUST": "momentId,content", "REFUSE": "id", "UPDATE": {"@role": "OWNER"}}),
        ),
        row(
            2,
            Put,
            "Comment",
            1,
            json!({"MUST": "id", "INSERT": {"@role": "OWNER"}}),
        ),
        row(
            3,
            Post,
            "Comment:[]",
            2,
            json!({"TYPE": {"Comment[]": "OBJECT[]"}, "INSERT": {"@role": "OWNER"}, "Comment[]": []}),
        ),
        row(
            4,
            Put,
            "Comment:[]",
            2,
            json!({"INSERT": {"@role": "OWNER"}}),
        ),
        row(
            5,
            Post,
            "Moment:[]",
            2,
            json!({"INSERT": {"@role": "OWNER"}}),
        ),
        row(
            6,
            Put,
            "Comment[]",
            1,
            json!({"Comment": {"MUST": "id{}", "INSERT": {"@role": "OWNER"}}}),
        ),
        row(
            7,
            Delete,
            "Comment[]",
            1,
            json!({"MUST": "id{}", "INSERT": {"@role": "OWNER"}}),
        ),
    ])
}

#[test]
fn table_batches_verify_every_item_against_the_single_structure() {
    let rules = batch_rules();
    // REF-W08 / WC04
    let v = passes(run(
        Method::Post,
        &rules,
        json!({"Comment[]": [{"momentId": 15, "content": "b1"}, {"momentId": 12, "content": "b2"}], "tag": "Comment:[]"}),
    ));
    assert_eq!(
        Value::Object(v.request),
        json!({
            "Comment[]": [
                {"momentId": 15, "content": "b1", "@role": "OWNER"},
                {"momentId": 12, "content": "b2", "@role": "OWNER"}
            ],
            "tag": "Comment:[]",
            "@role": "OWNER"
        })
    );
    fails(
        run(
            Method::Post,
            &rules,
            json!({"Comment[]": [{"momentId": 15, "content": "b1"}, {"momentId": 15}], "tag": "Comment:[]"}),
        ),
        406,
        "Comment must contain content",
    );
    fails(
        run(
            Method::Post,
            &rules,
            json!({"Comment[]": [{"id": 9, "momentId": 15, "content": "b1"}], "tag": "Comment:[]"}),
        ),
        406,
        "may not contain id",
    );
    // REF-WC06: PUT items need their ids.
    let v = passes(run(
        Method::Put,
        &rules,
        json!({"Comment[]": [{"id": 1, "content": "item0"}, {"id": 2, "content": "item1"}], "tag": "Comment:[]"}),
    ));
    assert_eq!(
        v.request["Comment[]"][1],
        json!({"id": 2, "content": "item1", "@role": "OWNER"})
    );
    fails(
        run(
            Method::Put,
            &rules,
            json!({"Comment[]": [{"content": "x"}], "tag": "Comment:[]"}),
        ),
        406,
        "needs at least one of id",
    );
}

#[test]
fn table_batches_are_non_empty_bounded_lists_of_objects() {
    let rules = batch_rules();
    let post = |list: Value| {
        run(
            Method::Post,
            &rules,
            json!({"tag": "Comment:[]", "Comment[]": list}),
        )
    };
    fails(post(json!([])), 406, "non-empty array");
    fails(
        run(Method::Post, &rules, json!({"tag": "Comment:[]"})),
        406,
        "non-empty array",
    );
    let eleven: Vec<Value> = (0..11)
        .map(|i| json!({"momentId": 1, "content": i}))
        .collect();
    fails(post(Value::Array(eleven)), 406, "at most 10 items");
    fails(post(json!([1, 2])), 415, "OBJECT[]");
    fails(post(json!({"momentId": 1})), 415, "ARRAY");
    // No single-object row for the items' tag.
    fails(
        run(
            Method::Post,
            &rules,
            json!({"tag": "Moment:[]", "Moment[]": [{"content": "m1"}]}),
        ),
        403,
        "tag: Moment",
    );
    // Another table's list is not declared by this tag.
    fails(
        run(
            Method::Post,
            &rules,
            json!({"tag": "Comment:[]", "Comment[]": [{"momentId": 1, "content": "x"}], "Moment[]": [{"content": "m"}]}),
        ),
        403,
        "Moment[]:[]",
    );
}

#[test]
fn id_batches_wrap_their_table() {
    let rules = batch_rules();
    // REF-WC05 (structure names Comment) and REF-WC08 (structure is Comment's object itself).
    let v = passes(run(
        Method::Put,
        &rules,
        json!({"Comment": {"id{}": [1, 2, 3], "content": "same for all"}, "tag": "Comment[]"}),
    ));
    assert_eq!(v.request["Comment"]["@role"], json!("OWNER"));
    let v = passes(run(
        Method::Delete,
        &rules,
        json!({"Comment": {"id{}": [1, 2, 3]}, "tag": "Comment[]"}),
    ));
    assert_eq!(
        v.request["Comment"],
        json!({"id{}": [1, 2, 3], "@role": "OWNER"})
    );
    fails(
        run(
            Method::Delete,
            &rules,
            json!({"Comment": {"id": 1}, "tag": "Comment[]"}),
        ),
        406,
        "Comment must contain id{}",
    );
}

fn typed() -> RequestRules {
    rules_of(vec![row(
        1,
        Method::Put,
        "Profile",
        1,
        json!({"MUST": "id", "TYPE": {
            "ok": "BOOLEAN", "age": "NUMBER", "score": "DECIMAL", "name": "STRING", "site": "URL",
            "born": "DATE", "at": "TIME", "seen": "DATETIME", "meta": "OBJECT", "list": "ARRAY",
            "tags": "STRING[]", "grid": "NUMBER[][]"
        }}),
    )])
}

#[test]
fn type_rules_answer_415() {
    let rules = typed();
    let put = |k: &str, v: Value| {
        let mut p = serde_json::Map::new();
        p.insert("id".into(), json!(1));
        p.insert(k.into(), v);
        run(Method::Put, &rules, json!({"tag": "Profile", "Profile": p}))
    };
    let good = [
        ("ok", json!(true)),
        ("age", json!(-3)),
        ("age", json!("42")),
        ("score", json!(1.5)),
        ("score", json!("2.25")),
        ("name", json!("n")),
        ("site", json!("https://apijson.cn/api")),
        ("born", json!("2020-02-29")),
        ("at", json!("12:01:30")),
        ("at", json!("12:01")),
        ("seen", json!("2020-02-20T12:01:30.5")),
        ("list", json!([1, "a"])),
        ("tags", json!(["a", null, "b"])),
        ("grid", json!([[1, 2], [3]])),
        ("name", Value::Null),
    ];
    for (k, v) in good {
        passes(put(k, v));
    }
    let bad = [
        ("ok", json!(1), "BOOLEAN"),
        ("age", json!(1.5), "NUMBER"),
        ("age", json!("x"), "NUMBER"),
        ("score", json!(true), "DECIMAL"),
        ("name", json!(1), "STRING"),
        ("site", json!("not a url"), "URL"),
        ("born", json!("2021-02-29"), "DATE"),
        ("born", json!("2020-2-1"), "DATE"),
        ("at", json!("24:00:00"), "TIME"),
        ("seen", json!("2020-02-20 12:01:30"), "DATETIME"),
        ("meta", json!([]), "OBJECT"),
        ("list", json!("[]"), "ARRAY"),
        ("tags", json!("a"), "ARRAY"),
        ("tags", json!(["a", 1]), "STRING[]"),
        ("grid", json!([[1, "x"]]), "NUMBER[]"),
    ];
    for (k, v, ty) in bad {
        fails(
            put(k, v),
            415,
            &format!("{k}:value is invalid: its type must be {ty}"),
        );
    }
    // An object value is a child object, which a private request may only send where the
    // structure declares one (as in the reference), whatever TYPE says.
    fails(put("meta", json!({"a": 1})), 403, "may not contain meta:{}");
}

fn checked() -> RequestRules {
    rules_of(vec![row(
        1,
        Method::Put,
        "Rated",
        1,
        json!({"MUST": "id", "VERIFY": {
            "grade{}": ["A", "B"], "kind!{}": ["spam"], "score{}": ">90,<10", "level&{}": ">=1,<=5",
            "tags<>": "x", "pair&<>": [1, 2], "name$": "a%", "code~": "[a-z]+", "phone~": "PHONE",
            "mail~": ["EMAIL", "[0-9]+"], "bio[{}": "<=5", "nick[!{}": "=0", "items{{}": ">0",
            "balance+&{}": ">=1,<=100000"
        }}),
    )])
}

#[test]
fn verify_rules_answer_406() {
    let rules = checked();
    let put = |k: &str, v: Value| {
        let mut p = serde_json::Map::new();
        p.insert("id".into(), json!(1));
        p.insert(k.into(), v);
        run(Method::Put, &rules, json!({"tag": "Rated", "Rated": p}))
    };
    let good = [
        ("grade", json!("A")),
        ("kind", json!("news")),
        ("score", json!(95)),
        ("score", json!("5")),
        ("level", json!(5)),
        ("tags", json!(["y", "x"])),
        ("pair", json!([2, 3, 1.0])),
        ("name", json!("apijson")),
        ("code", json!("abc")),
        ("phone", json!(13000082001_i64)),
        ("mail", json!("a.b@c.cn")),
        ("mail", json!("123")),
        ("bio", json!("short")),
        ("nick", json!("n")),
        ("items", json!([1])),
        ("balance+", json!(1.5)),
        ("grade", Value::Null),
    ];
    for (k, v) in good {
        passes(put(k, v));
    }
    let bad = [
        ("grade", json!("C")),
        ("kind", json!("spam")),
        ("score", json!(50)),
        ("level", json!(0)),
        ("level", json!(6)),
        ("tags", json!(["y"])),
        ("pair", json!([1, 3])),
        ("name", json!("Apijson")),
        ("code", json!("abc1")),
        ("phone", json!("12000082001")),
        ("mail", json!("a@b")),
        ("bio", json!("too long")),
        ("nick", json!("")),
        ("items", json!([])),
        ("balance+", json!(100001)),
    ];
    for (k, v) in bad {
        fails(put(k, v), 406, &format!("{k}:value is invalid"));
    }
    fails(put("score", json!("high")), 406, "must be a number");
    fails(put("tags", json!("x")), 415, "needs an array");
    fails(put("items", json!(3)), 415, "needs a JSON array");
}

#[test]
fn broken_verify_rules_are_reported_as_structure_errors() {
    let rules = rules_of(vec![row(
        1,
        Method::Put,
        "Rated",
        1,
        json!({"VERIFY": {"a{}": ">x", "b{}": "5", "c{}": 3, "d": "=1", "e$": 1}}),
    )]);
    for k in ["a", "b", "c", "d", "e"] {
        let mut p = serde_json::Map::new();
        p.insert("id".into(), json!(1));
        p.insert(k.into(), json!(1));
        fails(
            run(Method::Put, &rules, json!({"tag": "Rated", "Rated": p})),
            406,
            "Request structure error",
        );
    }
}

#[test]
fn sql_like_patterns() {
    assert!(like("a%", "apijson"));
    assert!(like("%json", "apijson"));
    assert!(like("%pi%s_n", "apijson"));
    assert!(like("a_i%", "api"));
    assert!(like("%", ""));
    assert!(like("100\\%", "100%"));
    assert!(!like("100\\%", "1000"));
    assert!(!like("a_", "a"));
    assert!(!like("%x%", "apijson"));
    assert!(like("%a%a%", "banana"));
}

#[test]
fn calendar_formats() {
    assert!(is_date("2000-02-29"));
    assert!(!is_date("1900-02-29"));
    assert!(!is_date("2020-13-01"));
    assert!(!is_date("2020-04-31"));
    assert!(!is_date("20-04-01"));
    assert!(is_time("00:00"));
    assert!(is_time("23:59:59.123456789"));
    assert!(!is_time("23:59.5"));
    assert!(!is_time("23:60"));
    assert!(!is_time("1:00"));
    assert!(is_datetime("2020-02-20T12:01"));
    assert!(!is_datetime("2020-02-20"));
}
