//! Live answers (`/subscribe`): a subscriber sees a write within one refetch interval, on every
//! engine through the same instance and on PostgreSQL through another instance or another
//! program (triggers); the first event is what `/get` answers; unchanged answers are not sent
//! again; `Last-Event-ID`, patches, heartbeats, limits, the end of a login and shutdown.

use crate::support::events::{Events, NotStarted};
use crate::support::{
    ada, code, demo_databases, post, put_moment_content, skip, Client, Engine, Server,
};
use apijet_testkit::json_patch::apply;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// A refetch interval long enough to tell "within one interval" apart from the next one.
const INTERVAL_MS: u64 = 1500;
/// Marks only: what reaches a subscriber here came through a write mark, not a poll.
const MARKS_ONLY: &str = "live_interval_ms = 1500\nlive_poll_ms = 0\n";
/// How long past one interval a change may take to arrive on a loaded machine (the refetch
/// itself, the write's commit, the event's way out).
const SLACK: Duration = Duration::from_millis(1500);
/// Long enough for any event that will come at all.
const WAIT: Duration = Duration::from_secs(20);

/// The answer without `time`, the form answers are compared in.
fn content(mut v: Value) -> Value {
    if let Some(m) = v.as_object_mut() {
        m.remove("time");
    }
    v
}

