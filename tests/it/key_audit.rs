//! The key audit, in code: every reserved `@` key apijet knows (`apijet_plan::keywords`),
//! every condition-key form and every join form is sent on every engine, and each answer is
//! either honoured (200) or a 4xx whose message names the key — a reserved key is never
//! echoed. Custom `@` keys are echoed as the reference echoes them; one that looks like a
//! misspelt keyword is refused by name. A key added to the lists without a sample here fails.

use crate::support::{code, demo_databases, Engine, Server};
use apijet_plan::keywords::{Treatment, ROOT_KEYWORDS, TABLE_KEYWORDS};
use serde_json::{json, Value};

const CONFIG: &str = "debug = true\n";

/// A request using the table keyword `name` as clients use it, and one with a value that
/// must be refused (for keys honoured only for some values).
fn table_sample(engine: Engine, name: &str) -> (Value, Option<Value>) {
    let schema = served_schema(engine, "key_audit");
    let database = match engine {
        Engine::Sqlite => "SQLITE",
        Engine::Postgres => "POSTGRESQL",
        _ => "MYSQL",
    };
    let user = |k: &str, v: Value| json!({"User": {"id": 82001, k: v}});
    match name {
        "column" => (user("@column", json!("id,name")), None),
        "order" => (user("@order", json!("id-")), None),
        "group" => (json!({"User": {"@column": "sex", "@group": "sex"}}), None),
        "having" => (
            json!({"User": {"@column": "sex;count(id):n", "@group": "sex", "@having": "count(id)>0"}}),
            None,
        ),
        "having&" => (
            json!({"User": {"@column": "sex;count(id):n", "@group": "sex", "@having&": "count(id)>0"}}),
            None,
        ),
        "combine" => (
            json!({"User": {"name": "Ada", "sex": 0, "@combine": "name | sex"}}),
            None,
        ),
        "key" => (json!({"User": {"@key": "n:length(name)", "n>": 1}}), None),
        "raw" => (
            json!({"User": {"id": 82001}}),
            Some(json!({"User": {"id>": "0 OR 1=1", "@raw": "id>"}})),
        ),
        "json" => (user("@json", json!("contactIdList")), None),
        // A read ignores @null, as the reference does.
        "null" => (user("@null", json!("tag")), None),
        "cast" => (
            json!({"User": {"id": "82001", "@cast": "id:INTEGER"}}),
            None,
        ),
        "string" => (
            json!({"User": {"id": 82001, "name": "Ada", "@string": "name"}}),
            None,
        ),
        "trim" => (
            json!({"User": {"id": 82001, "name": " Ada ", "@trim": "name"}}),
            None,
        ),
        "role" => (user("@role", json!("UNKNOWN")), None),
        "explain" => (
            user("@explain", json!(true)),
            Some(user("@explain", json!("yes"))),
        ),
        "drop" => (
            json!({"User": {"id": 82001}, "Moment": {"userId": 82001, "@drop": true}}),
            None,
        ),
        "from@" => (
            json!({"User": {"@from@": {"from": "User", "User": {"@column": "id,name"}}, "id": 82001}}),
            None,
        ),
        "method" => (
            user("@method", json!("GET")),
            Some(user("@method", json!("POST"))),
        ),
        "database" => (
            user("@database", json!(database)),
            Some(user("@database", json!("ORACLE"))),
        ),
        "schema" => (
            user("@schema", json!(schema)),
            Some(user("@schema", json!("elsewhere"))),
        ),
        "cache" => (
            user("@cache", json!(0)),
            Some(user("@cache", json!("SOMETIMES"))),
        ),
        "try" => (user("@try", json!(false)), Some(user("@try", json!(true)))),
        refused => (
            json!({"User": {"id": 82001}}),
            Some(user(&format!("@{refused}"), json!("x"))),
        ),
    }
}

/// The schema `@schema` may name: SQLite's `main`, PostgreSQL's `public`, MariaDB's database.
fn served_schema(engine: Engine, test: &str) -> String {
    match engine {
        Engine::Sqlite => "main".into(),
        Engine::Postgres => "public".into(),
        _ => format!("apijet_it_{test}"),
    }
}

fn root_sample(engine: Engine, name: &str) -> (Value, Option<Value>) {
    let base = |k: &str, v: Value| json!({"User": {"id": 82001}, k: v});
    let database = match engine {
        Engine::Sqlite => "SQLITE",
        Engine::Postgres => "POSTGRESQL",
        _ => "MARIADB",
    };
    match name {
        "role" => (base("@role", json!("UNKNOWN")), None),
        "explain" => (
            base("@explain", json!(true)),
            Some(base("@explain", json!("yes"))),
        ),
        "database" => (
            base("@database", json!(database)),
            Some(base("@database", json!("DB2"))),
        ),
        "schema" => (
            base("@schema", json!(served_schema(engine, "key_audit"))),
            Some(base("@schema", json!("nowhere"))),
        ),
        "cache" => (base("@cache", json!("RAM")), Some(base("@cache", json!(7)))),
        "get" => (
            base("@get", json!("User")),
            Some(base("@post", json!("User"))),
        ),
        "gets" | "head" | "heads" | "post" | "put" | "delete" => (
            base("@get", json!("User")),
            Some(base(&format!("@{name}"), json!("User"))),
        ),
        refused => (
            base("@role", json!("UNKNOWN")),
            Some(base(&format!("@{refused}"), json!("x"))),
        ),
    }
}

