//! The read API over HTTP on our own demo dataset, on every engine: SQLite always, PostgreSQL
//! and MariaDB/MySQL when the test rig provides them (`APIJET_TEST_*_URL`).
//!
//! Each check runs once per engine against a real server process; an engine whose server the
//! rig did not provide is reported as not run, never counted as passed.

use crate::support::{on_every_engine, Server};
use serde_json::{json, Value};

const CONFIG: &str = "debug = false\nmax_count = 100\n";

fn get(s: &Server, body: Value) -> Value {
    s.post_json("/get", &body)
}

#[test]
fn reads_on_every_engine() {
    on_every_engine("reads_on_every_engine", CONFIG, |engine, s| {
        // A single object by id, with JSON columns as JSON and timestamps in the JDBC format.
        let r = get(s, json!({"User": {"id": 82001}}));
        assert_eq!(r["code"], 200, "{engine}: {r}");
        assert_eq!(r["User"]["name"], "Ada", "{engine}");
        assert_eq!(
            r["User"]["contactIdList"],
            json!([82002, 82003, 82004, 82005, 10001]),
            "{engine}"
        );
        let date = r["User"]["date"].as_str().unwrap_or_default();
        assert!(
            date.len() >= 21 && date.as_bytes()[10] == b' ' && date.contains('.'),
            "{engine}: {date}"
        );
        assert!(r.get("time").is_some(), "{engine}: envelope has time");

        // Keys in request order, ok/code/msg last.
        let r = get(
            s,
            json!({"Moment": {"userId": 82001, "@column": "userId,id"}, "User": {"id@": "Moment/userId", "@column": "name"}}),
        );
        let keys: Vec<&String> = r.as_object().expect("object").keys().collect();
        assert_eq!(
            keys,
            ["Moment", "User", "ok", "code", "msg", "time"],
            "{engine}"
        );
        let cols: Vec<&String> = r["Moment"].as_object().expect("object").keys().collect();
        assert_eq!(cols, ["userId", "id"], "{engine}");
        assert_eq!(r["User"]["name"], "Ada", "{engine}");

        // An array whose items refer to their own main table.
        let r = get(
            s,
            json!({"[]": {"count": 3, "Moment": {"@column": "id,userId", "@order": "id+"}, "User": {"id@": "/Moment/userId", "@column": "id,name"}}}),
        );
        let items = r["[]"].as_array().expect("list");
        assert_eq!(items.len(), 3, "{engine}");
        for item in items {
            assert_eq!(
                item["User"]["id"], item["Moment"]["userId"],
                "{engine}: {item}"
            );
        }

        // Table[] unwraps, Table-key[] extracts, HEAD counts.
        let r = get(
            s,
            json!({"Moment-id[]": {"count": 0, "Moment": {"userId": 82001, "@order": "id+"}}}),
        );
        assert_eq!(
            r["Moment-id[]"],
            json!([1016, 1038, 1042, 1058, 1066, 1069, 1077, 1079, 1082]),
            "{engine}"
        );
        let r = s.post_json("/head", &json!({"Moment": {"userId": 82001}}));
        assert_eq!(r["Moment"]["count"], 9, "{engine}: {r}");

        // query:2 gives total and info next to the list.
        let r = get(
            s,
            json!({"User[]": {"query": 2, "count": 4, "page": 1, "User": {"@column": "id"}}, "total@": "/User[]/total"}),
        );
        assert_eq!(r["total"], 30, "{engine}: {r}");
        assert_eq!(
            r["userListInfo"],
            json!({"total": 30, "count": 4, "page": 1, "max": 7, "more": true, "first": false, "last": false}),
            "{engine}"
        );
        assert_eq!(r["User[]"].as_array().map(Vec::len), Some(4), "{engine}");

        // Empty results are omitted, and the first-child rule empties the container.
        let r = get(s, json!({"User": {"id": 1}, "Moment": {"id": 1001}}));
        assert!(
            r.get("User").is_none() && r.get("Moment").is_none(),
            "{engine}: {r}"
        );
        let r = get(
            s,
            json!({"Moment": {"id": 1001, "@column": "id"}, "User": {"id": 1}}),
        );
        assert_eq!(r["Moment"]["id"], 1001, "{engine}");
        assert!(r.get("User").is_none(), "{engine}");

        // Hidden columns never leave the server, even when asked for.
        let r = get(s, json!({"Comment": {"id": 5001, "@column": "id,content"}}));
        assert_eq!(r["Comment"]["id"], 5001, "{engine}: {r}");
        // GET /get/{json} answers like POST /get.
        let r =
            s.get("/get/%7B%22Moment%22%3A%7B%22id%22%3A1001%2C%22%40column%22%3A%22id%22%7D%7D");
        assert_eq!(r["Moment"]["id"], 1001, "{engine}: {r}");
        // Comments in the body are accepted.
        let r = s.post(
            "/get",
            "{ // the user\n \"User\": {\"id\": 82001, /* only */ \"@column\": \"id\"} }",
        );
        assert_eq!(r["User"]["id"], 82001, "{engine}: {r}");
    });
}