/// A moment of Ada's (82001) and a nested request for it with its author and comments.
fn adas_moment(s: &Server) -> (i64, String) {
    let r = s.post("/get", r#"{"Moment":{"userId":82001,"@column":"id"}}"#);
    let id = r["Moment"]["id"].as_i64().unwrap_or_else(|| panic!("{r}"));
    let req = json!({
        "Moment": {"id": id, "@column": "id,userId,content"},
        "User": {"id@": "Moment/userId", "@column": "id,name"},
        "Comment[]": {"count": 3, "Comment": {"momentId@": "Moment/id", "@column": "id,content", "@order": "id-"}}
    });
    (id, req.to_string())
}

/// Waits for the next answer event and checks it came within one interval of `since`.
#[track_caller]
fn within_one_interval(events: &mut Events, since: Instant, what: &str) -> Value {
    let e = events
        .next(WAIT)
        .unwrap_or_else(|| panic!("{what}: no event within {WAIT:?}"));
    let delay = e.at.saturating_duration_since(since);
    let bound = Duration::from_millis(INTERVAL_MS) + SLACK;
    assert!(
        delay <= bound,
        "{what}: the event came {delay:?} after the write, more than one interval ({INTERVAL_MS} ms) and {SLACK:?}"
    );
    e.json()
}

#[test]
fn a_write_through_the_same_instance_reaches_the_subscriber_within_one_interval_on_every_engine() {
    for (engine, url) in demo_databases("live_same") {
        let s = Server::start(&url, MARKS_ONLY);
        let (id, req) = adas_moment(&s);
        let mut events = Events::start(&s.client(), "/subscribe", Some(&req));
        let first = events.next(WAIT).expect("the first answer");
        assert_eq!(first.kind, "message");
        assert_eq!(
            content(first.json()),
            content(s.post("/get", &req)),
            "{engine}: the first event is what /get answers"
        );
        let mut c = ada(&s);
        let text = format!("live on {engine}");
        put_moment_content(&mut c, id, &text);
        let got = within_one_interval(&mut events, Instant::now(), engine.name());
        assert_eq!(got["Moment"]["content"], text, "{engine}: {got}");
        assert_eq!(content(got), content(s.post("/get", &req)), "{engine}");
        // The comments are a nested list: a table the request reaches only through a
        // reference, and a statement of its own.
        let r = post(
            &mut c,
            "/post",
            &json!({"Comment": {"momentId": id, "content": format!("a comment on {engine}")}, "tag": "Comment"}),
        );
        assert_eq!(code(&r), 200, "{engine}: {r}");
        let got = within_one_interval(&mut events, Instant::now(), engine.name());
        assert_eq!(
            got["Comment[]"][0]["content"],
            format!("a comment on {engine}"),
            "{engine}: {got}"
        );
    }
}

#[test]
fn a_write_through_another_instance_reaches_the_subscriber_on_postgres() {
    let Some((_, url)) = demo_databases("live_other")
        .into_iter()
        .find(|(e, _)| *e == Engine::Postgres)
    else {
        skip("live_other: PostgreSQL not provided");
        return;
    };
    let config = format!("{MARKS_ONLY}token_secret = \"shared-by-both\"\n");
    let a = Server::start(&url, &config);
    let b = Server::start(&url, &config);
    let (id, req) = adas_moment(&a);
    let mut events = Events::start(&a.client(), "/subscribe", Some(&req));
    events.next(WAIT).expect("the first answer");
    let mut c = ada(&b);
    put_moment_content(&mut c, id, "written through b");
    let got = within_one_interval(&mut events, Instant::now(), "through another instance");
    assert_eq!(got["Moment"]["content"], "written through b", "{got}");
}

#[test]
fn writes_by_another_program_reach_subscribers_through_the_triggers_on_postgres() {
    let Some((_, url)) = demo_databases("live_triggers")
        .into_iter()
        .find(|(e, _)| *e == Engine::Postgres)
    else {
        skip("live_triggers: PostgreSQL not provided");
        return;
    };
    let printed = std::process::Command::new(env!("CARGO_BIN_EXE_apijet"))
        .args(["live-triggers", "--db", &url])
        .output()
        .expect("apijet live-triggers runs");
    let sql = String::from_utf8_lossy(&printed.stdout);
    assert!(
        sql.contains("CREATE TRIGGER apijet_live") && sql.contains("\"Moment\""),
        "--print is the default: {sql}"
    );
    let installed = std::process::Command::new(env!("CARGO_BIN_EXE_apijet"))
        .args(["live-triggers", "--install", "--db", &url])
        .status()
        .expect("apijet live-triggers runs");
    assert!(installed.success());
    let s = Server::start(&url, MARKS_ONLY);
    let (id, req) = adas_moment(&s);
    let mut events = Events::start(&s.client(), "/subscribe", Some(&req));
    events.next(WAIT).expect("the first answer");
    let args = Engine::Postgres.client_args().expect("psql arguments");
    let db = url.rsplit('/').next().expect("a database").to_string();
    let status = std::process::Command::new("psql")
        .args(args.split_whitespace())
        .args(["-X", "-q", "-d", &db, "-c"])
        .arg(format!(
            "UPDATE \"Moment\" SET content = 'written by psql' WHERE id = {id}"
        ))
        .status()
        .expect("psql runs");
    assert!(status.success());
    let got = within_one_interval(&mut events, Instant::now(), "through a trigger");
    assert_eq!(got["Moment"]["content"], "written by psql", "{got}");
}

/// The token `/metrics` asks for in these tests.
const METRICS_TOKEN: &str = "live-metrics";

/// The value of one metric in `/metrics`.
fn metric(s: &Server, name: &str) -> f64 {
    let text = crate::support::client_with_bearer(s, METRICS_TOKEN)
        .get("/metrics")
        .expect("metrics")
        .text;
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in /metrics"))
}

#[test]
fn identical_subscriptions_share_one_result_and_unchanged_answers_are_not_sent() {
    let s = Server::fresh_sqlite(&format!(
        "{MARKS_ONLY}metrics_token = \"{METRICS_TOKEN}\"\n"
    ));
    let (id, req) = adas_moment(&s);
    let other = r#"{"User":{"id":82002,"@column":"id,name"}}"#;
    let mut same: Vec<Events> = (0..3)
        .map(|_| Events::start(&s.client(), "/subscribe", Some(&req)))
        .collect();
    let mut different = Events::start(&s.client(), "/subscribe", Some(other));
    for e in same.iter_mut().chain([&mut different]) {
        e.next(WAIT).expect("a first answer");
    }
    let deadline = Instant::now() + WAIT;
    while metric(&s, "apijet_live_subscriptions") < 4.0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(metric(&s, "apijet_live_subscriptions"), 4.0);
    assert_eq!(
        metric(&s, "apijet_live_shapes"),
        2.0,
        "three identical subscriptions are one result"
    );
    let mut c = ada(&s);
    put_moment_content(&mut c, id, "seen by three");
    let ids: Vec<Option<String>> = same
        .iter_mut()
        .map(|e| e.next(WAIT).expect("the new answer").id)
        .collect();
    assert!(
        ids[0].is_some() && ids.iter().all(|i| *i == ids[0]),
        "{ids:?}"
    );
    // The write touched Moment, which the other subscription does not read: nothing for it;
    // and another write to Moment that leaves this answer as it is sends nothing either.
    put_moment_content(&mut c, id, "seen by three");
    let quiet = Duration::from_millis(3 * INTERVAL_MS);
    assert!(
        same[0].next(quiet).is_none(),
        "an answer that did not change is not sent again"
    );
    assert!(different.next(Duration::from_millis(100)).is_none());
}

#[test]
fn a_subscription_depends_on_the_tables_of_its_subqueries() {
    // Comment appears only inside the subquery: the dependency comes from the planned
    // statements, not from the request's keys.
    let s = Server::fresh_sqlite(MARKS_ONLY);
    let req = json!({"[]": {"count": 50, "Moment": {
        "id{}@": {"from": "Comment", "Comment": {"@column": "momentId", "userId": 82001}},
        "@column": "id", "@order": "id+"}}});
    let mut events = Events::start(&s.client(), "/subscribe", Some(&req.to_string()));
    let first = events.next(WAIT).expect("the first answer").json();
    let listed = |v: &Value| -> Vec<i64> {
        v["[]"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|i| i["Moment"]["id"].as_i64())
                    .collect()
            })
            .unwrap_or_default()
    };
    let before = listed(&first);
    let all = s.post(
        "/get",
        r#"{"[]":{"count":100,"Moment":{"@column":"id","@order":"id+"}}}"#,
    );
    let new = listed(&all)
        .into_iter()
        .find(|m| !before.contains(m))
        .expect("a moment Ada has not commented on");
    let mut c = ada(&s);
    let r = post(
        &mut c,
        "/post",
        &json!({"Comment": {"momentId": new, "content": "first!"}, "tag": "Comment"}),
    );
    assert_eq!(code(&r), 200, "{r}");
    let got = within_one_interval(&mut events, Instant::now(), "through a subquery");
    assert!(listed(&got).contains(&new), "{got}");
}

