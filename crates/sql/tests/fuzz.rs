//! Property tests for hostile input: random and adversarial bodies (deep nesting, long operator
//! chains, every key form, every reserved key) go through parse → plan → render for every
//! dialect. Whatever the body, the pipeline must answer (a plan or an error) without panicking,
//! without overflowing the stack, and within a bounded time. The case count is fixed, so CI
//! runs the same amount of work every time.

use apijet_core::{Method, Role};
use apijet_plan::schema::{ColumnKind, SchemaCache, Table};
use apijet_plan::verify::RequestRules;
use apijet_plan::{plan_subquery, Context, PlanOptions, Scope, TablePlan};
use apijet_request::{Container, Node, Request, TableEntry};
use apijet_sql::{render, Dialect, MySql, Postgres, Sqlite};
use proptest::prelude::*;
use serde_json::{json, Map, Value as Json};
use std::time::{Duration, Instant};

/// A refusal or a plan for one body never takes this long, whatever the body.
const BOUND: Duration = Duration::from_secs(2);

fn table(api: &str, sql: &str, columns: &[(&str, ColumnKind)]) -> Table {
    Table::granted(api, sql, columns, &[Role::Unknown, Role::Login])
}

fn schema() -> SchemaCache {
    use ColumnKind::*;
    let mut s = SchemaCache::new();
    s.insert(table(
        "User",
        "apijson_user",
        &[
            ("id", Int),
            ("name", Text),
            ("contactIdList", Json),
            ("date", Timestamp),
            ("_password", Text),
        ],
    ));
    s.insert(table(
        "Moment",
        "Moment",
        &[
            ("id", Int),
            ("userId", Int),
            ("content", Text),
            ("praiseUserIdList", Json),
            ("date", Timestamp),
        ],
    ));
    s.insert(table(
        "Comment",
        "Comment",
        &[
            ("id", Int),
            ("momentId", Int),
            ("userId", Int),
            ("content", Text),
        ],
    ));
    s
}

const COLUMNS: &[&str] = &[
    "id",
    "userId",
    "momentId",
    "name",
    "content",
    "contactIdList",
    "praiseUserIdList",
    "date",
    "_password",
    "nope",
    "",
];

/// Every operator suffix, logic character and reference form of the key grammar.
const SUFFIXES: &[&str] = &[
    "", "!", "&", "|", "{}", "&{}", "|{}", "!{}", "}{", "}{@", "<>", "!<>", "$", "%$", "?%$",
    "%?$", "_$", "$_", "!$", "|$", "&$", "~", "*~", "!~", "!*~", "%", "!%", ">", ">=", "<", "<=",
    "!>", "&>", "+", "-", "@", "{}@", "$@", "()", "-()", "+()", "[]", "[{}", "{{}", "[", "{", "!=",
    "==", "{}{}", "@@", "}{}{",
];

const RESERVED: &[&str] = &[
    "@column",
    "@order",
    "@group",
    "@having",
    "@having&",
    "@key",
    "@combine",
    "@json",
    "@cast",
    "@null",
    "@string",
    "@trim",
    "@role",
    "@explain",
    "@drop",
    "@from@",
    "@raw",
    "@database",
    "@schema",
    "@cache",
    "@p()",
    "@try",
    "@",
];

/// Pieces that expressions are made of, valid and not.
const TOKENS: &[&str] = &[
    "(",
    ")",
    "((",
    "))",
    ",",
    ";",
    ":",
    "!",
    "&",
    "|",
    " & ",
    " | ",
    "+",
    "-",
    "*",
    "/",
    "%",
    "=",
    "!=",
    "<",
    "<=",
    ">",
    ">=",
    "<>",
    "'",
    "'x'",
    "`",
    "id",
    "userId",
    "name",
    "_password",
    "count",
    "count(*)",
    "sum",
    "max",
    "abs",
    "length",
    "concat",
    "distinct ",
    "DISTINCT ",
    "rand()",
    "now()",
    "1",
    "0",
    "-1",
    "2.5",
    "1e308",
    "99999999999999999999",
    " ",
    "\\",
    "\"",
    "a",
    "n",
    ":n",
    "id-",
    "id+",
    "null",
    "=null",
    "OVER",
    "CASE",
    "WHEN",
    "THEN",
    "END",
    "AS",
    "\u{0}",
    "é",
];

