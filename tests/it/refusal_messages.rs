//! What a refusal says: every limit names the setting that raises it, and a table that is not
//! served gets one answer whether it is missing or only not granted, saying so.

use crate::support::{code, Server};
use serde_json::{json, Value};

/// Every limit set low, so that each request below passes all limits but one.
const LOW_LIMITS: &str = "max_count = 5
max_page = 2
max_depth = 2
max_objects = 3
max_expr_length = 40
max_expr_depth = 3
max_pattern_length = 8
max_list_items = 3
max_rows = 3
max_batch = 2
max_body_bytes = 4096
login_failures_per_phone = 1
";

#[test]
fn every_limit_refusal_names_its_setting() {
    let server = Server::fresh_sqlite(LOW_LIMITS);
    let public: [(&str, Value); 9] = [
        ("max_count", json!({"User[]": {"count": 6, "User": {}}})),
        (
            "max_page",
            json!({"User[]": {"count": 1, "page": 3, "User": {}}}),
        ),
        (
            "max_depth",
            json!({"[]": {"count": 1, "User": {}, "[]": {"count": 1, "Moment": {},
                   "[]": {"count": 1, "Comment": {}}}}}),
        ),
        (
            "max_objects",
            json!({"User": {"id": 82001}, "Moment": {"id": 1001}, "Comment": {"id": 5001},
                   "Moment:b": {"id": 1002}}),
        ),
        (
            "max_expr_length",
            json!({"User": {"id": 82001, "@column": "id,name,sex,head,tag,date,contactIdList,pictureList"}}),
        ),
        (
            "max_expr_depth",
            json!({"User": {"id": 82001, "@column": "length(length(length(length(name)))):x"}}),
        ),
        (
            "max_pattern_length",
            json!({"User[]": {"User": {"name$": "%aaaaaaaaaa%"}}}),
        ),
        (
            "max_list_items",
            json!({"User[]": {"User": {"id{}": [82001, 82002, 82003, 82004]}}}),
        ),
        (
            "max_rows",
            // Beside another object, so the list is buffered (a streamed list has no row cap).
            json!({"[]": {"count": 4, "User": {}}, "Moment": {"id": 1001}}),
        ),
    ];
    for (setting, request) in public {
        let v = server.post_json("/get", &request);
        assert_ne!(code(&v), 200, "{setting}: {request} was answered: {v}");
        let msg = v["msg"].as_str().unwrap_or_default();
        assert!(msg.contains(setting), "{setting}: {request} → {v}");
    }

    let mut ada = crate::support::ada(&server);
    let batch = json!({"tag": "Comment:[]", "Comment[]": [
        {"momentId": 1001, "content": "a"}, {"momentId": 1001, "content": "b"},
        {"momentId": 1001, "content": "c"}]});
    let v = crate::support::post(&mut ada, "/post", &batch);
    assert!(
        v["msg"].as_str().unwrap_or_default().contains("max_batch"),
        "{v}"
    );

    let big = format!(
        r#"{{"User":{{"id":82001,"name$":"{}"}}}}"#,
        "a".repeat(5000)
    );
    let r = server.client().post("/get", &big).expect("answer");
    assert_eq!(r.status, 413);
    assert!(r.text.contains("max_body_bytes"), "{}", r.text);

    let mut c = server.client();
    let _ = c.login("13000082002", "wrong");
    let _ = c.login("13000082002", "wrong");
    let v = crate::support::post(
        &mut server.client(),
        "/login",
        &json!({"phone": "13000082002", "password": "wrong"}),
    );
    assert_eq!(code(&v), 429, "{v}");
    assert!(
        v["msg"]
            .as_str()
            .unwrap_or_default()
            .contains("login_failures_per_phone"),
        "{v}"
    );
}

#[test]
fn a_misspelt_table_is_answered_as_a_table_not_granted_and_says_so() {
    let server = Server::fresh_sqlite("");
    let missing = server.post("/get", r#"{"Usr":{"id":82001}}"#);
    let private = server.post("/get", r#"{"Privacy":{"id":82001}}"#);
    assert_eq!(code(&missing), 401, "{missing}");
    assert_eq!(code(&private), 401, "{private}");
    let text = |v: &Value, name: &str| v["msg"].as_str().unwrap_or_default().replace(name, "T");
    assert_eq!(
        text(&missing, "Usr"),
        text(&private, "Privacy"),
        "a missing table and one not granted are answered alike"
    );
    let msg = missing["msg"].as_str().unwrap_or_default();
    for part in ["no table Usr is served", "no such table", "does not reveal"] {
        assert!(msg.contains(part), "no «{part}» in {msg}");
    }
}
