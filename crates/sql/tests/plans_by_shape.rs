//! A read is planned once per shape, and every request of the shape binds its own values into
//! that plan: what a request gets from the kept plan must be exactly what planning it afresh
//! gives. Random bodies of one table object (every comparison and list form, keywords that
//! shape the statement, values of every JSON type, `id`s that match nothing) check it for every
//! dialect: the statement a template writes with a request's values equals the statement the
//! plan makes with them, whenever the template takes them; and requests of one shape share one
//! kept plan, while a different keyword or method is another shape.

use apijet_core::{Method, Role, Visitor};
use apijet_plan::read::{
    entry_bytes, CacheBudget, Dependencies, MemberPlan, Mode, PlanCache, Purpose, ReadPlan,
    ShapeKey,
};
use apijet_plan::schema::{ColumnKind, SchemaCache, Table};
use apijet_plan::shape::take_values;
use apijet_plan::template::Template;
use apijet_plan::verify::RequestRules;
use apijet_plan::{Context, PlanOptions};
use apijet_request::Request;
use apijet_sql::{render, render_template, Dialect, MySql, Postgres, Sqlite};
use proptest::prelude::*;
use serde_json::{json, Map, Value as Json};
use std::sync::Arc;

/// No `Request` structures: these reads are public.
fn rules() -> &'static RequestRules {
    static RULES: std::sync::OnceLock<RequestRules> = std::sync::OnceLock::new();
    RULES.get_or_init(RequestRules::default)
}

fn schema() -> SchemaCache {
    use ColumnKind::*;
    let roles = vec![Role::Unknown, Role::Login, Role::Owner];
    let mut s = SchemaCache::new();
    s.insert(Table::granted(
        "User",
        "apijson_user",
        &[("id", Int), ("name", Text)],
        &roles,
    ));
    s.insert(Table::granted(
        "Moment",
        "Moment",
        &[
            ("id", Int),
            ("userId", Int),
            ("content", Text),
            ("date", Timestamp),
        ],
        &roles,
    ));
    s
}

fn request(body: &Json) -> (Request, Vec<Json>) {
    let Json::Object(map) = body.clone() else {
        panic!("an object")
    };
    let mut req = Request::from_map(map).expect("request");
    let values = take_values(&mut req, &PlanOptions::default().expr).expect("values");
    (req, values)
}

fn value() -> impl Strategy<Value = Json> {
    prop_oneof![
        (-3i64..5).prop_map(Json::from),
        Just(json!(9_007_199_254_740_993u64)),
        Just(json!(18_446_744_073_709_551_615u64)),
        Just(json!(2.5)),
        Just(json!(-0.5)),
        Just(json!("")),
        Just(json!("82001")),
        Just(json!("a'b")),
        Just(json!(true)),
        Just(json!([1, 2])),
        Just(json!([])),
    ]
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
        "userId!",
        "userId>=",
        "content",
        "content!",
        "content$",
        "content~",
        "date<",
        "id%",
        "content[>",
    ])
}

fn keyword() -> impl Strategy<Value = Option<(&'static str, &'static str)>> {
    prop::option::of(prop::sample::select(vec![
        ("@column", "id,content"),
        ("@order", "id-"),
        ("@cast", "date:DATE"),
        ("@combine", "content | userId"),
        ("@string", "userId"),
        ("@trim", "content"),
        ("@role", "OWNER"),
    ]))
}

fn body() -> impl Strategy<Value = Json> {
    (prop::collection::vec((key(), value()), 1..4), keyword()).prop_map(|(conditions, keyword)| {
        let mut object = Map::new();
        for (k, v) in conditions {
            object.insert(k.to_string(), v);
        }
        if let Some((k, v)) = keyword {
            object.insert(k.to_string(), json!(v));
        }
        json!({ "Moment": object })
    })
}

fn dialects() -> [&'static dyn Dialect; 4] {
    [
        &Sqlite,
        &Postgres,
        &MySql { mariadb: true },
        &MySql { mariadb: false },
    ]
}