fn expression() -> impl Strategy<Value = String> {
    prop_oneof![
        // Token soup.
        prop::collection::vec(prop::sample::select(TOKENS), 0..60).prop_map(|t| t.concat()),
        // Deep: an opening piece repeated, a core, the closing piece repeated.
        (
            prop::sample::select(&["(", "abs(", "count(", "!", "(!", "-", "((", "!("][..]),
            prop::sample::select(&["id", "count(id)", "id>", "name", ""][..]),
            prop::sample::select(&[")", "))", "", ")>0"][..]),
            1usize..6000,
        )
            .prop_map(|(open, core, close, n)| {
                format!("{}{core}{}", open.repeat(n), close.repeat(n))
            }),
        // Long chains.
        (
            prop::sample::select(&["count(id)", "(id)", "id", "1"][..]),
            prop::sample::select(&["+1", "*1", "-id", "%2", ";count(id)>0", ",id", " & a"][..]),
            1usize..20_000,
        )
            .prop_map(|(head, link, n)| format!("{head}{}", link.repeat(n))),
    ]
}

fn json_value() -> impl Strategy<Value = Json> {
    let leaf = prop_oneof![
        Just(Json::Null),
        any::<bool>().prop_map(Json::from),
        any::<i64>().prop_map(Json::from),
        any::<f64>().prop_map(|f| json!(f)),
        expression().prop_map(Json::from),
        "[a-z%_^$.*()\\[\\]{}|?+\\\\]{0,12}".prop_map(Json::from),
    ];
    leaf.prop_recursive(4, 48, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..8).prop_map(Json::Array),
            prop::collection::vec(
                (
                    (
                        prop::sample::select(COLUMNS),
                        prop::sample::select(SUFFIXES)
                    ),
                    inner
                ),
                0..6
            )
            .prop_map(|kv| {
                Json::Object(
                    kv.into_iter()
                        .map(|((c, s), v)| (format!("{c}{s}"), v))
                        .collect(),
                )
            }),
        ]
    })
}

/// One member of a table object: a condition key, a reserved key, or a nested object.
fn entry() -> impl Strategy<Value = (String, Json)> {
    prop_oneof![
        4 => (prop::sample::select(COLUMNS), prop::sample::select(SUFFIXES), json_value())
            .prop_map(|(c, s, v)| (format!("{c}{s}"), v)),
        3 => (prop::sample::select(RESERVED), expression())
            .prop_map(|(k, e)| (k.to_string(), Json::from(e))),
        1 => (prop::sample::select(RESERVED), json_value())
            .prop_map(|(k, v)| (k.to_string(), v)),
        1 => (prop::sample::select(&["id@", "id{}@", "userId@", "id}{@"][..]), table_object(1))
            .prop_map(|(k, t)| (k.to_string(), json!({"from": "Moment", "Moment": t}))),
    ]
}

fn table_object(depth: u32) -> impl Strategy<Value = Json> {
    prop::collection::vec(entry_flat(), 0..8)
        .prop_map(|kv| Json::Object(kv.into_iter().collect::<Map<String, Json>>()))
        .prop_recursive(depth, 16, 2, |inner| {
            (prop::collection::vec(entry_flat(), 0..4), inner).prop_map(|(kv, sub)| {
                let mut m: Map<String, Json> = kv.into_iter().collect();
                m.insert("id{}@".into(), json!({"from": "Comment", "Comment": sub}));
                Json::Object(m)
            })
        })
}

fn entry_flat() -> impl Strategy<Value = (String, Json)> {
    prop_oneof![
        (
            prop::sample::select(COLUMNS),
            prop::sample::select(SUFFIXES),
            json_value()
        )
            .prop_map(|(c, s, v)| (format!("{c}{s}"), v)),
        (prop::sample::select(RESERVED), expression())
            .prop_map(|(k, e)| (k.to_string(), Json::from(e))),
    ]
}