#[test]
fn conditions_on_every_engine() {
    on_every_engine("conditions_on_every_engine", CONFIG, |engine, s| {
        let head = |body: Value| s.post_json("/head", &body)["User"]["count"].clone();
        assert_eq!(
            head(json!({"User": {"id>": 82010, "id<=": 82020}})),
            10,
            "{engine}"
        );
        assert_eq!(
            head(json!({"User": {"id&{}": ">82010,<=82020"}})),
            10,
            "{engine}"
        );
        assert_eq!(
            head(json!({"User": {"id|{}": "<=82010,>82020"}})),
            20,
            "{engine}"
        );
        assert_eq!(head(json!({"User": {"tag{}": "=null"}})), 13, "{engine}");
        assert_eq!(head(json!({"User": {"tag{}": "!=null"}})), 17, "{engine}");
        assert_eq!(
            head(json!({"User": {"id{}": [82001, 82002, 1]}})),
            2,
            "{engine}"
        );
        assert_eq!(
            head(json!({"User": {"id!{}": [82001, 82002]}})),
            28,
            "{engine}"
        );
        assert_eq!(head(json!({"User": {"id%": "82001,82005"}})), 5, "{engine}");
        assert_eq!(
            head(json!({"User": {"contactIdList<>": 82002}})),
            head(json!({"User": {"contactIdList<>": [82002]}})),
            "{engine}"
        );
        // LIKE is case-insensitive on every engine, as on MySQL's default collation.
        assert_eq!(
            head(json!({"User": {"name$": "%a%"}})),
            head(json!({"User": {"name$": "%A%"}})),
            "{engine}"
        );
        // `%$` escapes the client's own wildcards.
        assert_eq!(head(json!({"User": {"name%$": "%"}})), 0, "{engine}");
        // Regex: case-sensitive with ~, insensitive with *~.
        let upper = head(json!({"User": {"name~": "^[A-Z]+$"}}));
        let any = head(json!({"User": {"name*~": "^[a-z]+$"}}));
        assert!(any.as_u64() > upper.as_u64(), "{engine}: {any} vs {upper}");
        // @combine.
        let r = s.post_json(
            "/head",
            &json!({"User": {"id<": 82003, "id>": 82020, "@combine": "id< | id>"}}),
        );
        assert_eq!(
            r["User"]["count"],
            head(json!({"User": {"id|{}": "<82003,>82020"}})),
            "{engine}: {r}"
        );
        // Aggregates and grouping.
        let r = get(
            s,
            json!({"Moment": {"@column": "count(*):n;max(id):top", "userId": 82001}}),
        );
        assert_eq!(r["Moment"], json!({"n": 9, "top": 1082}), "{engine}");
        let r = get(
            s,
            json!({"[]": {"count": 2, "Moment": {"@column": "userId;count(*):n", "@group": "userId", "@having": "count(*)>8"}}}),
        );
        assert!(
            r["[]"].as_array().is_some_and(|l| !l.is_empty()),
            "{engine}: {r}"
        );
    });
}