/// Bodies whose parts decide what a read depends on: range expressions given as values, a
/// volatile select list or order, a subquery of another table.
fn dependent_body() -> impl Strategy<Value = Json> {
    let expression = prop::sample::select(vec![
        json!("now()>date"),
        json!("length(content)>1"),
        json!("unix_timestamp()>id"),
        json!(">1,<9"),
        json!([1, 2]),
    ]);
    let part = prop::sample::select(vec![
        ("@column", json!("id;now():t")),
        ("@column", json!("id;length(content):n")),
        ("@order", json!("rand()")),
        ("@order", json!("id-")),
        (
            "userId{}@",
            json!({"from": "User", "User": {"@column": "id", "name$": "a%"}}),
        ),
    ]);
    (body(), expression, prop::option::of(part)).prop_map(|(mut body, range, part)| {
        let object = body["Moment"].as_object_mut().expect("object");
        object.insert("id{}".into(), range);
        if let Some((k, v)) = part {
            object.insert(k.into(), v);
        }
        body
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, failure_persistence: None, ..ProptestConfig::default() })]

    /// What a plan says its read depends on, written once per shape, covers what every
    /// statement it binds for a request of the shape reads: each table, and the clock or
    /// chance for the request's own values.
    #[test]
    fn a_plan_depends_on_what_each_of_its_bound_statements_reads(body in dependent_body()) {
        let schema = schema();
        let options = PlanOptions::default();
        let inputs = Context { rules: rules(), trusted: false, schema: &schema, options: &options, method: Method::Get, visitor: None };
        let (req, values) = request(&body);
        let Ok(plan) = ReadPlan::build(&req, &inputs) else { return Ok(()) };
        let [MemberPlan::Object { plan: Ok(object), .. }] = plan.root.members.as_slice() else {
            return Ok(());
        };
        let Ok(Some(select)) = object.table.select(&values, &mut |_| None) else { return Ok(()) };
        let mut read = Dependencies::default();
        read.add(&select);
        let deps = plan.dependencies();
        prop_assert!(read.tables.is_subset(&deps.tables) || deps.opaque, "{} {:?} {:?}", body, read, deps);
        prop_assert!(!read.volatile || deps.volatile_with(&values), "{} {:?} {:?}", body, read, deps);
        prop_assert!(!read.opaque || deps.opaque, "{}", body);
    }

    #[test]
    fn a_template_writes_what_planning_the_request_writes(body in body()) {
        let schema = schema();
        let options = PlanOptions::default();
        let visitor = Visitor { id: 82001, contacts: vec![82002], foreign_schema: None };
        for visitor in [None, Some(&visitor)] {
            let inputs = Context { rules: rules(), trusted: false, schema: &schema, options: &options, method: Method::Get, visitor };
            let (req, values) = request(&body);
            let Ok(plan) = ReadPlan::build(&req, &inputs) else { continue };
            let [MemberPlan::Object { plan: Ok(object), .. }] = plan.root.members.as_slice() else {
                continue;
            };
            let planned = object.table.select(&values, &mut |_| None);
            let Some(template) = object.table.template() else { continue };
            if !template.accepts(&values) {
                continue;
            }
            let planned = planned.expect("a request a template takes plans");
            let planned = planned.expect("a request a template takes can match");
            for d in dialects() {
                let text = render_template(d, &template.select);
                let fresh = render(d, &planned);
                prop_assert_eq!(&text.sql, &fresh.sql, "{}", body);
                prop_assert_eq!(Template::binds(&text, &values), fresh.binds, "{}", body);
            }
        }
    }

    #[test]
    fn requests_of_one_shape_share_one_plan(body in body(), other in value()) {
        let schema = schema();
        let options = PlanOptions::default();
        let inputs = Context { rules: rules(), trusted: false, schema: &schema, options: &options, method: Method::Get, visitor: None };
        let cache = PlanCache::default();
        let (req, _) = request(&body);
        let Ok(first) = cache.plan(&req, &inputs) else { return Ok(()) };
        // The same keys with other values: the same shape, the same plan.
        let mut changed = body.clone();
        for (k, v) in changed["Moment"].as_object_mut().expect("object").iter_mut() {
            if !k.starts_with('@') {
                *v = other.clone();
            }
        }
        let (again, _) = request(&changed);
        if ShapeKey::of(&again, Method::Get, false) == ShapeKey::of(&req, Method::Get, false) {
            let second = cache.plan(&again, &inputs).expect("the shape planned before");
            prop_assert!(first.has_errors || Arc::ptr_eq(&first, &second));
        }
        // Another method is another shape.
        prop_assert_ne!(ShapeKey::of(&req, Method::Get, false), ShapeKey::of(&req, Method::Gets, false));
        prop_assert_ne!(ShapeKey::of(&req, Method::Get, false), ShapeKey::of(&req, Method::Get, true));
    }
}

