//! What a write changes: the tables of its statements and of the functions run after its
//! objects that write themselves, told to whoever follows changes once the write commits.

use super::{ObjectCalls, WriteStep};
use crate::call::{Arg, Function, Planned};
use crate::schema::SchemaCache;

/// A remote function run after a written object that writes itself: the demo's deletions of a
/// moment's comments and of a comment's replies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WritingCall {
    /// The API table it deletes from.
    pub table: &'static str,
    /// The column that names the written object's id.
    pub column: &'static str,
    /// It deletes the rows that name the deleted ones too, level by level.
    pub recursive: bool,
}

/// The function `call` is, when it writes: the demo's deletions, of the written object's
/// `id`.
pub fn writing_call(call: &Planned) -> Option<WritingCall> {
    let call = call.as_ref().ok()?;
    if call.args != [Arg::Key("id".into())] {
        return None;
    }
    let (column, recursive) = match call.function {
        Function::DeleteCommentOfMoment => ("momentId", false),
        Function::DeleteChildComment => ("toId", true),
        _ => return None,
    };
    Some(WritingCall {
        table: "Comment",
        column,
        recursive,
    })
}

/// The SQL names of the tables `steps` change, each once, in the order first changed.
pub(super) fn changes(steps: &[WriteStep], schema: &SchemaCache) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut add = |name: &str| {
        if !out.iter().any(|n| n == name) {
            out.push(name.to_string());
        }
    };
    let calls = |calls: &ObjectCalls, add: &mut dyn FnMut(&str)| {
        for (_, call) in &calls.after {
            let table = writing_call(call).and_then(|w| schema.table(w.table));
            if let Some(t) = table {
                add(&t.sql_name);
            }
        }
    };
    for step in steps {
        match step {
            WriteStep::Insert(s) => {
                add(s.table.as_str());
                s.calls.iter().for_each(|c| calls(c, &mut add));
            }
            WriteStep::Update(s) => {
                add(s.update.table.as_str());
                calls(&s.calls, &mut add);
            }
            WriteStep::UpdateBatch { items, .. } => {
                for s in items {
                    add(s.update.table.as_str());
                    calls(&s.calls, &mut add);
                }
            }
            WriteStep::Delete(s) => {
                add(s.delete.table.as_str());
                calls(&s.calls, &mut add);
            }
            WriteStep::Echo { .. } | WriteStep::Fail(_) => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use crate::schema::{ColumnKind, SchemaCache, Table};
    use crate::verify::RequestRules;
    use crate::write::WritePlan;
    use crate::{Context, PlanOptions};
    use apijet_core::{Method, Role};
    use apijet_request::Request;
    use serde_json::{json, Value as Json};

    fn schema() -> SchemaCache {
        let roles = vec![Role::Unknown, Role::Login, Role::Owner, Role::Admin];
        let mut s = SchemaCache::new();
        for (api, sql) in [("Moment", "Moment"), ("Comment", "apijson_comment")] {
            s.insert(Table::granted(
                api,
                sql,
                &[
                    ("id", ColumnKind::Int),
                    ("userId", ColumnKind::Int),
                    ("momentId", ColumnKind::Int),
                    ("toId", ColumnKind::Int),
                    ("content", ColumnKind::Text),
                ],
                &roles,
            ));
        }
        s
    }

    fn changes(method: Method, body: Json) -> Vec<String> {
        let schema = schema();
        let options = PlanOptions::default();
        let rules = RequestRules::default();
        let inputs = Context {
            schema: &schema,
            rules: &rules,
            options: &options,
            method,
            visitor: None,
            trusted: true,
        };
        let Json::Object(map) = body else {
            panic!("an object")
        };
        let req = Request::from_map(map).expect("a request");
        let plan = WritePlan::build(&req, &[], &inputs).expect("a plan");
        plan.changes().to_vec()
    }

    #[test]
    fn a_write_plan_names_the_sql_tables_it_changes_its_functions_writes_included() {
        let posted = changes(
            Method::Post,
            json!({"Moment": {"content": "a"}, "Comment": {"momentId": 1, "content": "b"}}),
        );
        assert_eq!(posted, ["Moment", "apijson_comment"]);
        assert_eq!(
            changes(Method::Put, json!({"Comment": {"id": 1, "content": "c"}})),
            ["apijson_comment"]
        );
        // Deleting a moment deletes its comments through the function after it.
        let deleted = changes(
            Method::Delete,
            json!({"Moment": {"id": 1, "commentCount()": "deleteCommentOfMoment(id)"}}),
        );
        assert_eq!(deleted, ["Moment", "apijson_comment"]);
        assert_eq!(
            changes(Method::Delete, json!({"Moment": {"id": 1}})),
            ["Moment"]
        );
    }
}