#[test]
fn last_event_id_skips_the_answer_the_client_has_and_heartbeats_keep_the_stream() {
    let s = Server::fresh_sqlite(&format!("{MARKS_ONLY}live_heartbeat_ms = 300\n"));
    let (id, req) = adas_moment(&s);
    let mut first = Events::start(&s.client(), "/subscribe", Some(&req));
    let had = first.next(WAIT).expect("first").id.expect("an id");
    drop(first);
    let mut again = Events::open(
        &s.client(),
        "/subscribe",
        Some(&req),
        &[("Last-Event-ID", &had)],
    )
    .expect("subscribed");
    let e = again
        .next_any(Duration::from_secs(5), true)
        .expect("a heartbeat");
    assert_eq!(
        e.kind, ":",
        "no answer the client has: a heartbeat instead ({e:?})"
    );
    let mut c = ada(&s);
    put_moment_content(&mut c, id, "after reconnecting");
    let got = within_one_interval(&mut again, Instant::now(), "after reconnecting");
    assert_eq!(got["Moment"]["content"], "after reconnecting");
}

#[test]
fn patches_turn_the_previous_answer_into_the_new_one() {
    let s = Server::fresh_sqlite(MARKS_ONLY);
    let (id, req) = adas_moment(&s);
    let mut events = Events::start(&s.client(), "/subscribe?patch=1", Some(&req));
    let mut doc = events.next(WAIT).expect("first").json();
    let mut c = ada(&s);
    for (i, text) in ["patched once", "patched twice"].iter().enumerate() {
        put_moment_content(&mut c, id, text);
        let e = events.next(WAIT).expect("a patch");
        assert_eq!(e.kind, "patch", "{e:?}");
        apply(&mut doc, e.json().as_array().expect("a patch is a list"));
        assert_eq!(
            content(doc.clone()),
            content(s.post("/get", &req)),
            "patch {i}"
        );
    }
    let bad = s
        .client()
        .post("/subscribe?patch=maybe", &req)
        .expect("answer");
    assert_eq!(code(&bad.json().expect("json")), 406, "{}", bad.text);
}