#[test]
fn values_that_decide_the_statement_are_decided_per_request() {
    let schema = schema();
    let options = PlanOptions::default();
    let inputs = Context {
        rules: rules(),
        trusted: false,
        schema: &schema,
        options: &options,
        method: Method::Get,
        visitor: None,
    };
    let cache = PlanCache::default();
    let (none, none_values) = request(&json!({"Moment": {"id": 0}}));
    let (some, some_values) = request(&json!({"Moment": {"id": 5}}));
    let (list, list_values) = request(&json!({"Moment": {"id": [1, 2, 3]}}));
    let first = cache.plan(&none, &inputs).expect("plan");
    let second = cache.plan(&some, &inputs).expect("plan");
    let third = cache.plan(&list, &inputs).expect("plan");
    assert!(Arc::ptr_eq(&first, &second) && Arc::ptr_eq(&first, &third));
    let (_, object) = first.point().expect("a point lookup");
    let select = |values: &[Json]| object.table.select(values, &mut |_| None);
    assert!(
        select(&none_values).expect("plans").is_none(),
        "id 0 matches nothing"
    );
    assert!(select(&some_values).expect("plans").is_some());
    assert!(select(&list_values).is_err(), "a list is no id");
    let template = object.table.template().expect("a template");
    assert!(!template.accepts(&none_values) && template.accepts(&some_values));
    assert!(!template.accepts(&list_values));
}

#[test]
fn plans_with_the_visitors_own_values_are_not_kept() {
    let schema = schema();
    let options = PlanOptions::default();
    let visitor = Visitor {
        id: 82001,
        contacts: vec![],
        foreign_schema: None,
    };
    let inputs = Context {
        rules: rules(),
        trusted: false,
        schema: &schema,
        options: &options,
        method: Method::Get,
        visitor: Some(&visitor),
    };
    let cache = PlanCache::default();
    let (owner, _) = request(&json!({"Moment": {"@role": "OWNER", "id": 1}}));
    let first = cache.plan(&owner, &inputs).expect("plan");
    let second = cache.plan(&owner, &inputs).expect("plan");
    assert!(first.visitor_bound && !Arc::ptr_eq(&first, &second));
    assert!(cache.is_empty());
    let (login, _) = request(&json!({"Moment": {"id": 1}}));
    let first = cache.plan(&login, &inputs).expect("plan");
    let second = cache.plan(&login, &inputs).expect("plan");
    assert!(Arc::ptr_eq(&first, &second) && cache.len() == 1);
}

#[test]
fn a_read_for_the_server_is_planned_whole_and_kept_apart_from_the_clients() {
    let schema = schema();
    let options = PlanOptions::default();
    let inputs = Context {
        rules: rules(),
        trusted: false,
        schema: &schema,
        options: &options,
        method: Method::Get,
        visitor: None,
    };
    let cache = PlanCache::default();
    for (body, answer_mode) in [
        (json!({"Moment": {"id": 5}}), Mode::Point),
        (
            json!({"Moment[]": {"count": 3, "Moment": {"userId": 5}}}),
            Mode::List,
        ),
    ] {
        let (req, _) = request(&body);
        let answer = cache.plan(&req, &inputs).expect("plan");
        let whole = cache.plan_for(&req, &inputs, Purpose::Whole).expect("plan");
        assert_eq!(
            (answer.mode, whole.mode),
            (answer_mode, Mode::General),
            "{body}"
        );
        assert_ne!(answer.shape(), whole.shape(), "{body}");
        let again = cache.plan_for(&req, &inputs, Purpose::Whole).expect("plan");
        assert!(
            Arc::ptr_eq(&whole, &again),
            "{body}: the whole plan is kept too"
        );
    }
    assert_eq!(cache.len(), 4);
}

#[test]
fn a_plan_names_the_tables_it_reads_and_its_shape() {
    let schema = schema();
    let options = PlanOptions::default();
    let inputs = Context {
        rules: rules(),
        trusted: false,
        schema: &schema,
        options: &options,
        method: Method::Get,
        visitor: None,
    };
    let (req, _) = request(&json!({
        "Moment": {"userId{}@": {"from": "User", "User": {"@column": "id", "name$": "a%"}}},
        "[]": {"count": 2, "Moment": {"id>": 1}}
    }));
    let plan = ReadPlan::build(&req, &inputs).expect("plan");
    let deps = plan.dependencies();
    // SQL names, as writes and triggers name the tables they change.
    assert_eq!(
        deps.tables.iter().collect::<Vec<_>>(),
        ["Moment", "apijson_user"]
    );
    assert!(!deps.opaque && !deps.volatile_with(&[]));
    assert_eq!(plan.shape(), &ShapeKey::of(&req, Method::Get, false));
}

