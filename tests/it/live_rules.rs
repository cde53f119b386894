//! A subscription sees exactly what its GET sees: the same visitor, roles, `Access` and
//! `Request` rules and column gate, on its first answer and again on every refetch.

use crate::support::events::{Events, NotStarted};
use crate::support::{ada, code, Client, Server};
use serde_json::{json, Value};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(20);

fn content(mut v: Value) -> Value {
    if let Some(m) = v.as_object_mut() {
        m.remove("time");
    }
    v
}

/// What `/subscribe/{method}` answers first: the first event, or the JSON answer of a
/// subscription that did not start.
fn first_answer(c: &Client, method: &str, body: &str) -> Value {
    match Events::open(c, &format!("/subscribe/{method}"), Some(body), &[]) {
        Ok(mut events) => events
            .next(WAIT)
            .unwrap_or_else(|| panic!("{method} {body}: no first event"))
            .json(),
        Err(NotStarted::Answer(v)) => v,
        Err(NotStarted::Failed(e)) => panic!("{method} {body}: {e}"),
    }
}

/// Every recorded read of the reference (and the refusals among them) is answered the same by
/// its GET and by its subscription, logged in or not.
#[test]
fn a_subscription_answers_what_its_get_answers_for_every_recorded_read() {
    let cases: Value = serde_json::from_str(
        &std::fs::read_to_string(crate::support::shared::dir().join("apijson/cases-public.json"))
            .expect("../shared/apijson/cases-public.json"),
    )
    .expect("json");
    let s = Server::fresh_sqlite("");
    let anonymous = s.client();
    let logged = ada(&s);
    let mut compared = 0;
    for case in cases["reference_observed"].as_array().expect("cases") {
        let path = case["method"].as_str().unwrap_or_default();
        let method = path.trim_start_matches('/');
        if !matches!(method, "get" | "head" | "gets" | "heads") {
            continue;
        }
        let c = if case["login"].is_null() {
            &anonymous
        } else {
            &logged
        };
        let body = case["request"].to_string();
        let got = c
            .clone()
            .post(path, &body)
            .expect("an answer")
            .json()
            .expect("json");
        let subscribed = first_answer(c, method, &body);
        let id = case["id"].as_str().unwrap_or("?");
        if code(&got) == 200 {
            assert_eq!(content(subscribed), content(got), "{id}: {body}");
        } else {
            assert_eq!(code(&subscribed), code(&got), "{id}: {body}: {subscribed}");
            assert_eq!(subscribed["msg"], got["msg"], "{id}: {body}");
        }
        compared += 1;
    }
    assert!(compared > 50, "only {compared} read cases found");
}

/// What the gate, `Access` and `Request` refuse to a GET, they refuse to a subscription, with
/// the same code and message.
#[test]
fn what_the_get_cannot_see_the_subscription_cannot_see() {
    let s = Server::fresh_sqlite("");
    let anonymous = s.client();
    let adas = ada(&s);
    let mut bobs = s.client();
    bobs.login("13000082002", "123456").expect("Bob logs in");
    let cases: [(&Client, &str, Value); 9] = [
        // Hidden columns, however a key names them.
        (
            &adas,
            "gets",
            json!({"tag": "Privacy", "Privacy": {"id": 82001, "@column": "id;length(_password):n"}}),
        ),
        (&anonymous, "get", json!({"Privacy": {"id": 82001}})),
        (
            &adas,
            "get",
            json!({"User": {"@from@": {"from": "Privacy", "Privacy": {"@column": "id,_password"}}}}),
        ),
        (
            &adas,
            "get",
            json!({"User": {"id{}@": {"from": "Privacy", "Privacy": {"@column": "id", "_password": "123456"}}}}),
        ),
        // Access: Verify is nobody's, Privacy needs a login and its Request structure.
        (&anonymous, "get", json!({"Verify": {}})),
        (
            &anonymous,
            "gets",
            json!({"tag": "Privacy", "Privacy": {"id": 82001}}),
        ),
        (&adas, "gets", json!({"Privacy": {"id": 82001}})),
        // OWNER: Bob is not 82001.
        (
            &bobs,
            "gets",
            json!({"tag": "Privacy", "Privacy": {"id": 82001}}),
        ),
        (
            &adas,
            "gets",
            json!({"tag": "Privacy", "Privacy": {"id": 82001, "phone": "1"}}),
        ),
    ];
    for (c, method, body) in cases {
        let got = c
            .clone()
            .post(&format!("/{method}"), &body.to_string())
            .expect("an answer")
            .json()
            .expect("json");
        assert_ne!(
            code(&got),
            200,
            "{method} {body} is refused to the GET: {got}"
        );
        let subscribed = first_answer(c, method, &body.to_string());
        assert_eq!(
            code(&subscribed),
            code(&got),
            "{method} {body}: {subscribed}"
        );
        assert_eq!(subscribed["msg"], got["msg"], "{method} {body}");
    }
    // And what the owner may read, the owner's subscription reads.
    let own = json!({"tag": "Privacy", "Privacy": {"id": 82001}});
    let first = first_answer(&adas, "gets", &own.to_string());
    assert_eq!(first["Privacy"]["id"], 82001, "{first}");
    assert!(first["Privacy"].get("_password").is_none(), "{first}");
}

/// The rules are applied again on every refetch: when a reload takes away the anonymous read
/// of a table, its subscribers' next answer is the refusal their GET now gets.
#[test]
fn rules_are_applied_again_on_every_refetch() {
    let s = Server::fresh_sqlite("admins = [82001]\nlive_interval_ms = 200\n");
    let req = r#"{"Moment":{"@column":"id,content"}}"#;
    let mut events = Events::start(&s.client(), "/subscribe", Some(req));
    let first = events.next(WAIT).expect("the first answer").json();
    assert!(first["Moment"]["id"].is_i64(), "{first}");
    let db = s.dir().join("demo.db");
    let conn = rusqlite::Connection::open(&db).expect("the server's SQLite file");
    conn.execute(
        "UPDATE Access SET \"get\" = '[\"LOGIN\",\"CONTACT\",\"CIRCLE\",\"OWNER\",\"ADMIN\"]' WHERE name = 'Moment'",
        [],
    )
    .expect("Access updated");
    let mut admin = ada(&s);
    let r = admin
        .post("/reload", "{}")
        .expect("reload")
        .json()
        .expect("json");
    assert_eq!(code(&r), 200, "{r}");
    let got = s.post("/get", req);
    assert_ne!(code(&got), 200, "anonymous reads of Moment are gone: {got}");
    let next = events.next(WAIT).expect("the refusal").json();
    assert_eq!(code(&next), code(&got), "{next}");
    assert_eq!(next["msg"], got["msg"]);
}
