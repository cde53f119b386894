//! POST, PUT and DELETE over HTTP, on every engine: the API, group commit, and a SIGKILL in the
//! middle of a write load.

use crate::support::{ada, code, demo_databases, post, Client, Engine, Server};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

const CONFIG: &str = "token_secret = \"writes\"\nmax_count = 100000\n";

/// Ids of the comments whose content starts with `marker`.
fn comment_ids(c: &mut Client, marker: &str) -> Vec<i64> {
    let r = post(
        c,
        "/get",
        &json!({"Comment-id[]": {"count": 0, "Comment": {"content$": format!("{marker}%")}}}),
    );
    r["Comment-id[]"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter_map(Value::as_i64)
        .collect()
}

#[test]
fn writes_on_every_engine() {
    for (engine, url) in demo_databases("writes_api") {
        let s = Server::start(&url, CONFIG);
        let mut c = ada(&s);
        // POST answers the new id; the row is there, owned by the visitor.
        let r = post(
            &mut c,
            "/post",
            &json!({"tag": "Comment", "Comment": {"momentId": 1001, "content": "w-one"}}),
        );
        assert_eq!(code(&r), 200, "{engine}: {r}");
        let id = r["Comment"]["id"].as_i64().expect("id");
        let row = post(&mut c, "/get", &json!({"Comment": {"id": id}}));
        assert_eq!(
            (
                row["Comment"]["userId"].as_i64(),
                row["Comment"]["content"].as_str()
            ),
            (Some(82001), Some("w-one")),
            "{engine}"
        );
        // The structure's rules and the owner's limits.
        assert_eq!(
            code(&post(
                &mut s.client(),
                "/post",
                &json!({"tag": "Comment", "Comment": {"momentId": 1001, "content": "x"}})
            )),
            407,
            "{engine}"
        );
        assert_eq!(
            code(&post(
                &mut c,
                "/post",
                &json!({"tag": "Comment", "Comment": {"content": "x"}})
            )),
            406,
            "{engine}: MUST"
        );
        assert_eq!(
            code(&post(
                &mut c,
                "/post",
                &json!({"tag": "Comment", "Comment": {"id": 1, "momentId": 1001, "content": "x"}})
            )),
            406,
            "{engine}: REFUSE id"
        );
        assert_eq!(
            code(&post(
                &mut c,
                "/post",
                &json!({"Comment": {"momentId": 1001, "content": "x"}})
            )),
            406,
            "{engine}: no tag"
        );
        assert_eq!(
            code(&post(
                &mut c,
                "/post",
                &json!({"tag": "Comment", "Comment": {"momentId": "x", "content": "x"}})
            )),
            415,
            "{engine}: TYPE"
        );
        // PUT and DELETE of one's own rows; someone else's are 401, gone rows too.
        let r = post(
            &mut c,
            "/put",
            &json!({"tag": "Comment", "Comment": {"id": id, "content": "w-two"}}),
        );
        assert_eq!(
            (code(&r), r["Comment"]["count"].as_i64()),
            (200, Some(1)),
            "{engine}: {r}"
        );
        let r = post(
            &mut c,
            "/put",
            &json!({"tag": "Moment", "Moment": {"id": 1001, "content": "hijack"}}),
        );
        assert_eq!(code(&r), 401, "{engine}: moment 1001 is not Ada's: {r}");
        assert_eq!(
            code(&post(
                &mut c,
                "/put",
                &json!({"tag": "Moment", "Moment": {"content": "x"}})
            )),
            406,
            "{engine}: PUT needs an id"
        );
        assert_eq!(
            code(&post(
                &mut c,
                "/delete",
                &json!({"tag": "Comment", "Comment": {"id": id}})
            )),
            200,
            "{engine}"
        );
        assert_eq!(
            code(&post(
                &mut c,
                "/delete",
                &json!({"tag": "Comment", "Comment": {"id": id}})
            )),
            401,
            "{engine}: deleted twice"
        );
        // A batch is one request; its ids come back in order; id{} updates and deletes them.
        let items: Vec<Value> = (0..3)
            .map(|i| json!({"momentId": 1001, "content": format!("w-batch {i}")}))
            .collect();
        let r = post(
            &mut c,
            "/post",
            &json!({"tag": "Comment:[]", "Comment[]": items}),
        );
        assert_eq!(r["Comment"]["count"], 3, "{engine}: {r}");
        let ids = r["Comment"]["id[]"].clone();
        assert_eq!(comment_ids(&mut c, "w-batch").len(), 3, "{engine}");
        let r = post(
            &mut c,
            "/put",
            &json!({"tag": "Comment[]", "Comment": {"id{}": ids, "content": "w-batch same"}}),
        );
        assert_eq!(
            (r["Comment"]["count"].as_i64(), &r["Comment"]["id[]"]),
            (Some(3), &ids),
            "{engine}: {r}"
        );
        let r = post(
            &mut c,
            "/delete",
            &json!({"tag": "Comment[]", "Comment": {"id{}": ids}}),
        );
        assert_eq!(r["Comment"]["count"], 3, "{engine}: {r}");
        assert!(comment_ids(&mut c, "w-batch").is_empty(), "{engine}");
        // k+ and k-: numbers, and JSON arrays edited element by element.
        let before = post(
            &mut c,
            "/gets",
            &json!({"tag": "Privacy", "Privacy": {"id": 82001}}),
        )["Privacy"]["balance"]
            .clone();
        let r = post(
            &mut c,
            "/put",
            &json!({"tag": "balance+", "Privacy": {"id": 82001, "balance+": 10}}),
        );
        assert_eq!(code(&r), 200, "{engine}: {r}");
        let after = post(
            &mut c,
            "/gets",
            &json!({"tag": "Privacy", "Privacy": {"id": 82001}}),
        )["Privacy"]["balance"]
            .clone();
        let as_f = |v: &Value| {
            v.as_str()
                .and_then(|s| s.parse::<f64>().ok())
                .unwrap_or(f64::NAN)
        };
        assert!(
            (as_f(&after) - as_f(&before) - 10.0).abs() < 1e-6,
            "{engine}: {before} → {after}"
        );
        let moment = post(
            &mut c,
            "/post",
            &json!({"tag": "Moment", "Moment": {"content": "w-moment"}}),
        )["Moment"]["id"]
            .clone();
        let edit = |c: &mut Client, key: &str, v: Value| {
            code(&post(
                c,
                "/put",
                &json!({"tag": "Moment", "Moment": {"id": moment, key: v}}),
            ))
        };
        assert_eq!(
            edit(&mut c, "praiseUserIdList+", json!([82002, 82003])),
            200,
            "{engine}"
        );
        assert_eq!(
            edit(&mut c, "praiseUserIdList+", json!([82002])),
            409,
            "{engine}: already there"
        );
        assert_eq!(
            edit(&mut c, "praiseUserIdList-", json!([82002])),
            200,
            "{engine}"
        );
        assert_eq!(
            edit(&mut c, "praiseUserIdList-", json!([82002])),
            417,
            "{engine}: not there"
        );
        let r = post(
            &mut c,
            "/get",
            &json!({"Moment": {"id": moment, "@column": "praiseUserIdList"}}),
        );
        assert_eq!(r["Moment"]["praiseUserIdList"], json!([82003]), "{engine}");
        // One transaction per request: a failing object undoes the others.
        let r = post(
            &mut c,
            "/post",
            &json!({"tag": "Comment:[]", "Comment[]": [{"momentId": 1001, "content": "w-undo"}, {"momentId": "no", "content": "w-undo"}]}),
        );
        assert_ne!(code(&r), 200, "{engine}: {r}");
        assert!(
            comment_ids(&mut c, "w-undo").is_empty(),
            "{engine}: nothing of a failed request stays"
        );
    }
}

/// Concurrent single-row POSTs, one of them too long for `Comment.content` (varchar 1000) on the
/// engines that check lengths: every other row is answered 200 and is there; the bad one fails
/// alone. Runs with the queue on (coalescing) and off.
#[test]
fn group_commit_fails_only_the_bad_row() {
    for (engine, url) in demo_databases("group_commit") {
        for queue in [true, false] {
            let s = Server::start(
                &url,
                &format!("{CONFIG}write_queue = {queue}\nwrite_queue_us = 20000\n"),
            );
            let marker = format!("gc-{queue}-");
            let results = Arc::new(Mutex::new(Vec::new()));
            let threads: Vec<_> = (0..24)
                .map(|i| {
                    let mut c = ada(&s);
                    let results = results.clone();
                    let marker = marker.clone();
                    std::thread::spawn(move || {
                        let content = if i == 7 { format!("{marker}{}", "x".repeat(1200)) } else { format!("{marker}{i}") };
                        let r = post(&mut c, "/post", &json!({"tag": "Comment", "Comment": {"momentId": 1001, "content": content}}));
                        results.lock().expect("lock").push((i, code(&r), r["Comment"]["id"].as_i64()));
                    })
                })
                .collect();
            for t in threads {
                t.join().expect("client thread");
            }
            let results = results.lock().expect("lock").clone();
            let stored = comment_ids(&mut ada(&s), &marker);
            for (i, status, id) in &results {
                if *i == 7 && engine != Engine::Sqlite {
                    assert_eq!(
                        *status, 400,
                        "{engine} queue={queue}: the too-long row fails on its own"
                    );
                } else {
                    assert_eq!(*status, 200, "{engine} queue={queue}: row {i} is innocent");
                    assert!(
                        id.is_some_and(|id| stored.contains(&id)),
                        "{engine} queue={queue}: row {i} is stored"
                    );
                }
            }
            let ok = results.iter().filter(|r| r.1 == 200).count();
            assert_eq!(
                stored.len(),
                ok,
                "{engine} queue={queue}: exactly the acknowledged rows"
            );
        }
    }
}

/// SIGKILL during a write load: every write answered 200 is in the database afterwards.
#[test]
fn sigkill_during_writes_loses_no_acknowledged_row() {
    for (engine, url) in demo_databases("sigkill") {
        let mut s = Server::start(&url, CONFIG);
        let stop = Arc::new(AtomicBool::new(false));
        let acknowledged = Arc::new(Mutex::new(Vec::new()));
        let writers: Vec<_> = (0..8)
            .map(|w| {
                let mut c = ada(&s);
                let (stop, acknowledged) = (stop.clone(), acknowledged.clone());
                std::thread::spawn(move || {
                    let mut n = 0;
                    while !stop.load(Ordering::Relaxed) {
                        let body = json!({"tag": "Comment", "Comment": {"momentId": 1001, "content": format!("kill-{w}-{n}")}});
                        // After the kill, requests fail to connect: those were never acknowledged.
                        if let Ok(reply) = c.post("/post", &body.to_string()) {
                            if let Ok(r) = reply.json() {
                                if code(&r) == 200 {
                                    acknowledged.lock().expect("lock").push(r["Comment"]["id"].as_i64().expect("id"));
                                }
                            }
                        }
                        n += 1;
                    }
                })
            })
            .collect();
        std::thread::sleep(std::time::Duration::from_millis(1500));
        s.kill_hard();
        stop.store(true, Ordering::Relaxed);
        for t in writers {
            t.join().expect("writer");
        }
        let acknowledged = acknowledged.lock().expect("lock").clone();
        assert!(
            acknowledged.len() > 10,
            "{engine}: the load ran ({} writes)",
            acknowledged.len()
        );
        let again = Server::start(&url, CONFIG);
        let stored = comment_ids(&mut ada(&again), "kill-");
        let missing: Vec<_> = acknowledged
            .iter()
            .filter(|id| !stored.contains(id))
            .collect();
        assert!(
            missing.is_empty(),
            "{engine}: acknowledged but lost after SIGKILL: {missing:?}"
        );
    }
}
