//! Printed plans pin the planner: each file of `tests/printed/` holds, per topic, requests and
//! the plans they print (`ReadPlan` and `WritePlan` display a compact, stable text), so a
//! change to what a request plans to shows as a change to a line of these files.
//!
//! A case is
//!
//! ```text
//! == what it shows
//! GET {"User":{"id":82001}}
//! --
//! <the printed plan>
//! ```
//!
//! with `login=ID` after the method for a logged-in visitor (contacts 82002 and 82003), and
//! `multiplex=SLOT` after it for the plan of the shape over a list of that slot's values. The
//! request's condition values are taken into slots first, as every request's are, so the plan
//! is the one its shape shares. `APIJET_BLESS=1 cargo test -p apijet-plan --test printed_plans`
//! writes the plans printed now into the files; review the diff before committing it.

use apijet_core::{Method, Role, Visitor};
use apijet_plan::read::{MultiplexPlan, ReadPlan};
use apijet_plan::schema::{ColumnKind, SchemaCache, Table};
use apijet_plan::shape::take_values;
use apijet_plan::verify::RequestRules;
use apijet_plan::write::WritePlan;
use apijet_plan::{Context, PlanOptions};
use apijet_request::Request;
use std::path::Path;

fn schema() -> SchemaCache {
    use ColumnKind::*;
    let roles = [
        Role::Unknown,
        Role::Login,
        Role::Contact,
        Role::Circle,
        Role::Owner,
    ];
    let mut s = SchemaCache::new();
    for (api, sql, columns) in [
        (
            "User",
            "apijson_user",
            &[
                ("id", Int),
                ("sex", Int),
                ("name", Text),
                ("tag", Text),
                ("contactIdList", Json),
                ("date", Timestamp),
            ][..],
        ),
        (
            "Privacy",
            "apijson_privacy",
            &[
                ("id", Int),
                ("phone", Text),
                ("balance", Decimal),
                ("_password", Text),
            ][..],
        ),
        (
            "Moment",
            "Moment",
            &[
                ("id", Int),
                ("userId", Int),
                ("date", Timestamp),
                ("content", Text),
                ("praiseUserIdList", Json),
            ][..],
        ),
        (
            "Comment",
            "Comment",
            &[
                ("id", Int),
                ("toId", Int),
                ("userId", Int),
                ("momentId", Int),
                ("date", Timestamp),
                ("content", Text),
            ][..],
        ),
    ] {
        s.insert(Table::granted(api, sql, columns, &roles));
    }
    s
}

fn options() -> PlanOptions {
    PlanOptions {
        debug: true,
        procedures: std::sync::Arc::new(vec!["moments_of".into()]),
        ..PlanOptions::default()
    }
}

/// The printed plan of one request line: `METHOD [login=ID] [multiplex=SLOT] BODY`.
fn printed(request: &str) -> String {
    let (method, rest) = request.split_once(' ').expect("METHOD BODY");
    let (multiplex, rest) = match rest.strip_prefix("multiplex=") {
        Some(rest) => {
            let (slot, body) = rest.split_once(' ').expect("multiplex=SLOT BODY");
            (Some(slot.parse::<usize>().expect("a slot")), body)
        }
        None => (None, rest),
    };
    let method = Method::from_url(&method.to_ascii_lowercase()).expect("a method");
    let (visitor, body) = match rest.strip_prefix("login=") {
        Some(rest) => {
            let (id, body) = rest.split_once(' ').expect("login=ID BODY");
            let visitor = Visitor {
                id: id.parse().expect("an id"),
                contacts: vec![82002, 82003],
                foreign_schema: None,
            };
            (Some(visitor), body)
        }
        None => (None, rest),
    };
    let map = apijet_request::parse_body(body.as_bytes()).expect("a JSON object");
    let mut req = match Request::from_map(map) {
        Ok(r) => r,
        Err(e) => return format!("request error: {e}\n"),
    };
    let schema = schema();
    let options = options();
    let rules = RequestRules::default();
    let context = Context {
        schema: &schema,
        rules: &rules,
        options: &options,
        method,
        visitor: visitor.as_ref(),
        trusted: false,
    };
    if method.is_query() {
        if let Err(e) = take_values(&mut req, &options.expr) {
            return format!("shape error: {e}\n");
        }
        match (ReadPlan::build(&req, &context), multiplex) {
            (Ok(plan), Some(slot)) => match MultiplexPlan::of(&plan, slot) {
                Ok(multiplexed) => multiplexed.to_string(),
                Err(e) => format!("read one by one: {e}\n"),
            },
            (Ok(plan), None) => plan.to_string(),
            (Err(e), _) => format!("error: {e}\n"),
        }
    } else {
        match WritePlan::build(&req, &[], &context) {
            Ok(plan) => plan.to_string(),
            Err(e) => format!("error: {e}\n"),
        }
    }
}

struct Case {
    title: String,
    request: String,
    expected: String,
}

fn parse(text: &str) -> (String, Vec<Case>) {
    let mut preamble = String::new();
    let mut cases: Vec<Case> = Vec::new();
    let mut in_expected = false;
    for line in text.lines() {
        if let Some(title) = line.strip_prefix("== ") {
            cases.push(Case {
                title: title.to_string(),
                request: String::new(),
                expected: String::new(),
            });
            in_expected = false;
            continue;
        }
        let Some(case) = cases.last_mut() else {
            preamble.push_str(line);
            preamble.push('\n');
            continue;
        };
        if in_expected {
            case.expected.push_str(line);
            case.expected.push('\n');
        } else if line == "--" {
            in_expected = true;
        } else if !line.trim().is_empty() {
            case.request.push_str(line.trim());
        }
    }
    (preamble, cases)
}

/// Checks (or, with `APIJET_BLESS=1`, writes) every case of `tests/printed/{topic}.txt`.
fn check(topic: &str) {
    let file = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/printed")
        .join(format!("{topic}.txt"));
    let bless = std::env::var("APIJET_BLESS").is_ok_and(|v| v == "1");
    let text = std::fs::read_to_string(&file).expect("a topic file");
    let (mut written, cases) = parse(&text);
    assert!(!cases.is_empty(), "no cases in {}", file.display());
    let mut failures = Vec::new();
    for case in &cases {
        let got = printed(&case.request);
        if got.trim_end() != case.expected.trim_end() {
            failures.push(format!(
                "{}\n{}\n--- expected\n{}--- printed\n{}",
                case.title, case.request, case.expected, got
            ));
        }
        written.push_str(&format!(
            "== {}\n{}\n--\n{}\n\n",
            case.title,
            case.request,
            got.trim_end()
        ));
    }
    if bless {
        std::fs::write(&file, written).expect("writing the topic file");
        return;
    }
    assert!(
        failures.is_empty(),
        "{} of {} printed plans of {topic} differ (APIJET_BLESS=1 writes the new ones):\n\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

#[test]
fn point_lookups() {
    check("point");
}

#[test]
fn lists() {
    check("list");
}

#[test]
fn nested_lists() {
    check("nested");
}

#[test]
fn joins() {
    check("joins");
}

#[test]
fn subqueries() {
    check("subqueries");
}

#[test]
fn functions() {
    check("functions");
}

#[test]
fn references() {
    check("references");
}

#[test]
fn multiplexed_reads() {
    check("multiplex");
}

#[test]
fn writes() {
    check("writes");
}

#[test]
fn role_filters() {
    check("roles");
}
