//! The requests APIAuto and the demo's stored cases send, answered as the Java reference
//! answers them (`tests/it/apiauto.rs` drives APIAuto itself): keys the reference ignores are
//! ignored (JSON nulls, `@null` in a read, arrays with nothing to list), custom `@` keys are
//! echoed and fed to functions, `@raw` marks `@column` and `@having` items of `raw_sql`,
//! `any_value`, the catalogue views `Table` and `Column`, the `Function` docs, a token alone
//! in `Authorization`, login `defaults` naming another schema, and the corpus forms the
//! reference honours. On apijet's demo dataset, on every engine; the writes of APIAuto's own
//! tables on the APIJSON demo database (MariaDB and PostgreSQL).

use crate::support::{
    apijson_demo_databases, claim, code, demo_databases, load_demo_db, post, with_database, Engine,
    Server,
};
use serde_json::{json, Value};

const CONFIG: &str = "debug = true\n\
    raw_sql = { \"doubleCount\" = \"count(*) * 2 AS doubleCount\", \"count(*)>1\" = \"\" }\n";

fn get(s: &Server, body: Value) -> Value {
    s.post_json("/get", &body)
}

fn ok(engine: Engine, r: &Value) {
    assert_eq!(code(r), 200, "{engine}: {r}");
}

/// The `Access` rows of the reference's demo that serve the catalogue (debug only, as there).
pub(crate) fn add_catalog_access(engine: Engine, url: &str) {
    let q = |name: &str| match engine {
        Engine::Mariadb => format!("`{name}`"),
        _ => format!("\"{name}\""),
    };
    let roles = "'[\"UNKNOWN\",\"LOGIN\"]'";
    let row = |id: i64, name: &str, alias: &str| {
        format!(
            "({id}, 1, '{name}', '{alias}', {roles}, {roles}, '[]', '[]', '[]', '[]', '[]', \
             CURRENT_TIMESTAMP)"
        )
    };
    let sql = format!(
        "INSERT INTO {} (id, debug, name, alias, {}, head, gets, heads, post, put, {}, date) \
         VALUES {}, {}",
        q("Access"),
        q("get"),
        q("delete"),
        row(9002, "tables", "Table"),
        row(9003, "columns", "Column")
    );
    if engine == Engine::Sqlite {
        let conn = rusqlite::Connection::open(url.trim_start_matches("sqlite://"))
            .expect("open the SQLite demo");
        conn.execute(&sql, []).expect("Access rows");
        return;
    }
    let db = url.rsplit('/').next().unwrap_or_default();
    engine.cli(db, &sql).unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn keys_the_reference_ignores_are_ignored_and_custom_keys_echoed_on_every_engine() {
    for (engine, url) in demo_databases("aa_keys") {
        let s = Server::start(&url, CONFIG);
        // JSON nulls ask for nothing, wherever the reference parses an object: the first key
        // of [] included (APIAuto's test-case list), and @null in a read.
        let r = get(
            &s,
            json!({"tag": null, "@role": null, "x": null,
                   "[]": {"count": 2, "page": null, "join": null, "Chain": null,
                          "Moment": {"id@": null, "content$": null, "@order": "id+", "@column": "id",
                                     "@combine": null, "@null": "content"}},
                   "sql@": {"from": null, "range": null, "with": true,
                            "User": {"id": null, "@column": "id", "name$": null}}}),
        );
        ok(engine, &r);
        let items = r["[]"].as_array().cloned().unwrap_or_default();
        assert_eq!(items.len(), 2, "{engine}: {r}");
        assert!(items[0]["Moment"]["id"].is_number(), "{engine}: {r}");
        assert!(
            r.get("x").is_none() && r.get("tag").is_none(),
            "{engine}: {r}"
        );
        // An array with nothing to list is skipped, first or not, as APIAuto's random
        // configs send it.
        let r = get(
            &s,
            json!({"[]": {"count": 5, "page": 3}, "User": {"id": 82001, "@column": "id",
                   "[]": {"count": 2}}}),
        );
        ok(engine, &r);
        assert_eq!(r["User"], json!({"id": 82001}), "{engine}: {r}");
        assert!(r.get("[]").is_none(), "{engine}: {r}");

        // Custom @ keys: echoed after the columns, at the root and in array items, and read
        // by functions of the same object (the reference's customMap).
        let r = get(
            &s,
            json!({"User": {"id": 82001, "@column": "id,contactIdList", "@value": 82002,
                            "@position": 0, "c()": "isContain(contactIdList,@value)",
                            "first()": "getFromArray(contactIdList,@position)"},
                   "@x": {"a": 1}}),
        );
        ok(engine, &r);
        let user = &r["User"];
        assert_eq!(user["@value"], 82002, "{engine}: {r}");
        assert_eq!(user["@position"], 0, "{engine}: {r}");
        assert_eq!(user["c"], true, "{engine}: {r}");
        assert_eq!(
            user["first"], user["contactIdList"][0],
            "{engine}: the function read @position: {r}"
        );
        let keys: Vec<&String> = user
            .as_object()
            .map(|o| o.keys().collect())
            .unwrap_or_default();
        assert_eq!(
            keys,
            ["id", "contactIdList", "@value", "@position", "c", "first"],
            "{engine}: custom keys after the columns, functions after them: {r}"
        );
        assert_eq!(r["@x"], json!({"a": 1}), "{engine}: {r}");
        // A custom key that looks like a misspelt keyword is refused by name.
        for typo in ["@colum", "@Order", "@havin"] {
            let r = get(&s, json!({"User": {"id": 82001, typo: "id"}}));
            assert_eq!(code(&r), 406, "{engine}: {typo}: {r}");
            assert!(r["msg"].as_str().is_some_and(|m| m.contains(typo)), "{r}");
        }
    }
}

#[test]
fn the_corpus_forms_the_reference_honours_are_answered_on_every_engine() {
    for (engine, url) in demo_databases("aa_forms") {
        let s = Server::start(&url, CONFIG);
        // any_value per group (MariaDB has none; each engine answers one of the group's).
        let r = get(
            &s,
            json!({"Moment[]": {"count": 0, "Moment": {"@column": "userId;any_value(id):one;count(*):n",
                   "@group": "userId", "@raw": "@column", "userId{}": [82001, 82002]}}}),
        );
        ok(engine, &r);
        let rows = r["Moment[]"].as_array().cloned().unwrap_or_default();
        assert_eq!(rows.len(), 2, "{engine}: {r}");
        for row in &rows {
            let one = row["one"].as_i64().unwrap_or(0);
            let owner = get(&s, json!({"Moment": {"id": one, "@column": "userId"}}));
            assert_eq!(owner["Moment"]["userId"], row["userId"], "{engine}: {r}");
        }
        // group_concat of several values per row, back-quoted columns, an empty @column, a
        // CASE with an unquoted result and a numeric text against a number column.
        let r = get(
            &s,
            json!({"Moment[]": {"count": 0, "Moment": {
                "@column": "userId;group_concat(DISTINCT '+',`id`):ids", "@group": "userId",
                "userId": 82001}}}),
        );
        ok(engine, &r);
        let ids = r["Moment[]"][0]["ids"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert!(
            ids.starts_with('+') && ids.split(',').all(|i| i.starts_with('+')),
            "{engine}: {r}"
        );
        let r = get(
            &s,
            json!({"User": {"id": 82001, "@column": "`id`,name:n;(CASE `sex` WHEN 0 THEN 'm' WHEN '1' THEN f ELSE 'x' END):s"}}),
        );
        ok(engine, &r);
        assert_eq!(r["User"]["id"], 82001, "{engine}: {r}");
        assert!(
            matches!(r["User"]["s"].as_str(), Some("m" | "f")),
            "{engine}: {r}"
        );
        let all = get(&s, json!({"User": {"id": 82001}}));
        let empty = get(&s, json!({"User": {"id": 82001, "@column": ""}}));
        assert_eq!(
            all,
            {
                let mut e = empty.clone();
                e["time"] = all["time"].clone();
                e
            },
            "{engine}: @column \"\" is every column"
        );

        // @raw marks @column and @having items of raw_sql (the reference's RAW_MAP).
        let r = get(
            &s,
            json!({"Comment[]": {"count": 0, "Comment": {"@column": "momentId;doubleCount;count(*):n",
                   "@group": "momentId", "@having": "count(*)>1", "@raw": "@column,@having"}}}),
        );
        ok(engine, &r);
        let rows = r["Comment[]"].as_array().cloned().unwrap_or_default();
        assert!(!rows.is_empty(), "{engine}: {r}");
        for row in &rows {
            let n = row["n"].as_i64().unwrap_or(0);
            assert!(n > 1, "{engine}: the raw @having: {r}");
            assert_eq!(
                row["doubleCount"],
                2 * n,
                "{engine}: the raw @column item: {r}"
            );
        }
        // A raw item not on the list is parsed as always; a raw condition value not on it is
        // refused.
        let r = get(
            &s,
            json!({"User": {"id": 82001, "@column": "length(name):len", "@raw": "@column"}}),
        );
        ok(engine, &r);
        let r = get(&s, json!({"User": {"id>": "0 OR 1=1", "@raw": "id>"}}));
        assert_eq!(code(&r), 406, "{engine}: {r}");
    }
}

#[test]
fn the_catalogue_views_and_function_docs_answer_in_debug_mode_on_every_engine() {
    for (engine, url) in demo_databases("aa_catalog") {
        add_catalog_access(engine, &url);
        let schema = match engine {
            Engine::Sqlite => "main".to_string(),
            Engine::Postgres => "public".to_string(),
            _ => "apijet_it_aa_catalog".to_string(),
        };
        let s = Server::start(&url, CONFIG);
        // APIAuto's data dictionary in one request: tables named by Access, their columns.
        let r = get(
            &s,
            json!({"sql@": {"from": "Access", "Access": {"@column": "name"}},
                   "[]": {"count": 0,
                          "Table": {"table_schema{}": [schema], "table_type": "BASE TABLE",
                                    "table_name{}@": "sql", "@order": "table_name+",
                                    "@column": "table_name:table_name,table_comment:table_comment",
                                    "@key": "table_name_table_schema:(table_name,table_schema)"},
                          "[]": {"count": 0,
                                 "Column": {"table_schema{}": [schema], "table_name@": "[]/Table/table_name",
                                            "@column": "column_name:column_name,column_type:column_type,is_nullable:is_nullable"}}},
                   "Function[]": {"count": 0, "Function": {"@column": "name,arguments,demo,detail,detail:rawDetail",
                                  "demo()": "getFunctionDemo()", "detail()": "getFunctionDetail()"}}}),
        );
        ok(engine, &r);
        let tables = r["[]"].as_array().cloned().unwrap_or_default();
        let user = tables
            .iter()
            .find(|t| t["Table"]["table_name"] == "apijson_user")
            .unwrap_or_else(|| panic!("{engine}: apijson_user listed: {r}"));
        let columns: Vec<&str> = user["[]"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|c| c["Column"]["column_name"].as_str())
                    .collect()
            })
            .unwrap_or_default();
        assert!(
            ["id", "name", "contactIdList"]
                .iter()
                .all(|c| columns.contains(c)),
            "{engine}: {columns:?}"
        );
        assert!(
            tables
                .iter()
                .all(|t| t["Table"]["table_name"] != "sqlite_sequence"),
            "{engine}: only tables Access names"
        );
        let f = &r["Function[]"][0];
        let name = f["name"].as_str().unwrap_or_default();
        assert!(
            f["demo"]["result()"]
                .as_str()
                .is_some_and(|c| c.starts_with(name)),
            "{engine}: {f}"
        );
        assert!(
            f["detail"]
                .as_str()
                .is_some_and(|d| d.starts_with(&format!("{name}(")))
                && f["detail"].as_str() != f["rawDetail"].as_str(),
            "{engine}: {f}"
        );
        // Outside debug mode the catalogue is not reachable.
        let quiet = Server::start(&url, "");
        let r = get(&quiet, json!({"Table": {"table_name": "apijson_user"}}));
        assert_ne!(code(&r), 200, "{engine}: {r}");
    }
}

