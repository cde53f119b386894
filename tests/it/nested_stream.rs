//! Issue 11, goal 3, on every engine: a nested list streams item by item, a chunk of parents
//! at a time, so with the answer cap raised (`max_rows`, `max_answer_bytes`) a page of every
//! moment with its user and comments peaks within 64 MiB of idle, as a tenth of it does; the
//! chunks neither repeat nor skip a moment, and a cap still refuses with 406 before any byte.

use crate::support::{code, demo_databases, Engine, Server};
use apijet_testkit::data::demo::{nested_page, scale_up, DemoScale, MOMENT_BASE};
use apijet_testkit::engine::DbConn;
use serde_json::{json, Value};

/// Generated moments: a page of all of them is about 5 MB of JSON, which the buffered
/// answer held as ~140 MiB of values; under the raised cap below it streams after its first
/// MiB.
const MOMENTS: u64 = 10_000;

const CONFIG: &str = "debug = false\nmax_count = 10000\nmax_page = 1000\n\
                      max_rows = 1000000\nmax_answer_bytes = 1073741824\n";

fn scale(engine: Engine, url: &str) {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let mut conn = DbConn::connect(engine, url).await.expect("connect");
        let s = DemoScale {
            users: MOMENTS / 10,
            moments: MOMENTS,
        };
        scale_up(&mut conn, engine, s).await.expect("scale up");
    });
}

/// The moment ids of a `[]` answer, after checking each item has its moment and user.
fn moment_ids(engine: Engine, r: &Value) -> Vec<i64> {
    assert_eq!(code(r), 200, "{engine}: {}", r["msg"]);
    let items = r["[]"].as_array().expect("a [] list");
    items
        .iter()
        .map(|item| {
            assert!(item["User"].is_object(), "{engine}: {item}");
            let comments = item["Comment[]"].as_array().map_or(0, Vec::len);
            assert!(comments <= 5, "{engine}: {item}");
            item["Moment"]["id"].as_i64().expect("moment id")
        })
        .collect()
}

/// POSTs a nested page and reads its whole answer. A page of every moment takes 5–9 s alone in
/// a debug build, and past the test kit's 15 s under the whole suite's load: what is checked
/// here is its memory, so its time is only bounded.
fn read_page(s: &Server, body: &str) -> Value {
    s.client()
        .with_timeout(std::time::Duration::from_secs(120))
        .post("/get", body)
        .and_then(|r| r.json())
        .unwrap_or_else(|e| panic!("POST /get: {e}"))
}

#[test]
fn a_nested_page_of_every_moment_streams_with_flat_memory() {
    for (engine, url) in demo_databases("nested_stream") {
        scale(engine, &url);
        let s = Server::start(&url, CONFIG);
        let idle = s.rss_kib();

        let tenth = read_page(&s, &nested_page(MOMENTS / 10, 0));
        assert_eq!(moment_ids(engine, &tenth).len() as u64, MOMENTS / 10);
        drop(tenth);
        let peak_tenth = s.peak_rss_kib();

        let whole = read_page(&s, &nested_page(MOMENTS, 0));
        let ids = moment_ids(engine, &whole);
        drop(whole);
        let peak_whole = s.peak_rss_kib();
        // `@order: id-` read a chunk at a time: every generated moment once, newest first.
        let newest = MOMENT_BASE + MOMENTS as i64 - 1;
        let expected: Vec<i64> = (0..MOMENTS as i64).map(|i| newest - i).collect();
        assert!(
            ids == expected,
            "{engine}: the chunks repeated or skipped moments"
        );

        if let (Some(idle), Some(tenth), Some(whole)) = (idle, peak_tenth, peak_whole) {
            eprintln!(
                "{engine}: idle {} MiB, peak {} MiB after {} moments, {} MiB after {MOMENTS}",
                idle / 1024,
                tenth / 1024,
                MOMENTS / 10,
                whole / 1024
            );
            assert!(
                whole < idle + 64 * 1024,
                "{engine}: a page of {MOMENTS} moments peaked at {whole} KiB from {idle} KiB idle"
            );
        }
    }
}

#[test]
fn a_lowered_cap_refuses_a_nested_page_before_its_first_byte() {
    crate::support::on_every_engine(
        "nested_stream_cap",
        "debug = false\nmax_rows = 20\n",
        |engine, s| {
            let body =
                json!({"[]": {"count": 30, "Moment": {}, "User": {"id@": "/Moment/userId"}}});
            let reply = s.client().post("/get", &body.to_string()).expect("answer");
            // A whole error envelope, not an aborted list: refused before the first byte.
            let r = reply.json().expect("a whole JSON answer");
            assert_eq!(code(&r), 406, "{engine}: {r}");
            assert!(
                r["msg"].as_str().unwrap_or_default().contains("max_rows"),
                "{engine}: {r}"
            );
        },
    );
}
