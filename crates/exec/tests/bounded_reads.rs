//! Reads that SQLite runs on the async worker are those whose plan proves them bounded: random
//! table objects are planned against a real SQLite file's schema (its keys read from its own
//! catalogue), and every statement the plan marks bounded must, with the request's values, end
//! within the inline step budget on a table far larger than that budget can scan, answering at
//! most one row, the rows the same statement answers as a job.

use apijet_core::Method;
use apijet_exec::backend::SqliteBackend;
use apijet_exec::sink::CollectSink;
use apijet_exec::{load_schema, Backend};
use apijet_plan::read::ReadPlan;
use apijet_plan::schema::SchemaCache;
use apijet_plan::shape::take_values;
use apijet_plan::template::Template;
use apijet_plan::verify::RequestRules;
use apijet_plan::{Context, PlanOptions};
use apijet_request::Request;
use apijet_sql::{render_template, Sqlite, Statement};
use proptest::prelude::*;
use serde_json::{json, Map, Value as Json};

/// Rows in `Moment`: a scan of them takes many times the inline step budget.
const ROWS: usize = 5_000;

/// A SQLite file with `Moment` (`id` primary key, `content` unique, `userId` indexed but not
/// unique, `date`) and an `Access` row granting it to everyone, and its schema cache.
fn database() -> &'static (Backend, SchemaCache) {
    static DB: std::sync::OnceLock<(Backend, SchemaCache)> = std::sync::OnceLock::new();
    DB.get_or_init(|| {
        let runtime = tokio::runtime::Runtime::new().expect("runtime");
        // Under cargo's folder for integration tests, not the system's: the database lives as
        // long as the test process, which has no moment to remove it.
        let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("apijet-bounded-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join("b.db");
        let backend = SqliteBackend::open(path.to_str().expect("utf-8"), true).expect("open");
        let everyone = r#"'["UNKNOWN","LOGIN","OWNER"]'"#;
        let script = [
            "CREATE TABLE Moment (id INTEGER PRIMARY KEY, userId INTEGER, content TEXT, \
             date TEXT)"
                .to_string(),
            "CREATE UNIQUE INDEX moment_content ON Moment (content)".into(),
            "CREATE INDEX moment_user ON Moment (userId)".into(),
            format!(
                "WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < {ROWS}) \
                 INSERT INTO Moment SELECT i, i % 7, 'c' || i, '2024-01-01' FROM s"
            ),
            "CREATE TABLE Access (id INTEGER PRIMARY KEY, name TEXT, alias TEXT, get TEXT, \
             head TEXT, gets TEXT, heads TEXT, post TEXT, put TEXT, \"delete\" TEXT, debug INT)"
                .into(),
            format!(
                "INSERT INTO Access VALUES (1, 'Moment', NULL, {everyone}, {everyone}, \
                 {everyone}, {everyone}, '[]', '[]', '[]', 0)"
            ),
        ];
        runtime.block_on(async {
            backend.execute_script(&script).await.expect("fill");
            let backend = Backend::Sqlite(backend);
            let schema = load_schema(&backend).await.expect("schema");
            (backend, schema)
        })
    })
}

fn inline_reads(backend: &Backend) -> (u64, u64) {
    match backend {
        Backend::Sqlite(b) => (b.inline_reads().ran(), b.inline_reads().moved()),
        _ => unreachable!("a SQLite file"),
    }
}

/// The point read's template of `body`, and the request's values.
fn template(body: &Json, schema: &SchemaCache) -> Option<(Template, Vec<Json>)> {
    let Json::Object(map) = body.clone() else {
        return None;
    };
    let mut req = Request::from_map(map).ok()?;
    let values = take_values(&mut req, &PlanOptions::default().expr).ok()?;
    let rules = RequestRules::default();
    let options = PlanOptions::default();
    let inputs = Context {
        rules: &rules,
        trusted: false,
        schema,
        options: &options,
        method: Method::Get,
        visitor: None,
    };
    let plan = ReadPlan::build(&req, &inputs).ok()?;
    let (_, object) = plan.point()?;
    let mut template = object.table.template()?;
    template.select.limit = Some(1);
    template.accepts(&values).then_some((template, values))
}

