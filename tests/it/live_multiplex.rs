//! Subscriptions of one shape that differ in the value of one slot are refetched as one read
//! (the plan of the shape over the list of their values), and each still gets exactly what
//! its GET answers: its rows reach it by the key of its value, never by a column of the answer.
//! After a refetch of every shape nothing is sent that did not change, and what changed
//! equals the GET. A result keeps its latest answer only until its streams took it.

use crate::support::events::Events;
use crate::support::{ada, code, demo_databases, post, put_moment_content, Server};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

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

/// Waits until `name` reaches `at_least`, or `WAIT` passed.
fn wait_for_metric(s: &Server, name: &str, at_least: f64) -> f64 {
    let deadline = Instant::now() + WAIT;
    loop {
        let v = metric(s, name);
        if v >= at_least || Instant::now() > deadline {
            return v;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A user's latest comments: a list filtered by `userId`.
fn comments_of(user: &Value) -> Value {
    json!({"Comment[]": {"count": 3, "Comment": {"userId": user, "@order": "id-", "@column": "id,userId,content"}}})
}

/// A comment by id whose `id` answers its moment's id (`@column` renames): the split by the
/// answer's `id` sent one subscriber another's comment.
fn renamed(comment: i64) -> Value {
    json!({"Comment": {"id": comment, "@column": "momentId:id,content"}})
}

/// Every subscriber here is one anonymous address: its refetches count as its reads under way
/// (never refused), so under load a new subscription's first read found the default 4 taken
/// and was refused 429.
fn config() -> String {
    format!(
        "live_interval_ms = 300\nadmins = [82001]\nmetrics_token = \"{METRICS}\"\n\
         anonymous_reads_per_address = 64\n"
    )
}

/// Takes what each subscription was sent since its last answer and checks that it now equals
/// its GET; how many answers were sent.
fn catch_up(s: &Server, subs: &mut [(Value, Events, Value)]) -> usize {
    let mut changed = 0;
    for (form, events, last) in subs {
        let now = s.post("/get", &form.to_string());
        let mut seen = last.clone();
        while let Some(e) = events.next(Duration::from_millis(1)) {
            seen = e.json();
            changed += 1;
        }
        if content(now.clone()) != content(seen.clone()) {
            if let Some(e) = events.next(WAIT) {
                seen = e.json();
                changed += 1;
            }
        }
        assert_eq!(content(seen), content(now), "{form}");
    }
    changed
}

/// Subscribes to `body` and checks that its first answer is its GET's.
fn subscribe(s: &Server, body: &Value) -> (Value, Events, Value) {
    let text = body.to_string();
    let mut events = Events::start(&s.client(), "/subscribe", Some(&text));
    let first = events.next(WAIT).expect("a first answer").json();
    assert_eq!(
        content(first.clone()),
        content(s.post("/get", &text)),
        "{text}"
    );
    (body.clone(), events, first)
}

#[test]
fn any_shape_multiplexes_across_values_and_each_subscriber_gets_exactly_its_own_answer() {
    for (engine, url) in demo_databases("live_multiplex") {
        eprintln!("live_multiplex on {engine}");
        let s = Server::start(&url, &config());
        multiplexed_as_their_gets(&s);
    }
}

fn multiplexed_as_their_gets(s: &Server) {
    let listed = s.post(
        "/get",
        r#"{"Comment[]":{"count":40,"Comment":{"@column":"id,userId,momentId","@order":"id+"}}}"#,
    );
    let rows = listed["Comment[]"].as_array().expect("comments").clone();
    let mut users: Vec<i64> = rows
        .iter()
        .map(|c| c["userId"].as_i64().expect("userId"))
        .collect();
    users.push(82001);
    users.sort_unstable();
    users.dedup();
    assert!(users.len() >= 3, "{users:?}");
    let comments: Vec<i64> = rows
        .iter()
        .take(8)
        .map(|c| c["id"].as_i64().expect("id"))
        .collect();
    // Users with comments, Ada's and another user's id as text too (a list of its own kind),
    // and a user with none.
    let mut values: Vec<Value> = users.iter().map(|u| json!(u)).collect();
    let other = users.iter().find(|u| **u != 82001).expect("another user");
    values.push(json!("82001"));
    values.push(json!(other.to_string()));
    values.push(json!(987_654_321));
    let mut subs = Vec::new();
    for v in &values {
        subs.push(subscribe(s, &comments_of(v)));
    }
    for c in &comments {
        subs.push(subscribe(s, &renamed(*c)));
    }
    // What each renamed subscriber sees is its own comment's content, not one whose moment
    // has its comment's id.
    for (form, _, first) in &subs {
        if let Some(id) = form["Comment"]["id"].as_i64() {
            let own = rows
                .iter()
                .find(|r| r["id"] == id)
                .expect("a listed comment");
            assert_eq!(first["Comment"]["id"], own["momentId"], "{form}: {first}");
        }
    }
    let n = subs.len() as f64;
    assert_eq!(wait_for_metric(s, "apijet_live_subscriptions", n), n);
    assert_eq!(metric(s, "apijet_live_shapes"), 2.0, "one shape per form");

    // Every shape is read again (a reload marks every table): nothing changed, so nothing is
    // sent; a multiplexed answer that differed from the GET's would be.
    let (rounds_before, reads_before) = (
        metric(s, "apijet_live_refetches_total"),
        metric(s, "apijet_live_reads_total"),
    );
    let mut admin = ada(s);
    assert_eq!(code(&post(&mut admin, "/reload", &json!({}))), 200);
    wait_for_metric(s, "apijet_live_refetches_total", rounds_before + 2.0);
    let reads = metric(s, "apijet_live_reads_total") - reads_before;
    // One read per list of one kind: the numbers and the texts of the userId shape, the
    // comments' ids.
    assert_eq!(
        reads, 3.0,
        "{reads} reads refetched {n} subscriptions of 2 shapes"
    );
    std::thread::sleep(Duration::from_millis(1000));
    for (form, events, _) in &mut subs {
        assert!(
            events.next(Duration::from_millis(1)).is_none(),
            "an unchanged answer was sent again: {form}"
        );
    }

    // Ada comments and edits a comment of hers: exactly the subscriptions whose GET now
    // answers differently get that answer.
    let moment = rows[0]["momentId"].as_i64().expect("a moment");
    let r = post(
        &mut admin,
        "/post",
        &json!({"Comment": {"momentId": moment, "content": "multiplexed"}, "tag": "Comment"}),
    );
    assert_eq!(code(&r), 200, "{r}");
    std::thread::sleep(Duration::from_millis(1500));
    let changed = catch_up(s, &mut subs);
    // Ada's list, as a number and as text.
    assert_eq!(changed, 2, "only Ada's lists changed");
}

/// A page of a user's moments, each with its author and its first comments: a nested list
/// whose items are read from its main rows (members batched by their parents).
fn page_of(user: &Value) -> Value {
    json!({"[]": {"count": 5, "Moment": {"userId": user, "@order": "id-"},
        "User": {"id@": "/Moment/userId", "@column": "id,name"},
        "Comment[]": {"count": 3, "Comment": {"momentId@": "[]/Moment/id"}}}})
}

/// A moment with its author and its first comments: a record view (a general read whose
/// later members refer to its first object).
fn record_of(moment: i64) -> Value {
    json!({"Moment": {"id": moment}, "User": {"id@": "Moment/userId"},
        "Comment[]": {"count": 3, "Comment": {"momentId@": "Moment/id"}}})
}

/// The record view `apijet bench --scenarios live` subscribes to: named columns, the author
/// referred to from its container (the root), a custom root key after the members.
fn named_record_of(moment: i64) -> Value {
    json!({"Moment": {"id": moment, "@column": "id,userId,content"},
        "User": {"id@": "/Moment/userId", "@column": "id,name"},
        "Comment[]": {"count": 5, "Comment": {"momentId@": "Moment/id", "@column": "id,userId,content"}},
        "@view": "record"})
}

#[test]
fn nested_shapes_and_record_views_multiplex_by_their_first_statement_and_each_subscriber_gets_exactly_its_own_answer(
) {
    for (engine, url) in demo_databases("live_multiplex_nested") {
        eprintln!("live_multiplex nested on {engine}");
        let s = Server::start(&url, &config());
        nested_as_their_gets(&s);
    }
}

fn nested_as_their_gets(s: &Server) {
    let listed = s.post(
        "/get",
        r#"{"Moment[]":{"count":30,"Moment":{"@column":"id,userId","@order":"id+"}}}"#,
    );
    let rows = listed["Moment[]"].as_array().expect("moments").clone();
    let mut users: Vec<i64> = rows
        .iter()
        .map(|m| m["userId"].as_i64().expect("userId"))
        .collect();
    users.push(82001);
    users.sort_unstable();
    users.dedup();
    assert!(users.len() >= 3, "{users:?}");
    let moments: Vec<i64> = (rows.iter().take(3))
        .map(|m| m["id"].as_i64().expect("id"))
        .collect();
    // Users with moments, one twice (two subscribers of one value), and one with none.
    let mut values: Vec<Value> = users.iter().map(|u| json!(u)).collect();
    values.push(json!(82001));
    values.push(json!(987_654_321));
    let mut subs = Vec::new();
    for v in &values {
        subs.push(subscribe(s, &page_of(v)));
    }
    // Records of moments, one twice, and one of a moment that does not exist (its first
    // object has no row: the whole answer is empty).
    let mut records: Vec<i64> = moments.clone();
    records.push(moments[0]);
    records.push(987_654_321);
    for m in &records {
        subs.push(subscribe(s, &record_of(*m)));
    }
    for m in &records {
        subs.push(subscribe(s, &named_record_of(*m)));
    }
    let n = subs.len() as f64;
    assert_eq!(wait_for_metric(s, "apijet_live_subscriptions", n), n);
    assert_eq!(metric(s, "apijet_live_shapes"), 3.0, "one shape per form");

    // Every shape read again, each by one read for all its subscribers: the pages by their
    // main statement and one per nesting level, the records by their first objects'
    // statement and one per later member.
    let (rounds_before, reads_before) = (
        metric(s, "apijet_live_refetches_total"),
        metric(s, "apijet_live_reads_total"),
    );
    let mut admin = ada(s);
    assert_eq!(code(&post(&mut admin, "/reload", &json!({}))), 200);
    wait_for_metric(s, "apijet_live_refetches_total", rounds_before + 3.0);
    let reads = metric(s, "apijet_live_reads_total") - reads_before;
    assert_eq!(reads, 3.0, "{reads} reads refetched {n} subscriptions");
    std::thread::sleep(Duration::from_millis(1000));
    for (form, events, _) in &mut subs {
        assert!(
            events.next(Duration::from_millis(1)).is_none(),
            "an unchanged answer was sent again: {form}"
        );
    }

    // A moment of Ada's changes: every subscription's answer is its GET's again.
    let mine = s.post("/get", &page_of(&json!(82001)).to_string());
    let moment = mine["[]"][0]["Moment"]["id"]
        .as_i64()
        .expect("a moment of Ada's");
    put_moment_content(&mut admin, moment, "multiplexed nested");
    std::thread::sleep(Duration::from_millis(1500));
    let changed = catch_up(s, &mut subs);
    // Ada's page, by both of its subscribers.
    assert!(changed >= 2, "{changed} answers changed");
}

#[test]
fn an_idle_subscription_is_read_again_only_when_a_table_it_reads_changes() {
    // The default settings: no poll.
    let s = Server::fresh_sqlite(&format!(
        "live_interval_ms = 200\nmetrics_token = \"{METRICS}\"\n"
    ));
    let (_, mut events, _) = subscribe(&s, &comments_of(&json!(82001)));
    wait_for_metric(&s, "apijet_live_subscriptions", 1.0);
    let reads = metric(&s, "apijet_live_reads_total");
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(
        metric(&s, "apijet_live_reads_total"),
        reads,
        "idle: no reads"
    );
    // A write to a table it does not read costs it nothing either.
    let mut c = ada(&s);
    let moment = c
        .post(
            "/get",
            r#"{"Moment":{"userId":82001,"@column":"id,content"}}"#,
        )
        .expect("answer")
        .json()
        .expect("json");
    let id = moment["Moment"]["id"].as_i64().expect("a moment of Ada's");
    put_moment_content(&mut c, id, "not a comment");
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(
        metric(&s, "apijet_live_reads_total"),
        reads,
        "Moment is not read"
    );
    let r = post(
        &mut c,
        "/post",
        &json!({"Comment": {"momentId": id, "content": "read again"}, "tag": "Comment"}),
    );
    assert_eq!(code(&r), 200, "{r}");
    let e = events.next(WAIT).expect("the new answer").json();
    assert_eq!(e["Comment[]"][0]["content"], "read again", "{e}");
    assert!(wait_for_metric(&s, "apijet_live_reads_total", reads + 1.0) > reads);
}

#[test]
fn a_subscription_keeps_the_hash_of_its_answer_and_a_patch_base_only_within_its_budget() {
    let s = Server::fresh_sqlite(&format!(
        "live_interval_ms = 200\nlive_patch_bytes = 256\nmetrics_token = \"{METRICS}\"\n"
    ));
    let mut c = ada(&s);
    let mine = c
        .post(
            "/get",
            r#"{"[]":{"count":4,"Moment":{"userId":82001,"@column":"id"}}}"#,
        )
        .expect("answer")
        .json()
        .expect("json");
    let ids: Vec<i64> = mine["[]"]
        .as_array()
        .expect("Ada's moments")
        .iter()
        .map(|i| i["Moment"]["id"].as_i64().expect("id"))
        .collect();
    assert!(ids.len() >= 2, "{mine}");
    // Without patches: once each stream sent its answer, nothing of it is held.
    let long = "x".repeat(4000);
    let mut plain: Vec<(i64, Events)> = Vec::new();
    for id in &ids {
        let body = json!({"Moment": {"id": id, "@column": "id,content"}}).to_string();
        plain.push((*id, Events::start(&s.client(), "/subscribe", Some(&body))));
    }
    for (_, events) in &mut plain {
        events.next(WAIT).expect("a first answer");
    }
    for (id, events) in &mut plain {
        put_moment_content(&mut c, *id, &format!("{long}{id}"));
        let e = events.next(WAIT).expect("the new answer").json();
        assert!(e["Moment"]["content"]
            .as_str()
            .is_some_and(|t| t.len() > 4000));
    }
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(
        metric(&s, "apijet_live_held_bytes"),
        0.0,
        "answers of {} bytes each are not kept once sent",
        long.len()
    );
    drop(plain);
    let deadline = Instant::now() + WAIT;
    while metric(&s, "apijet_live_subscriptions") > 0.0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }

    // With patches: the base of the next patch is kept while within live_patch_bytes.
    let id = ids[0];
    put_moment_content(&mut c, id, "short");
    let body = json!({"Moment": {"id": id, "@column": "id,content"}}).to_string();
    let mut events = Events::start(&s.client(), "/subscribe?patch=1", Some(&body));
    events.next(WAIT).expect("a first answer");
    put_moment_content(&mut c, id, &long);
    let e = events.next(WAIT).expect("a patch");
    assert_eq!(e.kind, "patch", "the short answer was the base: {e:?}");
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(
        metric(&s, "apijet_live_held_bytes"),
        0.0,
        "an answer past live_patch_bytes is no base"
    );
    put_moment_content(&mut c, id, "short again");
    let e = events.next(WAIT).expect("an answer");
    assert_eq!(
        e.kind, "message",
        "no base was kept, so a whole answer: {e:?}"
    );
    assert_eq!(e.json()["Moment"]["content"], "short again");
    std::thread::sleep(Duration::from_millis(1500));
    let held = metric(&s, "apijet_live_held_bytes");
    assert!(
        held > 0.0 && held <= 256.0,
        "the short base is kept: {held}"
    );
}