fn body() -> impl Strategy<Value = Json> {
    let object = prop::collection::vec(entry(), 0..8)
        .prop_map(|kv| Json::Object(kv.into_iter().collect::<Map<String, Json>>()));
    (
        prop::sample::select(
            &[
                "User",
                "Moment",
                "Comment",
                "User:u",
                "Nope",
                "Moment[]",
                "[]",
                "User-id[]",
                "Comment-userId[]",
            ][..],
        ),
        object,
        prop::collection::vec(("(count|page|query|join|compat)", json_value()), 0..3),
    )
        .prop_map(|(key, obj, array_keys)| {
            if key.ends_with("[]") {
                let mut arr: Map<String, Json> = array_keys.into_iter().collect();
                let table = key.trim_end_matches("[]").split('-').next().unwrap_or("");
                let table = if table.is_empty() { "Moment" } else { table };
                arr.insert(table.to_string(), obj);
                json!({ key: arr })
            } else {
                json!({ key: obj })
            }
        })
}

/// parse → plan → render for every dialect; errors are fine, panics and slowness are not.
fn run(body: &[u8]) {
    let Ok(map) = apijet_request::parse_body(body) else {
        return;
    };
    let Ok(req) = Request::from_map(map) else {
        return;
    };
    let schema = schema();
    let options = PlanOptions::default();
    let dialects: [&dyn Dialect; 3] = [&Sqlite, &Postgres, &MySql { mariadb: true }];
    for method in [Method::Get, Method::Head] {
        let rules = RequestRules::default();
        let ctx = Scope::new(Context {
            schema: &schema,
            rules: &rules,
            options: &options,
            method,
            visitor: None,
            trusted: false,
        });
        plan_container(&req.root, &ctx, &dialects);
    }
}

fn plan_container(c: &Container, ctx: &Scope<'_>, dialects: &[&dyn Dialect]) {
    for m in &c.members {
        match &m.node {
            Node::Table(t) => {
                let Ok(plan) = TablePlan::new(t, ctx) else {
                    continue;
                };
                if let Ok(Some(select)) = plan.select(&[], &mut |_| Some(json!(1))) {
                    for d in dialects {
                        let stmt = render(*d, &select);
                        assert!(!stmt.sql.is_empty());
                    }
                }
                for e in &t.entries {
                    if let TableEntry::SubqueryCondition { subquery, .. } = e {
                        if let Ok(select) = plan_subquery(subquery, ctx) {
                            for d in dialects {
                                render(*d, &select);
                            }
                        }
                    }
                }
            }
            Node::Array(a) => {
                let _ = apijet_plan::read::paging(a, &m.key, 100, 100);
                if let Some(j) = &a.join {
                    let _ = apijet_plan::read::join_specs(j);
                }
                plan_container(&a.items, ctx, dialects);
            }
            _ => {}
        }
    }
}

fn timed(body: &[u8]) {
    let start = Instant::now();
    run(body);
    let took = start.elapsed();
    assert!(
        took < BOUND,
        "{took:?} for a body of {} bytes: {}",
        body.len(),
        String::from_utf8_lossy(&body[..body.len().min(300)])
    );
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 400,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn any_request_plans_or_is_refused(b in body()) {
        timed(b.to_string().as_bytes());
    }

    #[test]
    fn any_bytes_parse_or_are_refused(bytes in prop::collection::vec(any::<u8>(), 0..4096)) {
        timed(&bytes);
    }

    #[test]
    fn deeply_nested_json_is_refused(
        open in prop::sample::select(&["[", "{\"a\":", "{\"Moment\":", "{\"[]\":", "{\"id@\":{\"from\":\"Moment\",\"Moment\":"][..]),
        n in 1usize..100_000,
    ) {
        let mut text = String::from("{\"Moment\":{\"id{}\":");
        text.push_str(&open.repeat(n));
        timed(text.as_bytes());
    }
}