#[test]
fn limits_per_visitor_and_per_instance_refuse_naming_their_setting() {
    let s = Server::fresh_sqlite(&format!(
        "{MARKS_ONLY}live_max_per_visitor = 2\nlive_max_subscriptions = 3\nlive_heartbeat_ms = 200\n"
    ));
    let req = r#"{"User":{"id":82001,"@column":"id"}}"#;
    let anon = s.client();
    let one = Events::start(&anon, "/subscribe", Some(req));
    let _two = Events::start(&anon, "/subscribe", Some(req));
    match Events::open(&anon, "/subscribe", Some(req), &[]) {
        Err(NotStarted::Answer(v)) => {
            assert_eq!(code(&v), 429, "{v}");
            assert!(
                v["msg"]
                    .as_str()
                    .unwrap_or_default()
                    .contains("live_max_per_visitor"),
                "{v}"
            );
        }
        other => panic!(
            "a third subscription of one visitor: {:?}",
            other.map(|_| ())
        ),
    }
    let logged = ada(&s);
    let _three = Events::start(&logged, "/subscribe", Some(req));
    match Events::open(&logged, "/subscribe", Some(req), &[]) {
        Err(NotStarted::Answer(v)) => {
            assert_eq!(code(&v), 429, "{v}");
            assert!(
                v["msg"]
                    .as_str()
                    .unwrap_or_default()
                    .contains("live_max_subscriptions"),
                "{v}"
            );
        }
        other => panic!("a fourth subscription: {:?}", other.map(|_| ())),
    }
    // A subscriber that leaves gives its seat back.
    drop(one);
    let deadline = Instant::now() + WAIT;
    loop {
        match Events::open(&anon, "/subscribe", Some(req), &[]) {
            Ok(_) => break,
            Err(e) => assert!(
                Instant::now() < deadline,
                "the seat was not given back: {e:?}"
            ),
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn an_expired_login_ends_the_stream_with_an_event_that_says_so() {
    let s = Server::fresh_sqlite(&format!("{MARKS_ONLY}token_ttl_secs = 2\n"));
    let c = ada(&s);
    let req = r#"{"tag":"Privacy","Privacy":{"id":82001}}"#;
    let mut events = Events::start(&c, "/subscribe/gets", Some(req));
    let first = events.next(WAIT).expect("first").json();
    assert_eq!(first["Privacy"]["id"], 82001, "{first}");
    let e = events.next(WAIT).expect("the expiry");
    assert_eq!(e.kind, "expired", "{e:?}");
    assert_eq!(code(&e.json()), 401, "{e:?}");
    assert!(events.ended(WAIT), "the stream ends after it");
    // The expired token subscribes no more.
    let again = Events::open(&c, "/subscribe/gets", Some(req), &[]);
    match again {
        Err(NotStarted::Answer(v)) => assert_eq!(code(&v), 407, "{v}"),
        other => panic!("{:?}", other.map(|_| ())),
    }
}

#[test]
fn sigterm_ends_every_stream_and_the_server_stops() {
    let mut s = Server::fresh_sqlite(MARKS_ONLY);
    let mut streams: Vec<Events> = (0..5)
        .map(|i| {
            let req = format!(r#"{{"User":{{"id":8200{i},"@column":"id"}}}}"#);
            Events::start(&s.client(), "/subscribe", Some(&req))
        })
        .collect();
    for e in &mut streams {
        e.next(WAIT).expect("a first answer");
    }
    s.signal("TERM");
    for e in &mut streams {
        let end = e.next(WAIT).expect("a reconnect event");
        assert_eq!(end.kind, "reconnect", "{end:?}");
        assert!(e.ended(WAIT));
    }
    // Long before the 30 s the server grants requests in flight.
    let status = s
        .wait_exit(Duration::from_secs(15))
        .expect("the server stopped");
    assert!(status.success(), "{status:?}");
}

#[test]
fn the_browser_form_takes_the_request_in_the_url() {
    let s = Server::fresh_sqlite(MARKS_ONLY);
    let req = r#"{"User":{"id":82001,"@column":"id,name"}}"#;
    let path = format!(
        "/subscribe/{}",
        req.bytes().map(|b| format!("%{b:02X}")).collect::<String>()
    );
    let mut events = Events::start(&s.client(), &path, None);
    let got = events.next(WAIT).expect("first").json();
    assert_eq!(content(got), content(s.post("/get", req)));
    // Writes cannot be subscribed to.
    let r = s.client().post("/subscribe/put", req).expect("answer");
    assert_eq!(code(&r.json().expect("json")), 406, "{}", r.text);
    let mut c: Client = s.client();
    let r = c.post("/subscribe?debug=1", req).expect("answer");
    assert_eq!(code(&r.json().expect("json")), 406, "{}", r.text);
}