/// Runs the template's statement with `values`, marked as its plan marks it or not.
fn run(backend: &Backend, template: &Template, values: &[Json], bounded: bool) -> Vec<Json> {
    let text = render_template(&Sqlite, &template.select);
    let stmt = Statement {
        sql: text.sql.clone(),
        binds: Template::binds(&text, values),
        bounded,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let mut sink = CollectSink::new(&[]);
    match runtime.block_on(backend.fetch(&stmt, &mut sink)) {
        Ok(_) => sink.rows.into_iter().map(Json::Object).collect(),
        Err(e) => vec![json!({ "error": e.to_string() })],
    }
}

fn key() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "id",
        "id!",
        "id>",
        "id<=",
        "id{}",
        "id&{}",
        "userId",
        "userId>=",
        "content",
        "content!",
        "content$",
        "content~",
        "content{}",
        "date<",
        "id%",
    ])
}

fn value() -> impl Strategy<Value = Json> {
    prop_oneof![
        (-3i64..(ROWS as i64 + 3)).prop_map(Json::from),
        (0..ROWS + 3).prop_map(|i| json!(format!("c{i}"))),
        Just(json!("")),
        Just(json!("c%")),
        Just(json!(2.5)),
        Just(json!(true)),
        Just(json!([1, 2])),
    ]
}

fn keyword() -> impl Strategy<Value = Option<(&'static str, Json)>> {
    prop::option::of(prop::sample::select(vec![
        ("@column", json!("id,content")),
        ("@column", json!("id;length(content):n")),
        ("@column", json!("count(*):n")),
        ("@order", json!("id-")),
        ("@order", json!("rand()")),
        ("@combine", json!("content | userId")),
        ("@group", json!("userId")),
        ("@cast", json!("date:DATE")),
    ]))
}

fn body() -> impl Strategy<Value = Json> {
    // Half of them name a key's value, and so may be key lookups.
    let anchor = prop::option::of((prop::sample::select(vec!["id", "content"]), value()));
    let conditions = prop::collection::vec((key(), value()), 0..3);
    (anchor, conditions, keyword()).prop_map(|(anchor, conditions, keyword)| {
        let mut object = Map::new();
        for (k, v) in anchor.into_iter().chain(conditions) {
            object.insert(k.to_string(), v);
        }
        if let Some((k, v)) = keyword {
            object.insert(k.to_string(), v);
        }
        json!({ "Moment": object })
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn a_read_marked_bounded_ends_within_its_steps_and_answers_what_a_job_answers(body in body()) {
        let (backend, schema) = database();
        let Some((template, values)) = template(&body, schema) else { return Ok(()) };
        if !template.bounded {
            return Ok(());
        }
        let (_, moved_before) = inline_reads(backend);
        let inline = run(backend, &template, &values, true);
        let (_, moved_after) = inline_reads(backend);
        prop_assert_eq!(moved_after, moved_before, "{} ran past its step budget", body);
        prop_assert!(inline.len() <= 1, "{} answered {} rows", body, inline.len());
        prop_assert_eq!(inline, run(backend, &template, &values, false), "{}", body);
    }
}

#[test]
fn only_equality_on_a_unique_key_with_plain_columns_is_bounded() {
    let (backend, schema) = database();
    // A read without a template is planned per request, and never marked bounded.
    let bounded = |body: Json| template(&body, schema).is_some_and(|(t, _)| t.bounded);
    for body in [
        json!({"Moment": {"id": 3}}),
        json!({"Moment": {"content": "c3"}}),
        json!({"Moment": {"content": "c3", "userId>": 1, "@column": "id,date"}}),
        json!({"Moment": {"id": 3, "@order": "date-"}}),
    ] {
        assert!(bounded(body.clone()), "{body} is a key lookup");
    }
    for body in [
        json!({"Moment": {"userId": 3}}),
        json!({"Moment": {"id>": 3}}),
        json!({"Moment": {"date": "2024-01-01"}}),
        json!({"Moment": {"content$": "c3"}}),
        json!({"Moment": {"content~": "c3"}}),
        json!({"Moment": {"id": 3, "@column": "id;length(content):n"}}),
        json!({"Moment": {"id": 3, "content$": "c%"}}),
        json!({"Moment": {"id": 3, "userId": 1, "@combine": "id | userId"}}),
        json!({"Moment": {"id": 3, "@group": "userId", "@column": "userId"}}),
    ] {
        assert!(!bounded(body.clone()), "{body} is not a key lookup");
    }
    // A key lookup answers its row inline.
    let (template, values) = template(&json!({"Moment": {"content": "c42"}}), schema).expect("t");
    let (ran, _) = inline_reads(backend);
    let rows = run(backend, &template, &values, template.bounded);
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["id"], 42);
    assert_eq!(inline_reads(backend).0, ran + 1, "it ran inline");
}