fn refused_naming(r: &Value, key: &str) -> bool {
    (400..500).contains(&code(r)) && r["msg"].as_str().is_some_and(|m| m.contains(key))
}

#[test]
fn every_reserved_key_is_honoured_or_refused_by_name() {
    for (engine, url) in demo_databases("key_audit") {
        let s = Server::start(&url, CONFIG);
        let lists: [(&[(&str, Treatment)], bool); 2] =
            [(TABLE_KEYWORDS, true), (ROOT_KEYWORDS, false)];
        for (list, in_table) in lists {
            for (name, treatment) in list {
                let key = format!("@{name}");
                let (good, bad) = if in_table {
                    table_sample(engine, name)
                } else {
                    root_sample(engine, name)
                };
                if *treatment != Treatment::Refused {
                    let r = s.post_json("/get", &good);
                    assert_eq!(code(&r), 200, "{engine}: {key} honoured: {good} → {r}");
                    // `@explain` answers under its own name; every other key must not come back.
                    if *name != "explain" {
                        assert!(
                            !r.to_string().contains(&format!("\"{key}\":")),
                            "{engine}: {key} echoed: {r}"
                        );
                    }
                }
                if *treatment != Treatment::Honoured || bad.is_some() {
                    let bad = bad.unwrap_or_else(|| panic!("{key}: add a refused sample"));
                    let r = s.post_json("/get", &bad);
                    let named = match *name {
                        "raw" => "id>",
                        "null" => "@null",
                        "get" => "@post",
                        _ => key.as_str(),
                    };
                    assert!(
                        refused_naming(&r, named),
                        "{engine}: {key} refused by name: {bad} → {r}"
                    );
                }
            }
        }
        for custom in ["@x", "@position", "@limit", "@whatever"] {
            let r = s.post_json("/get", &json!({"User": {"id": 82001, custom: 1}}));
            assert_eq!(r["User"][custom], 1, "{engine}: {custom} echoed: {r}");
            let r = s.post_json("/get", &json!({"User": {"id": 82001}, custom: 1}));
            assert_eq!(r[custom], 1, "{engine}: root {custom} echoed: {r}");
            let r = s.post_json("/get", &json!({"User": {"id": 82001}, custom: {"a": 1}}));
            assert_eq!(
                r[custom]["a"], 1,
                "{engine}: root {custom} object echoed: {r}"
            );
            let r = s.post_json(
                "/get",
                &json!({"[]": {"count": 2, custom: 1, "User": {"@column": "id"}}}),
            );
            let items = r["[]"].as_array().cloned().unwrap_or_default();
            assert_eq!(items.len(), 2, "{engine}: {custom} in an array item: {r}");
            assert!(
                items
                    .iter()
                    .all(|i| i[custom] == 1 && i["User"]["id"].is_number()),
                "{engine}: {custom} in an array item: {r}"
            );
        }
        for typo in ["@colum", "@Order", "@explian", "@grup"] {
            let r = s.post_json("/get", &json!({"User": {"id": 82001, typo: "id"}}));
            assert!(refused_naming(&r, typo), "{engine}: {typo}: {r}");
            let r = s.post_json("/get", &json!({"User": {"id": 82001}, typo: "id"}));
            assert!(refused_naming(&r, typo), "{engine}: root {typo}: {r}");
        }
    }
}

#[test]
fn every_condition_key_form_and_join_form_is_honoured_or_refused_by_name() {
    let forms: Vec<(&str, Value)> = vec![
        ("id", json!(82001)),
        ("id!", json!(82001)),
        ("id{}", json!([82001, 82002])),
        ("id!{}", json!([82001])),
        ("id{}", json!(">=82001,<=82002")),
        ("id&{}", json!(">=82001,<=82002")),
        ("id|{}", json!("<82001,>82002")),
        ("id>", json!(82000)),
        ("id>=", json!(82001)),
        ("id<", json!(82002)),
        ("id<=", json!(82001)),
        ("id%", json!("82000,82002")),
        ("name$", json!("Ad%")),
        ("name%$", json!("Ad")),
        ("name~", json!("^A")),
        ("name*~", json!("^a")),
        ("contactIdList<>", json!(82002)),
        (
            "id}{@",
            json!({"from": "Moment", "Moment": {"userId": 82001}}),
        ),
        ("id+", json!(1)),
        ("id-", json!(1)),
    ];
    let joins = ["&", "<", ">", "|", "!", "^", "(", ")", "@", "*", "~", ""];
    for (engine, url) in demo_databases("key_forms") {
        let s = Server::start(&url, CONFIG);
        for (key, value) in &forms {
            let body = json!({"User": {key.to_string(): value, "@column": "id"}});
            let r = s.post_json("/get", &body);
            assert!(
                code(&r) == 200 || refused_naming(&r, key.trim_end_matches(['@', '+', '-'])),
                "{engine}: {key}: {body} → {r}"
            );
            if key.contains(|c: char| !c.is_ascii_alphanumeric()) {
                assert!(
                    !r.to_string().contains(&format!("\"{key}\":")),
                    "{engine}: {key} echoed: {r}"
                );
            }
        }
        for j in joins {
            let spec = format!("{j}/User/id@");
            let body = json!({"[]": {"count": 2, "join": spec, "Moment": {"@column": "id,userId"},
                "User": {"id@": "/Moment/userId", "@column": "id"}}});
            let r = s.post_json("/get", &body);
            assert!(
                code(&r) == 200 || refused_naming(&r, "join"),
                "{engine}: join {spec}: {r}"
            );
        }
    }
}
