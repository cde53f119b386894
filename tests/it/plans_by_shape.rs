//! A read is planned once per shape (the request without its condition values) and each
//! request of the shape binds its own values into the kept plan: on every engine, requests of
//! one shape answer their own rows, a value that decides the statement (an `id` that matches
//! nothing, a list where a value belongs) is decided for its own request, and a refusal leaves
//! the kept plan as it was.

use crate::support::{code, demo_databases, Server};
use serde_json::json;

#[test]
fn requests_of_one_shape_answer_their_own_values() {
    for (engine, url) in demo_databases("shapes") {
        let s = Server::start(&url, "");
        let user = |id: serde_json::Value| s.post_json("/get", &json!({"User": {"id": id}}));
        for id in [82001, 82002, 82003, 82001] {
            let r = user(json!(id));
            assert_eq!(code(&r), 200, "{engine} {id}: {r}");
            assert_eq!(r["User"]["id"], id, "{engine} {id}: {r}");
        }
        for nothing in [json!(0), json!(-1), json!(""), json!(99_999_999)] {
            let r = user(nothing.clone());
            assert_eq!(code(&r), 200, "{engine} {nothing}: {r}");
            assert!(r.get("User").is_none(), "{engine} {nothing}: {r}");
        }
        let r = user(json!("82002"));
        assert_eq!(r["User"]["id"], 82002, "{engine}: a text id: {r}");
        let r = user(json!([82001]));
        assert_eq!(code(&r), 415, "{engine}: a list is no id: {r}");
        let r = user(json!(82001));
        assert_eq!(r["User"]["id"], 82001, "{engine}: after a refusal: {r}");

        // A list of one shape, its bound in the values.
        let page = |after: i64| {
            s.post_json(
                "/get",
                &json!({"User[]": {"count": 2, "User": {"id>": after, "@column": "id", "@order": "id+"}}}),
            )
        };
        for after in [82001, 82003, 82001] {
            let r = page(after);
            assert_eq!(code(&r), 200, "{engine} {after}: {r}");
            let first = r["User[]"][0]["id"].as_i64().unwrap_or_default();
            assert!(first > after, "{engine} {after}: {r}");
        }

        // A nested read of one shape: each item's author is its own.
        let nested = |user: i64| {
            s.post_json(
                "/get",
                &json!({"[]": {"count": 3, "Moment": {"userId": user, "@column": "id,userId"},
                    "User": {"id@": "/Moment/userId", "@column": "id"}}}),
            )
        };
        for user in [82001, 82002] {
            let r = nested(user);
            assert_eq!(code(&r), 200, "{engine} {user}: {r}");
            for item in r["[]"].as_array().into_iter().flatten() {
                assert_eq!(item["Moment"]["userId"], user, "{engine}: {r}");
                assert_eq!(item["User"]["id"], user, "{engine}: {r}");
            }
        }
    }
}
