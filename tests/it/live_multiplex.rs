//! Subscriptions of one shape (the same request but for the first object's `id`) are refetched
//! as one read, and each still gets exactly what its GET answers: after a refetch of every
//! shape nothing is sent that did not change, and what changed equals the GET.

use crate::support::events::Events;
use crate::support::{ada, code, demo_databases, post, put_moment_content, Server};
use serde_json::{json, Value};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(20);
const METRICS: &str = "multiplex-metrics";

fn content(mut v: Value) -> Value {
    if let Some(m) = v.as_object_mut() {
        m.remove("time");
    }
    v
}

fn metric(s: &Server, name: &str) -> f64 {
    let text = crate::support::client_with_bearer(s, METRICS)
        .get("/metrics")
        .expect("metrics")
        .text;
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in /metrics"))
}

/// The forms of one record's live view, each a shape of its own.
fn forms(id: &Value) -> Vec<Value> {
    vec![
        json!({"Moment": {"id": id, "@column": "id,userId,content"},
               "User": {"id@": "Moment/userId", "@column": "id,name"},
               "Comment[]": {"count": 3, "Comment": {"momentId@": "Moment/id", "@order": "id-", "@column": "id,content"}}}),
        json!({"Moment": {"id": id},
               "User": {"id@": "/Moment/userId"}}),
        // The first object does not answer its id: nothing to split by, each is read alone.
        json!({"Moment": {"id": id, "@column": "content"},
               "User": {"id@": "Moment/userId", "@column": "name"}}),
        json!({"Moment": {"id": id, "@column": "id,userId"},
               "User": {"id@": "Moment/userId", "@column": "id,name"},
               "Comment[]": {"count": 2, "page": 1, "Comment": {"momentId@": "Moment/id", "@order": "id+", "@column": "id"}},
               "Moment[]": {"count": 2, "Moment": {"userId@": "User/id", "@column": "id", "@order": "id-"}}}),
    ]
}

#[test]
fn subscriptions_of_one_shape_are_read_together_and_answer_what_their_get_answers() {
    for (engine, url) in demo_databases("live_multiplex") {
        eprintln!("live_multiplex on {engine}");
        let s = Server::start(
            &url,
            &format!(
                "live_interval_ms = 300\nlive_poll_ms = 0\nadmins = [82001]\nmetrics_token = \"{METRICS}\"\n"
            ),
        );
        read_together_as_their_gets(&s);
    }
}

fn read_together_as_their_gets(s: &Server) {
    let listed = s.post(
        "/get",
        r#"{"[]":{"count":12,"Moment":{"@column":"id,userId","@order":"id+"}}}"#,
    );
    let mut moments: Vec<(i64, i64)> = listed["[]"]
        .as_array()
        .expect("moments")
        .iter()
        .map(|i| {
            (
                i["Moment"]["id"].as_i64().expect("id"),
                i["Moment"]["userId"].as_i64().expect("userId"),
            )
        })
        .collect();
    let adas = s.post("/get", r#"{"Moment":{"userId":82001,"@column":"id"}}"#);
    let adas = adas["Moment"]["id"].as_i64().expect("a moment of Ada's");
    if !moments.iter().any(|(id, _)| *id == adas) {
        moments.push((adas, 82001));
    }
    // Ids as numbers, one as text (the same row), and one with no row.
    let mut ids: Vec<Value> = moments.iter().map(|(id, _)| json!(id)).collect();
    ids.push(json!(moments[0].0.to_string()));
    ids.push(json!(987_654_321));
    let mut subs: Vec<(Value, Events, Value)> = Vec::new();
    for id in &ids {
        for form in forms(id) {
            let body = form.to_string();
            let mut events = Events::start(&s.client(), "/subscribe", Some(&body));
            let first = events.next(WAIT).expect("a first answer").json();
            let got = s.post("/get", &body);
            assert_eq!(content(first.clone()), content(got), "{body}");
            subs.push((form, events, first));
        }
    }
    let n = subs.len() as f64;
    let deadline = std::time::Instant::now() + WAIT;
    while metric(s, "apijet_live_subscriptions") < n && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(metric(s, "apijet_live_subscriptions"), n);
    assert_eq!(
        metric(s, "apijet_live_shapes"),
        forms(&json!(0)).len() as f64,
        "one shape per form, whatever the ids"
    );

    // Every shape is read again (a reload marks every table): nothing changed, so nothing is
    // sent — an answer read together that differed from the GET's would be.
    let shapes = forms(&json!(0)).len() as f64;
    let (rounds_before, reads_before) = (
        metric(s, "apijet_live_refetches_total"),
        metric(s, "apijet_live_reads_total"),
    );
    let mut admin = ada(s);
    assert_eq!(code(&post(&mut admin, "/reload", &json!({}))), 200);
    let deadline = std::time::Instant::now() + WAIT;
    while metric(s, "apijet_live_refetches_total") - rounds_before < shapes
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    let reads = metric(s, "apijet_live_reads_total") - reads_before;
    // Three shapes read together (one read each); the one without ids in its answers reads
    // each of its results alone (the id as text is a result of its own), after the read that
    // found no ids.
    let alone = ids.len() as f64;
    assert_eq!(
        reads,
        3.0 + 1.0 + alone,
        "{reads} reads refetched {n} subscriptions of {shapes} shapes"
    );
    std::thread::sleep(Duration::from_millis(1500));
    for (form, events, _) in &mut subs {
        assert!(
            events.next(Duration::from_millis(1)).is_none(),
            "an unchanged answer was sent again: {form}"
        );
    }

    // A change to one moment (Ada's) and one comment reaches exactly the subscriptions whose
    // GET now answers differently, with that answer.
    let mine = adas;
    put_moment_content(&mut admin, mine, "read together");
    let r = post(
        &mut admin,
        "/post",
        &json!({"Comment": {"momentId": moments[1].0, "content": "together too"}, "tag": "Comment"}),
    );
    assert_eq!(code(&r), 200, "{r}");
    std::thread::sleep(Duration::from_millis(2000));
    let mut changed = 0;
    for (form, events, last) in &mut subs {
        let now = s.post("/get", &form.to_string());
        let mut seen = last.clone();
        while let Some(e) = events.next(Duration::from_millis(1)) {
            seen = e.json();
            changed += 1;
        }
        if content(now.clone()) != content(seen.clone()) {
            let e = events.next(WAIT);
            if let Some(e) = e {
                seen = e.json();
                changed += 1;
            }
        }
        assert_eq!(content(seen), content(now), "{form}");
    }
    assert!(changed >= 3, "only {changed} answers changed");
}
