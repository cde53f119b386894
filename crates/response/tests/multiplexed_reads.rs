//! A multiplexed read answers each listed value exactly as the shape's own read answers the
//! request holding that value: random rows, random lists (repeated values, values no row has,
//! numbers and texts), random shapes (paging, orders, renamed columns, `[]` and `Table[]` lists,
//! point lookups, nested lists whose members are read by their parents' keys, record views
//! whose later members are read by their first object's values), on a SQLite file. The
//! answers are compared byte for byte, as each
//! subscriber would receive them: a row routed to another value's answer, or lost, shows.

use apijet_core::Role;
use apijet_exec::backend::{Backend, DbRole, DbUrl};
use apijet_exec::read::{run, run_multiplexed, ReadEnv};
use apijet_plan::read::{ListKind, ReadPlan};
use apijet_plan::schema::{ColumnKind, SchemaCache, Table};
use apijet_plan::shape::take_values;
use apijet_plan::verify::RequestRules;
use apijet_plan::{Context, PlanOptions};
use apijet_request::Request;
use apijet_response::answer::AnswerWriter;
use apijet_sql::{Dialect, Sqlite};
use proptest::prelude::*;
use serde_json::{json, Value as Json};
use std::sync::atomic::{AtomicUsize, Ordering};

fn schema() -> SchemaCache {
    use ColumnKind::*;
    let mut s = SchemaCache::new();
    s.insert(Table::granted(
        "Comment",
        "Comment",
        &[
            ("id", Int),
            ("userId", Int),
            ("momentId", Int),
            ("content", Text),
        ],
        &[Role::Unknown, Role::Login],
    ));
    s
}

/// A case's SQLite file, removed with its write-ahead log and index however the case ends
/// (a case with nothing to list returns early): nothing of the test's may be left behind.
struct ScratchFile(std::path::PathBuf);

impl Drop for ScratchFile {
    fn drop(&mut self) {
        for suffix in ["", "-wal", "-shm"] {
            let mut file = self.0.clone().into_os_string();
            file.push(suffix);
            let _ = std::fs::remove_file(file);
        }
    }
}

/// A fresh SQLite file holding `rows` as `(userId, momentId, content)`, ids from 1.
async fn database(rows: &[(i64, i64, String)]) -> (Backend, ScratchFile) {
    static N: AtomicUsize = AtomicUsize::new(0);
    // In cargo's temp folder of this build, beside the other tests' files.
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "apijet-multiplexed-{}-{}.db",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_file(&path);
    let url = DbUrl::parse(&format!("sqlite://{}", path.display())).expect("a url");
    let backend = Backend::connect(&url, 2, 0, true, DbRole::Primary { replicated: false })
        .await
        .expect("a database");
    let mut script = vec![
        "CREATE TABLE Comment (id INTEGER PRIMARY KEY, userId INTEGER, momentId INTEGER, content TEXT)"
            .to_string(),
    ];
    for (i, (user, moment, content)) in rows.iter().enumerate() {
        script.push(format!(
            "INSERT INTO Comment VALUES ({}, {user}, {moment}, '{}')",
            i + 1,
            content.replace('\'', "''")
        ));
    }
    backend.execute_script(&script).await.expect("rows");
    (backend, ScratchFile(path))
}

/// A shape with its one value in slot 0, written with `v`.
fn shape(form: usize, count: u64, page: u64, order: &str, v: &Json) -> Json {
    match form {
        0 => json!({"Comment[]": {"count": count, "page": page,
            "Comment": {"userId": v, "@order": order, "@column": "id,momentId:userId,content"}}}),
        1 => json!({"[]": {"count": count, "page": page,
            "Comment": {"userId": v, "@order": order}}}),
        2 => json!({"Comment": {"userId": v, "@order": order, "@column": "momentId:id,content"}}),
        // Nested lists: items built from the main rows, members batched by their parents.
        4 => json!({"[]": {"count": count, "page": page,
            "Comment": {"userId": v, "@order": order, "@column": "id,momentId:userId,content"},
            "Comment:same": {"id@": "/Comment/userId", "@column": "id,content"}}}),
        5 => json!({"[]": {"count": count, "page": page,
            "Comment": {"userId": v, "@order": order},
            "Comment[]": {"count": 2, "Comment": {"momentId@": "[]/Comment/momentId", "@order": "id-"}},
            "Comment:same": {"id@": "/Comment/momentId"}}}),
        // Record views: a first object, then members read by its values for every key at
        // once; a first object without a row empties the answer but for the custom keys.
        6 => {
            json!({"Comment": {"userId": v, "@order": order, "@column": "id,momentId,userId,content"},
            "Comment:moment": {"id@": "Comment/momentId", "@column": "id,content"},
            "Comment[]": {"count": count, "page": page,
                "Comment": {"momentId@": "Comment/momentId", "@order": "id-", "@column": "id,userId"}}})
        }
        7 => json!({"Comment": {"id": v, "@column": "momentId:id,userId,content"},
            "Comment:author": {"id@": "/Comment/userId"},
            "note": "kept",
            "Comment[]": {"count": count, "Comment": {"momentId@": "Comment/id", "@order": order}},
            "@custom": "last"}),
        _ => json!({"Comment": {"id": v, "@column": "momentId:id,userId,content"}}),
    }
}

