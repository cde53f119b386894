//! Issue 9, first half, items 4–6 on every engine: list keys named like the reference's,
//! `@explain` with the engine's plan (also on a list that matches nothing), root `k-()`
//! results referable, and `getCurrentUser()`.

use std::process::Command;

use crate::support::{ada, code, demo_databases, post, Engine, Server};
use serde_json::json;

#[test]
fn list_keys_explain_and_root_functions_answer_like_the_reference() {
    for (engine, url) in demo_databases("psmall") {
        let s = Server::start(&url, "debug = true\n");
        let r = s.post_json(
            "/get",
            &json!({"Comment-userId[]": {"query": 2, "count": 2, "Comment": {"momentId": 1001}}}),
        );
        assert_eq!(code(&r), 200, "{engine}: {r}");
        assert!(
            r["commentUseridlistTotal"].as_u64().is_some(),
            "{engine}: {r}"
        );
        assert!(r["commentUseridlistInfo"].is_object(), "{engine}: {r}");

        let r = s.post_json(
            "/get",
            &json!({"[]": {"count": 2, "Moment": {"id": 999999, "@explain": true}}}),
        );
        assert_eq!(code(&r), 200, "{engine}: {r}");
        let explained = &r["[]"][0]["Moment"]["@explain"];
        assert!(
            explained["sql"]
                .as_str()
                .is_some_and(|q| q.contains("SELECT")),
            "{engine}: {r}"
        );
        assert!(
            explained["list"].as_array().is_some_and(|l| !l.is_empty()),
            "{engine}: the plan rows: {r}"
        );

        let r = s.post_json("/get", &json!({"User": {"id": 82001, "@explain": true}}));
        assert!(r["User"]["@explain"]["list"].is_array(), "{engine}: {r}");
        assert_eq!(r["User"]["id"], 82001, "{engine}: {r}");

        let mut c = ada(&s);
        let r = post(
            &mut c,
            "/get",
            &json!({"curId-()": "getCurrentUserId()", "me()": "getCurrentUser()",
                "User": {"id@": "curId", "@column": "id,name"}}),
        );
        assert_eq!(code(&r), 200, "{engine}: {r}");
        assert_eq!(r["User"]["id"], 82001, "{engine}: {r}");
        assert_eq!(r["me"]["id"], 82001, "{engine}: {r}");
        assert_eq!(r["me"]["name"], r["User"]["name"], "{engine}: {r}");

        // Conditions on an @from@ derived table name its columns, also inside expressions.
        let r = s.post_json(
            "/get",
            &json!({"[]": {"count": 100, "Moment": {
                "@from@": {"from": "Moment", "Moment": {"@column": "id,content:c"}},
                "c{}": "length(c)>30", "@column": "id,c"}}}),
        );
        assert_eq!(code(&r), 200, "{engine}: {r}");
        let rows = r["[]"].as_array().expect("rows");
        assert!(!rows.is_empty(), "{engine}: {r}");
        assert!(
            rows.iter()
                .all(|i| i["Moment"]["c"].as_str().is_some_and(|c| c.len() > 30)),
            "{engine}: {r}"
        );
        let r = s.post_json(
            "/get",
            &json!({"Moment": {"@from@": {"from": "Moment", "Moment": {"@column": "id"}},
                "id{}": "length(content)>1"}}),
        );
        assert_eq!(
            code(&r),
            406,
            "{engine}: the derived table has no content: {r}"
        );

        // A write's own @explain answers its statement.
        let r = post(
            &mut c,
            "/put",
            &json!({"Moment": {"id": 1016, "content": "explained", "@explain": true}, "tag": "Moment"}),
        );
        assert_eq!(code(&r), 200, "{engine}: {r}");
        assert!(
            r["Moment"]["sql"]
                .as_str()
                .is_some_and(|q| q.starts_with("UPDATE")),
            "{engine}: {r}"
        );

        // Without @order, MariaDB answers a DISTINCT list in its own order, as the reference;
        // PostgreSQL and SQLite sort it by its columns so that every engine agrees with
        // MariaDB's grouping.
        let r = s.post_json(
            "/get",
            &json!({"[]": {"count": 5, "Moment": {"@column": "DISTINCT userId", "@explain": true}}}),
        );
        let sql = r["[]"][0]["Moment"]["@explain"]["sql"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert_eq!(code(&r), 200, "{engine}: {r}");
        assert_eq!(
            sql.contains("ORDER BY"),
            engine != Engine::Mariadb,
            "{engine}: {sql}"
        );
    }
}

/// PostgreSQL stores `infinity` in timestamp and date columns, and finite values past the years
/// chrono can hold; reading such a row answers the text PostgreSQL prints, or an error envelope:
/// the server never panics on a stored value.
#[test]
fn postgres_infinite_and_far_timestamps_are_answered() {
    for (engine, url) in demo_databases("pg_infinity") {
        if engine != Engine::Postgres {
            continue;
        }
        let args = Engine::Postgres.client_args().expect("psql arguments");
        let database = url.rsplit('/').next().unwrap_or_default().to_string();
        let status = Command::new("psql")
            .args(args.split_whitespace())
            .args(["-X", "-q", "-d", &database, "-c"])
            .arg(
                "UPDATE \"Moment\" SET date = 'infinity' WHERE id = 1001; \
                 UPDATE \"Moment\" SET date = '-infinity' WHERE id = 1002; \
                 UPDATE \"Moment\" SET date = '290000-01-01' WHERE id = 1003;",
            )
            .status()
            .expect("psql runs");
        assert!(status.success());
        let s = Server::start(&url, "");
        for (id, date) in [(1001, "infinity"), (1002, "-infinity")] {
            let r = s.post_json("/get", &json!({"Moment": {"id": id, "@column": "id,date"}}));
            assert_eq!(r["Moment"]["date"], json!(date), "{r}");
        }
        let r = s.post_json(
            "/get",
            &json!({"Moment": {"id": 1003, "@column": "id,date"}}),
        );
        assert!(
            code(&r) >= 500,
            "a value apijet cannot represent is a server error: {r}"
        );
        let r = s.post_json(
            "/get",
            &json!({"Moment[]": {"count": 3, "Moment": {"id{}": [1001, 1002], "@column": "id,date"}}}),
        );
        assert_eq!(r["Moment[]"][0]["date"], json!("infinity"), "{r}");
        let r = s.post_json("/get", &json!({"Moment": {"id": 1004}}));
        assert_eq!(code(&r), 200, "the server still answers: {r}");
    }
}