#[test]
fn logins_take_a_bare_token_and_a_schema_they_cannot_read_on_every_engine() {
    for (engine, url) in demo_databases("aa_login") {
        let s = Server::start(&url, "");
        let r = post(
            &mut s.client(),
            "/login",
            &json!({"phone": "13000082001", "password": "123456"}),
        );
        let token = r["token"].as_str().expect("a token").to_string();
        let private = json!({"tag": "Privacy", "Privacy": {"id": 82001}});
        for (header, logged_in) in [
            (token.clone(), true),
            (format!("Bearer {token}"), true),
            (format!("{token}x"), false),
            ("Basic YWRtaW46YWRtaW4=".to_string(), false),
        ] {
            let r = s
                .client()
                .request(
                    "POST",
                    "/gets",
                    &[("Authorization", &header)],
                    private.to_string().as_bytes(),
                )
                .and_then(|r| r.json())
                .expect("answer");
            assert_eq!(code(&r) == 200, logged_in, "{engine}: {header:.20}: {r}");
        }
        // defaults.@schema naming a schema this server does not serve: the login is accepted
        // and carries it; requests without their own @schema are refused naming it.
        let mut c = s.client();
        let r = post(
            &mut c,
            "/login",
            &json!({"phone": "13000082001", "password": "123456", "defaults": {"@schema": "sys"}}),
        );
        assert_eq!(code(&r), 200, "{engine}: {r}");
        let r = post(&mut c, "/get", &json!({"User": {"id": 82001}}));
        assert_eq!(code(&r), 406, "{engine}: {r}");
        assert!(
            r["msg"].as_str().is_some_and(|m| m.contains("sys")),
            "{engine}: {r}"
        );
    }
}

