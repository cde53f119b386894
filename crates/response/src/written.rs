//! The answer of a write: each written object as the reference answers it, `{"sql"?, "ok",
//! "code", "msg", "count", "id" | "id[]", <the results of its functions>}`, values answered as
//! sent, in request order.

use apijet_exec::write::{WriteOutcome, Written, WrittenIds, WrittenMember};
use serde_json::{Map, Value as Json};

/// The members of a write's answer.
pub fn written(outcome: WriteOutcome) -> Map<String, Json> {
    outcome
        .members
        .into_iter()
        .map(|(key, member)| match member {
            WrittenMember::Object(w) => (key, Json::Object(written_object(w))),
            WrittenMember::Value(v) => (key, v),
        })
        .collect()
}

/// One written object's answer.
pub fn written_object(w: Written) -> Map<String, Json> {
    let mut out = Map::new();
    if let Some(sql) = w.sql {
        out.insert("sql".into(), Json::String(sql));
    }
    out.insert("count".into(), Json::from(w.count));
    super::counted(&mut out);
    match w.ids {
        Some(WrittenIds::One(id)) => {
            out.insert("id".into(), id);
        }
        Some(WrittenIds::List(ids)) => {
            out.insert("id[]".into(), Json::Array(ids));
        }
        None => {}
    }
    for (name, v) in w.results {
        out.insert(name, v);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn written_objects_answer_as_the_reference() {
        let outcome = WriteOutcome {
            members: vec![
                (
                    "Moment".into(),
                    WrittenMember::Object(Written {
                        sql: Some("INSERT …".into()),
                        count: 1,
                        ids: Some(WrittenIds::One(json!(7))),
                        results: vec![("n".into(), json!(2))],
                    }),
                ),
                ("tag".into(), WrittenMember::Value(json!("x"))),
                (
                    "Comment[]".into(),
                    WrittenMember::Object(Written {
                        count: 2,
                        ids: Some(WrittenIds::List(vec![json!(1), json!(2)])),
                        ..Written::default()
                    }),
                ),
            ],
        };
        assert_eq!(
            serde_json::to_string(&written(outcome)).expect("json"),
            r#"{"Moment":{"sql":"INSERT …","ok":true,"code":200,"msg":"success","count":1,"id":7,"n":2},"tag":"x","Comment[]":{"ok":true,"code":200,"msg":"success","count":2,"id[]":[1,2]}}"#
        );
    }
}