#[test]
fn refusals_on_every_engine() {
    on_every_engine("refusals_on_every_engine", CONFIG, |engine, s| {
        let code = |path: &str, body: &str| s.post(path, body)["code"].clone();
        // Access: Privacy has no public GET, system tables are closed outside debug mode.
        assert_eq!(code("/get", r#"{"Privacy":{"id":82001}}"#), 401, "{engine}");
        assert_eq!(code("/get", r#"{"Access":{}}"#), 401, "{engine}");
        assert_eq!(code("/get", r#"{"Nope":{}}"#), 401, "{engine}");
        assert_eq!(
            code("/get", r#"{"Moment":{"@role":"OWNER"}}"#),
            407,
            "{engine}"
        );
        assert_eq!(
            code("/get", r#"{"Moment":{"@role":"GOD"}}"#),
            406,
            "{engine}"
        );
        assert_eq!(
            code("/gets", r#"{"tag":"Privacy","Privacy":{"id":82001}}"#),
            407,
            "{engine}"
        );
        // Bad input: each with its code, never a 500.
        assert_eq!(code("/get", r#"{"User":"#), 400, "{engine}");
        assert_eq!(code("/get", r#"[1,2]"#), 400, "{engine}");
        assert_eq!(
            code("/get", r#"{"User":{"id;drop table x":1}}"#),
            406,
            "{engine}"
        );
        assert_eq!(code("/get", r#"{"User":{"nope":1}}"#), 406, "{engine}");
        assert_eq!(
            code("/get", r#"{"User":{"@column":"evil(id)"}}"#),
            406,
            "{engine}"
        );
        assert_eq!(
            code("/get", r#"{"User":{"@order":"id;drop"}}"#),
            406,
            "{engine}"
        );
        assert_eq!(
            code("/get", r#"{"User":{"id{}":">1 or 1=1"}}"#),
            403,
            "{engine}"
        );
        assert_eq!(
            code("/get", r#"{"User":{"@explain":true}}"#),
            403,
            "{engine}"
        );
        assert_ne!(
            code("/get", r#"{"User":{"id":"not a number"}}"#),
            500,
            "{engine}"
        );
        assert_eq!(
            code("/get", r#"{"[]":{"count":101,"User":{}}}"#),
            406,
            "{engine}"
        );
        assert_eq!(
            code("/get", r#"{"[]":{"page":101,"User":{}}}"#),
            406,
            "{engine}"
        );
        assert_eq!(code("/head", r#"{"[]":{"User":{}}}"#), 403, "{engine}");
        assert_eq!(code("/patch", r#"{"User":{}}"#), 406, "{engine}");
        let deep = r#"{"[]":{"User":{},"[]":{"User":{},"[]":{"User":{},"[]":{"User":{},"[]":{"User":{},"[]":{"User":{}}}}}}}}"#;
        assert_eq!(code("/get", deep), 406, "{engine}");
        assert_eq!(
            code("/get", r#"{"User":{"x()":"hack(id)"}}"#),
            403,
            "{engine}"
        );
    });
}

#[test]
fn streamed_lists_match_the_buffered_answer() {
    on_every_engine(
        "streamed_lists_match_the_buffered_answer",
        CONFIG,
        |engine, s| {
            // `Moment[]` alone streams; adding a reference makes the same rows take the buffered path.
            let streamed = get(
                s,
                json!({"Moment[]": {"count": 50, "Moment": {"@order": "id+"}}}),
            );
            let buffered = get(
                s,
                json!({"Moment[]": {"count": 50, "Moment": {"@order": "id+"}}, "n@": "Moment[]/0/id"}),
            );
            assert_eq!(streamed["Moment[]"], buffered["Moment[]"], "{engine}");
            assert_eq!(
                streamed["Moment[]"].as_array().map(Vec::len),
                Some(50),
                "{engine}"
            );
            let empty = get(s, json!({"Moment[]": {"Moment": {"userId": 1}}}));
            assert!(
                empty.get("Moment[]").is_none() && empty["code"] == 200,
                "{engine}: {empty}"
            );
        },
    );
}

#[test]
fn nested_lists_cost_one_statement_per_level() {
    on_every_engine("statements_per_level", CONFIG, |engine, s| {
        let feed = |count: u64| {
            json!({"[]": {"count": count, "Moment": {"@column": "id,userId", "@order": "id+"},
                "User": {"id@": "/Moment/userId", "@column": "id,name"},
                "Comment[]": {"count": 3, "Comment": {"momentId@": "[]/Moment/id", "@column": "id,momentId", "@order": "id+"}}}})
        };
        let mut c = s.client();
        let mut seen = Vec::new();
        for count in [2u64, 10, 20] {
            let reply = c.post("/get", &feed(count).to_string()).expect("answer");
            let r = reply.json().expect("json");
            let items = r["[]"].as_array().expect("list");
            assert_eq!(items.len() as u64, count, "{engine}");
            for item in items {
                assert_eq!(
                    item["User"]["id"], item["Moment"]["userId"],
                    "{engine}: {item}"
                );
                let comments = item["Comment[]"]
                    .as_array()
                    .map(Vec::as_slice)
                    .unwrap_or_default();
                assert!(comments.len() <= 3, "{engine}: count per parent");
                assert!(
                    comments
                        .iter()
                        .all(|c| c["momentId"] == item["Moment"]["id"]),
                    "{engine}: {item}"
                );
                assert!(
                    comments
                        .windows(2)
                        .all(|w| w[0]["id"].as_i64() < w[1]["id"].as_i64()),
                    "{engine}: @order per parent"
                );
            }
            seen.push(
                reply
                    .header("x-apijet-statements")
                    .and_then(|v| v.parse::<u64>().ok())
                    .expect("statement count"),
            );
        }
        assert_eq!(
            seen,
            [3, 3, 3],
            "{engine}: one statement per level, whatever the page size"
        );
        // The same answers as item by item: compare with a request the batching does not touch
        // (a function in the nested object keeps it on the per-item path).
        let batched = get(s, feed(5));
        let mut slow = feed(5);
        slow["[]"]["User"]["x()"] = json!("countArray(contactIdList)");
        let per_item = get(s, slow);
        for (a, b) in batched["[]"]
            .as_array()
            .expect("list")
            .iter()
            .zip(per_item["[]"].as_array().expect("list"))
        {
            assert_eq!(a["Comment[]"], b["Comment[]"], "{engine}");
            assert_eq!(a["User"]["name"], b["User"]["name"], "{engine}");
        }
    });
}

/// A gzip-compressed streamed list arrives whole (chunked, with its last chunk), and the server
/// keeps serving afterwards.
#[test]
fn compressed_streams_arrive_whole() {
    use std::io::{Read, Write};
    on_every_engine("compressed_streams", CONFIG, |engine, s| {
        let body = r#"{"Moment[]":{"count":100,"Moment":{}}}"#;
        let addr = s
            .url("")
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .to_string();
        for encoding in ["gzip", "br", "zstd"] {
            let mut sock = std::net::TcpStream::connect(&addr).expect("connect");
            write!(
                sock,
                "POST /get HTTP/1.1\r\nHost: {addr}\r\nAccept-Encoding: {encoding}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            )
            .expect("send");
            let mut raw = Vec::new();
            sock.read_to_end(&mut raw).expect("read");
            let head = String::from_utf8_lossy(&raw[..raw.len().min(600)]).to_ascii_lowercase();
            assert!(
                head.starts_with("http/1.1 200"),
                "{engine} {encoding}: {head}"
            );
            assert!(
                head.contains(&format!("content-encoding: {encoding}")),
                "{engine} {encoding}: {head}"
            );
            assert!(
                raw.ends_with(b"0\r\n\r\n"),
                "{engine} {encoding}: the chunked body must end with its last chunk"
            );
        }
        assert_eq!(
            get(s, json!({"User": {"id": 82001, "@column": "id"}}))["User"]["id"],
            82001,
            "{engine}: still serving"
        );
    });
}