/// APIAuto's own tables on the APIJSON demo database: its random config upload resolves the
/// id written earlier in the same request (`"randomId@":"/Random/id"` of the demo's
/// `POST Random` structure), and its project selector reads a joined table's column through
/// `@from@`. The demo's case "JOIN ON 字段、条件、分组、聚合、排序等" answers what the reference
/// 8.2.0 answers: the ON object's `@group`, `@having` and `@order` apply to the joined
/// statement, and the joined object's `count(1)` counts the joined rows of each group.
#[test]
fn apiauto_writes_and_joined_subqueries_on_the_apijson_demo() {
    for (engine, url) in apijson_demo_databases("aa_demo") {
        let s = Server::start(&url, "debug = true\n");
        let r = get(
            &s,
            json!({"[]": {"count": 3,
                "join": {"&/User": {"name$": "%a%", "@group": "id", "@having": "(id)%7!=0", "@order": "id+"}},
                "Comment": {"@column": "userId"},
                "User": {"id@": "/Comment/userId", "@column": "id;count(1)", "@group": "id",
                         "@having": "(id)%5>1", "@order": "id-"}}}),
        );
        assert_eq!(code(&r), 200, "{engine:?}: {r}");
        let counts: Vec<i64> = r["[]"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|i| i["User"]["count(1)"].as_i64())
            .collect();
        assert_eq!(
            counts,
            [15, 30, 2],
            "{engine:?}: the reference's answer: {r}"
        );
        let mut c = crate::support::ada(&s);
        let r = post(
            &mut c,
            "/post",
            &json!({"format": false,
                    "Random": {"documentId": 1546414192830i64, "count": 1, "name": "apijet", "config": "User/id: 1"},
                    "TestRecord": {"host": "http://test", "response": "{}"},
                    "tag": "Random"}),
        );
        assert_eq!(code(&r), 200, "{engine:?}: {r}");
        let (random, record) = (&r["Random"]["id"], &r["TestRecord"]["id"]);
        let r = get(
            &s,
            json!({"TestRecord": {"id": record, "@column": "randomId,documentId"}, "@role": "LOGIN"}),
        );
        let r = if code(&r) == 200 {
            r
        } else {
            post(
                &mut c,
                "/get",
                &json!({"TestRecord": {"id": record, "@column": "randomId,documentId"}, "@role": "LOGIN"}),
            )
        };
        assert_eq!(r["TestRecord"]["randomId"], *random, "{engine:?}: {r}");
        assert_eq!(
            r["TestRecord"]["documentId"], 1546414192830i64,
            "{engine:?}: {r}"
        );

        let r = post(
            &mut c,
            "/get",
            &json!({"TestRecord[]": {"count": 0, "TestRecord": {"@column": "DISTINCT host,project",
                "@from@": {"join": "&/Document",
                           "TestRecord": {"@column": "host,documentId", "@group": "host,documentId",
                                          "host{}": "length(host)>2"},
                           "Document": {"id@": "/TestRecord/documentId",
                                        "@column": "ifnull(project,''):project", "@group": "project"}}}},
                    "@role": "LOGIN"}),
        );
        assert_eq!(code(&r), 200, "{engine:?}: {r}");
        let hosts = r["TestRecord[]"].as_array().cloned().unwrap_or_default();
        assert!(
            hosts
                .iter()
                .any(|h| h["project"] == "APIJSON.cn" && h["host"].is_string()),
            "{engine:?}: {r}"
        );
    }
}