/// What decides whether a read's answer changes without a write: a volatile function in its
/// select list or ordering, or in the request's value of a range expression (which the shared
/// plan leaves to the value).
#[test]
fn a_plan_knows_what_changes_its_answer_without_a_write() {
    let schema = schema();
    let options = PlanOptions::default();
    let inputs = Context {
        rules: rules(),
        trusted: false,
        schema: &schema,
        options: &options,
        method: Method::Get,
        visitor: None,
    };
    let deps = |body: Json| {
        let (req, values) = request(&body);
        let plan = ReadPlan::build(&req, &inputs).expect("plan");
        (plan.dependencies().clone(), values)
    };
    let (d, v) = deps(json!({"Moment": {"@column": "id;now():t"}}));
    assert!(d.volatile_with(&v));
    let (d, v) = deps(json!({"Moment": {"@order": "rand()"}}));
    assert!(d.volatile_with(&v));
    let (d, v) = deps(json!({"Moment": {"@column": "id;length(content):n"}}));
    assert!(!d.volatile_with(&v));
    let (d, v) = deps(json!({"Moment": {"id{}": "now()>date"}}));
    assert!(d.volatile_with(&v), "{d:?} {v:?}");
    let (d2, v2) = deps(json!({"Moment": {"id{}": "length(content)>2"}}));
    assert_eq!(d, d2, "one shape, one plan");
    assert!(!d2.volatile_with(&v2));
}

/// The plan cache holds client text, so it is bounded in bytes: values a request only echoes
/// (a custom root or table `@` key, a plain value) are the request's data and never kept, a
/// shape past `plan_cache_key_bytes` is planned for its request alone, and past
/// `plan_cache_bytes` the least recently used shapes make room.
#[test]
fn echoes_and_long_shapes_are_not_kept_and_the_kept_plans_stay_within_their_bytes() {
    let schema = schema();
    let options = PlanOptions {
        plan_cache: CacheBudget {
            bytes: 10 * entry_bytes(40),
            key_bytes: 200,
        },
        ..PlanOptions::default()
    };
    let inputs = Context {
        rules: rules(),
        trusted: false,
        schema: &schema,
        options: &options,
        method: Method::Get,
        visitor: None,
    };
    let cache = PlanCache::default();
    let big = "x".repeat(880);
    for echoing in [
        json!({"@x": big, "Moment": {"id": 1}}),
        json!({"Moment": {"id": 1, "@position": big}}),
        json!({"Moment": {"id": 1}, "note": big}),
    ] {
        let (req, _) = request(&echoing);
        let plan = cache.plan(&req, &inputs).expect("planned");
        assert!(!plan.has_errors, "{echoing}");
        assert!(
            cache.is_empty(),
            "an echoing request is not kept: {echoing}"
        );
    }
    // A long shape (a long @column, no echo) is planned, not kept.
    let columns = vec!["id"; 60].join(",");
    let (req, _) = request(&json!({"Moment": {"id": 1, "@column": columns}}));
    cache.plan(&req, &inputs).expect("planned");
    assert!(
        cache.is_empty(),
        "a shape past plan_cache_key_bytes is not kept"
    );
    // Many short shapes: the budget holds, and the shape used last is still there.
    let hot = json!({"Moment": {"id": 1}});
    let (hot_req, _) = request(&hot);
    let first = cache.plan(&hot_req, &inputs).expect("plan");
    for n in 0..200 {
        let (req, _) = request(&json!({"Moment": {"id": 1, "@column": format!("id:a{n}")}}));
        cache.plan(&req, &inputs).expect("plan");
        assert!(
            cache.bytes() <= options.plan_cache.bytes,
            "{}",
            cache.bytes()
        );
        // Used again between the others: the least recently used go first.
        let again = cache.plan(&hot_req, &inputs).expect("plan");
        assert!(
            Arc::ptr_eq(&first, &again),
            "the hot shape was evicted at {n}"
        );
    }
    assert!(cache.len() > 1, "the cache still keeps shapes");
}
