//! `@explain` answers the statements that ran: a nested page whose authors and comments are read
//! with one statement per level reports those statements rather than running item by item
//! because `@explain` was asked. Each item still carries its object's `@explain`, as the
//! reference answers; where one statement answered several items, the later ones say
//! `"repeat": true`. On every engine.

use crate::support::on_every_engine;
use serde_json::Value;

/// Every `@explain` of an answer: its SQL and whether it repeats one before, in answer order.
fn explained(v: &Value, out: &mut Vec<(String, bool)>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                match (k.as_str(), x.get("sql").and_then(Value::as_str)) {
                    ("@explain", Some(sql)) => {
                        out.push((sql.to_string(), x["repeat"] == Value::Bool(true)))
                    }
                    _ => explained(x, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|x| explained(x, out)),
        _ => {}
    }
}

#[test]
fn explain_lists_each_statement_that_ran_once_on_every_engine() {
    let requests = [
        r#"{"[]":{"count":3,"Moment":{"@column":"id,userId"},"User":{"id@":"/Moment/userId","@column":"id,name"}}}"#,
        r#"{"[]":{"count":4,"Moment":{"@column":"id,userId"},"User":{"id@":"/Moment/userId","@column":"id,name"},"Comment[]":{"count":2,"Comment":{"momentId@":"[]/Moment/id","@column":"id,momentId"}}}}"#,
        r#"{"[]":{"count":2,"Moment":{"@column":"id"},"Comment[]":{"count":2,"Comment":{"momentId@":"[]/Moment/id","content":"no comment says this"}}}}"#,
        r#"{"User":{"id":82001,"@column":"id,name"},"[]":{"count":2,"Moment":{"userId@":"User/id","@column":"id"}}}"#,
    ];
    on_every_engine("explain_statements", "debug = true\n", |engine, server| {
        for request in requests {
            let plain = server.client().post("/get", request).expect("answer");
            let ran: usize = plain
                .header("x-apijet-statements")
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("{engine}: no statement count for {request}"));
            let mut with_explain: Value = serde_json::from_str(request).expect("json");
            with_explain["@explain"] = Value::Bool(true);
            let answer = server.post_json("/get", &with_explain);
            assert_eq!(answer["code"], 200, "{engine}: {answer}");
            let mut all = Vec::new();
            explained(&answer, &mut all);
            let first: Vec<&String> = all.iter().filter(|e| !e.1).map(|e| &e.0).collect();
            assert_eq!(
                first.len(),
                ran,
                "{engine}: {request} ran {ran} statements; @explain reports {all:#?}"
            );
            // A repeat is of a statement reported before it.
            for (i, (sql, repeat)) in all.iter().enumerate() {
                if *repeat {
                    assert!(
                        all[..i].iter().any(|(s, r)| s == sql && !r),
                        "{engine}: {sql} repeats nothing"
                    );
                }
            }
            // Every item of the page carries the @explain of each object it refers to (the
            // list's own statement, Moment's, is explained on its first item, as item by item).
            for (n, item) in answer["[]"].as_array().into_iter().flatten().enumerate() {
                for (key, obj) in item.as_object().into_iter().flatten().skip(1) {
                    let explain = match obj {
                        Value::Array(rows) => rows.first().map(|r| {
                            r.get("@explain")
                                .or_else(|| r.get("Comment")?.get("@explain"))
                        }),
                        other => Some(other.get("@explain")),
                    };
                    assert!(
                        matches!(explain, Some(Some(_))),
                        "{engine}: {request}: item {n} {key} has no @explain: {item}"
                    );
                }
            }
            // The answer itself is the same, @explain aside (an object or list that matched no
            // row holds only its @explain).
            let strip = |v: &Value| {
                let mut v = v.clone();
                fn is_empty(v: &Value) -> bool {
                    match v {
                        Value::Object(m) => m.is_empty(),
                        Value::Array(a) => a.iter().all(is_empty),
                        _ => false,
                    }
                }
                fn drop_explain(v: &mut Value) {
                    match v {
                        Value::Object(m) => {
                            m.remove("@explain");
                            m.remove("time");
                            m.values_mut().for_each(drop_explain);
                            m.retain(|_, x| !is_empty(x));
                        }
                        Value::Array(a) => a.iter_mut().for_each(drop_explain),
                        _ => {}
                    }
                }
                drop_explain(&mut v);
                v
            };
            let plain: Value = plain.json().expect("json");
            assert_eq!(strip(&answer), strip(&plain), "{engine}: {request}");
        }
    });
}