/// Adds `"Zz": null` first and `"zz": null`, `"@zz": null` last to every object the request
/// grammar parses (the root, tables, arrays and their items, subqueries), leaving keyword
/// values (`@having` objects, `join` objects) alone.
fn with_null_keys(v: &Value) -> Value {
    let Value::Object(map) = v else {
        return v.clone();
    };
    let mut out = serde_json::Map::new();
    out.insert("Zz".into(), Value::Null);
    for (k, child) in map {
        let parsed = k.ends_with("[]")
            || k.ends_with('@')
            || k.starts_with(|c: char| c.is_ascii_uppercase());
        let child = if parsed && k != "@from@" && !k.starts_with('@') {
            with_null_keys(child)
        } else {
            child.clone()
        };
        out.insert(k.clone(), child);
    }
    out.insert("zz".into(), Value::Null);
    out.insert("@zz".into(), Value::Null);
    Value::Object(out)
}

/// Keys whose value is JSON null ask for nothing: every public read the Java reference was
/// recorded answering (`../shared/apijson/cases-public.json`) answers the same with null keys
/// added to each of its objects, first and last.
#[test]
fn null_keys_change_no_answer_of_the_recorded_reads() {
    let Some(mysql_args) = Engine::Mariadb.client_args() else {
        crate::support::skip("apiauto_requests: APIJET_TEST_MYSQL_URL unset");
        return;
    };
    let Some(admin) = Engine::Mariadb.url() else {
        return;
    };
    let cases_path = crate::support::shared::dir()
        .join("apijson")
        .join("cases-public.json");
    let Ok(text) = std::fs::read_to_string(&cases_path) else {
        crate::support::skip(&format!("{} not found", cases_path.display()));
        return;
    };
    let cases: Value = serde_json::from_str(&text).expect("cases JSON");
    let database = "apijet_aa_nulls";
    claim(database);
    load_demo_db(database, &mysql_args, None)
        .unwrap_or_else(|e| panic!("loading the demo database: {e}"));
    let s = Server::start(&with_database(&admin, database), "debug = true\n");
    let without_time = |mut v: Value| {
        if let Some(o) = v.as_object_mut() {
            o.remove("time");
        }
        v
    };
    let mut checked = 0;
    for case in cases["reference_observed"].as_array().into_iter().flatten() {
        let method = case["method"].as_str().unwrap_or_default();
        if !matches!(method, "/get" | "/head") || !case["login"].is_null() {
            continue;
        }
        let Some(body) = case["request"]
            .as_object()
            .map(|o| Value::Object(o.clone()))
        else {
            continue;
        };
        let plain = without_time(s.post_json(method, &body));
        let nulled = without_time(s.post_json(method, &with_null_keys(&body)));
        // @explain answers carry the statement, which does not change; timings do.
        let text = |v: &Value| v.to_string();
        if text(&plain).contains("@explain") {
            assert_eq!(code(&plain), code(&nulled), "{}: {body}", case["id"]);
        } else {
            assert_eq!(plain, nulled, "{}: {body}", case["id"]);
        }
        checked += 1;
    }
    assert!(checked >= 80, "only {checked} recorded reads");
}