fn plan_of(body: &Json) -> (ReadPlan, Vec<Json>) {
    let mut req =
        Request::from_map(body.as_object().cloned().expect("an object")).expect("a request");
    let options = PlanOptions::default();
    let values = take_values(&mut req, &options.expr).expect("values");
    let schema = schema();
    let rules = RequestRules::default();
    let context = Context {
        schema: &schema,
        rules: &rules,
        options: &options,
        method: apijet_core::Method::Get,
        visitor: None,
        trusted: false,
    };
    (ReadPlan::build(&req, &context).expect("a plan"), values)
}

fn env<'a>(backend: &'a Backend, options: &'a PlanOptions, values: &'a [Json]) -> ReadEnv<'a> {
    static DIALECT: Sqlite = Sqlite;
    ReadEnv {
        backend,
        fallback: None,
        dialect: &DIALECT as &dyn Dialect,
        options,
        visitor: None,
        values,
    }
}

/// What the shape's own read answers with `values` within `options`, without its `time`
/// (`None` when it refuses: past its budget).
async fn alone(
    plan: &ReadPlan,
    backend: &Backend,
    options: &PlanOptions,
    values: &[Json],
) -> Option<Option<Vec<u8>>> {
    let mut sink = AnswerWriter::held(options.max_rows, options.max_answer_bytes);
    run(plan, &env(backend, options, values), &mut sink)
        .await
        .ok()?;
    Some(Some(sink.untimed().await.expect("an answer").to_vec()))
}

fn rows() -> impl Strategy<Value = Vec<(i64, i64, String)>> {
    prop::collection::vec((1i64..7, 1i64..5, "[a-z' ]{0,6}"), 0..40)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, .. ProptestConfig::default() })]

    #[test]
    fn each_listed_value_gets_exactly_the_answer_of_its_own_read(
        rows in rows(),
        form in 0usize..8,
        count in 1u64..4,
        page in 0u64..3,
        order in prop::sample::select(vec!["id+", "id-", "momentId+,id-", "content+,id+"]),
        listed in prop::collection::vec(0i64..9, 1..10),
        as_text in any::<bool>(),
        max_rows in prop::sample::select(vec![6usize, 10_000]),
    ) {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("a runtime");
        runtime.block_on(async {
            let (backend, file) = database(&rows).await;
            let value = |v: i64| if as_text { json!(v.to_string()) } else { json!(v) };
            let (plan, values) = plan_of(&shape(form, count, page, order, &value(listed[0])));
            let multiplexed = plan.multiplexed(0).expect("the shape multiplexes over its slot");
            let listed: Vec<Json> = listed
                .iter()
                .map(|v| value(*v))
                .filter(|v| multiplexed.accepts(std::slice::from_ref(v)).is_some())
                .collect();
            if listed.is_empty() {
                return;
            }
            let kind = if as_text { ListKind::Text } else { ListKind::Int };
            let options = PlanOptions { max_rows, ..PlanOptions::default() };
            let mut sinks: Vec<AnswerWriter<'_>> = listed
                .iter()
                .map(|_| AnswerWriter::held(options.max_rows, options.max_answer_bytes))
                .collect();
            let done = run_multiplexed(&plan, &multiplexed, &env(&backend, &options, &values), &listed, kind, &mut sinks)
                .await
                .expect("a multiplexed read");
            // Refused only where a budget is short (a chunk of nested items past max_rows).
            if max_rows == 10_000 {
                assert!(done.refused.is_empty(), "{done:?}");
            }
            for (i, (v, sink)) in listed.iter().zip(sinks).enumerate() {
                let want = alone(&plan, &backend, &options, std::slice::from_ref(v)).await;
                if done.refused.contains(&i) {
                    continue;
                }
                let got = sink.untimed().await.map(|b| Some(b.to_vec())).ok();
                assert_eq!(
                    got.as_ref().map(|g| g.as_deref().map(String::from_utf8_lossy)),
                    want.as_ref().map(|w| w.as_deref().map(String::from_utf8_lossy)),
                    "value {v} of {listed:?}"
                );
            }
            drop(backend);
            drop(file);
        });
    }
}
