//! Issue 9, first half: requests that used to answer 200 with wrong rows, on every engine —
//! one-to-many SQL joins, joins inside subqueries, the ON object's clauses, APP JOIN into a
//! sub-array, join specs without a type, `@raw` from the operator's allow-list, and stored
//! procedures.

use serde_json::{json, Value};
use std::collections::BTreeSet;

use crate::support::{code, demo_databases, Engine, Server};

const CONFIG: &str = "debug = true\nraw_sql = [\"1000 + 40\"]\nprocedures = [\"moments_of\"]\n";

fn get(s: &Server, body: Value) -> Value {
    s.post_json("/get", &body)
}

fn ids(items: &Value, table: &str) -> Vec<i64> {
    items
        .as_array()
        .map(|a| a.iter().filter_map(|i| i[table]["id"].as_i64()).collect())
        .unwrap_or_default()
}

#[test]
fn one_to_many_joins_answer_one_item_per_pair() {
    for (engine, url) in demo_databases("pj_pairs") {
        let s = Server::start(&url, CONFIG);
        let expected: BTreeSet<i64> = get(
            &s,
            json!({"Comment[]": {"count": 100, "Comment": {"momentId": 1001, "@column": "id"}}}),
        )["Comment[]"]
            .as_array()
            .expect("comments of 1001")
            .iter()
            .filter_map(|c| c["id"].as_i64())
            .collect();
        assert!(
            expected.len() > 1,
            "{engine}: moment 1001 has several comments"
        );
        let r = get(
            &s,
            json!({"[]": {"count": 20, "join": "&/User/id@,</Comment/momentId@",
                "Moment": {"id": 1001, "@column": "id,userId"},
                "User": {"id@": "/Moment/userId", "@column": "id,name"},
                "Comment": {"momentId@": "/Moment/id", "@column": "id,momentId"}}}),
        );
        assert_eq!(code(&r), 200, "{engine}: {r}");
        let got: Vec<i64> = ids(&r["[]"], "Comment");
        assert_eq!(
            got.iter().copied().collect::<BTreeSet<i64>>(),
            expected,
            "{engine}: each item carries its own comment: {r}"
        );
        assert_eq!(
            got.len(),
            expected.len(),
            "{engine}: one item per pair: {r}"
        );
        for item in r["[]"].as_array().expect("items") {
            assert_eq!(item["Comment"]["momentId"], 1001, "{engine}: {item}");
            assert_eq!(
                item["User"]["id"], item["Moment"]["userId"],
                "{engine}: {item}"
            );
        }
    }
}

#[test]
fn joins_in_subqueries_and_on_objects_are_honoured() {
    for (engine, url) in demo_databases("pj_sub") {
        let s = Server::start(&url, CONFIG);
        // Moments with a comment by Ada, through a join inside the subquery.
        let r = get(
            &s,
            json!({"[]": {"count": 100, "Moment": {"@column": "id",
                "id{}@": {"from": "Comment", "join": "&/User/id@",
                    "Comment": {"@column": "momentId"},
                    "User": {"id@": "/Comment/userId", "name": "Ada"}}}}}),
        );
        assert_eq!(code(&r), 200, "{engine}: {r}");
        let moments = ids(&r["[]"], "Moment");
        let by_ada: BTreeSet<i64> = get(
            &s,
            json!({"Comment[]": {"count": 100, "Comment": {"userId": 82001, "@column": "momentId"}}}),
        )["Comment[]"]
            .as_array()
            .expect("Ada's comments")
            .iter()
            .filter_map(|c| c["momentId"].as_i64())
            .collect();
        assert!(!moments.is_empty(), "{engine}: {r}");
        assert_eq!(
            moments.iter().copied().collect::<BTreeSet<i64>>(),
            by_ada,
            "{engine}: the vice's condition narrows the subquery: {r}"
        );

        // The ON object's @group groups the joined statement.
        let r = get(
            &s,
            json!({"[]": {"count": 100, "join": {"&/User/id@": {"@group": "id"}},
                "Moment": {"@column": "userId;count(id):n", "@group": "userId"},
                "User": {"id@": "/Moment/userId", "@column": "id,name"}}}),
        );
        assert_eq!(code(&r), 200, "{engine}: {r}");
        let items = r["[]"].as_array().expect("items");
        let users: BTreeSet<i64> = items
            .iter()
            .filter_map(|i| i["User"]["id"].as_i64())
            .collect();
        assert_eq!(users.len(), items.len(), "{engine}: one row per user: {r}");
        let ada = items
            .iter()
            .find(|i| i["User"]["id"] == 82001)
            .expect("Ada's group");
        let total = s.post_json("/head", &json!({"Moment": {"userId": 82001}}));

        // The ON object's @order orders the joined statement by the vice's column.
        let r = get(
            &s,
            json!({"[]": {"count": 10, "join": {"&/User/id@": {"@order": "name-"}},
                "Moment": {"@column": "id,userId", "@explain": true},
                "User": {"id@": "/Moment/userId", "@column": "id,name"}}}),
        );
        assert_eq!(code(&r), 200, "{engine}: {r}");
        let sql = r["[]"][0]["Moment"]["@explain"]["sql"]
            .as_str()
            .unwrap_or_default();
        let order = sql.split("ORDER BY").nth(1).unwrap_or_default();
        assert!(
            order.contains("User") && order.contains("name") && order.contains("DESC"),
            "{engine}: {sql}"
        );
        assert_eq!(
            ada["Moment"]["n"], total["Moment"]["count"],
            "{engine}: {r}"
        );
    }
}

/// A joined object's answer is its part of the joined row, grouped with the joined statement:
/// its `count(1)` counts the joined rows of its group, never its own rows read again for each
/// item (which answered 1). The ON object's `@group`, `@having` and `@order` replace the joined
/// object's own; its conditions join the ON clause. The expectation is computed from plain
/// single-table reads.
#[test]
fn a_grouped_joins_objects_answer_from_the_joined_rows() {
    for (engine, url) in demo_databases("pj_grouped") {
        let s = Server::start(&url, CONFIG);
        let named: Vec<i64> = get(
            &s,
            json!({"User[]": {"count": 100, "User": {"name$": "%a%", "@column": "id", "@order": "id+"}}}),
        )["User[]"]
            .as_array()
            .expect("users")
            .iter()
            .filter_map(|u| u["id"].as_i64())
            .filter(|id| id % 7 != 0)
            .collect();
        let per_user = get(
            &s,
            json!({"Comment[]": {"count": 100, "Comment": {"@column": "userId;count(1):n", "@group": "userId"}}}),
        );
        let count_of = |id: i64| {
            per_user["Comment[]"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|c| c["userId"] == id)
                .and_then(|c| c["n"].as_i64())
        };
        let expected: Vec<(i64, i64)> = named
            .iter()
            .filter_map(|&id| Some((id, count_of(id)?)))
            .take(3)
            .collect();
        assert_eq!(
            expected.len(),
            3,
            "{engine}: the demo has such users: {per_user}"
        );
        assert!(
            expected.iter().any(|(_, n)| *n > 1),
            "{engine}: some user has several comments: {expected:?}"
        );
        let r = get(
            &s,
            json!({"[]": {"count": 3,
                "join": {"&/User": {"name$": "%a%", "@group": "id", "@having": "(id)%7!=0", "@order": "id+"}},
                "Comment": {"@column": "userId"},
                "User": {"id@": "/Comment/userId", "@column": "id;count(1)", "@group": "id",
                         "@having": "(id)%5>1", "@order": "id-"}}}),
        );
        assert_eq!(code(&r), 200, "{engine}: {r}");
        let got: Vec<(i64, i64)> = r["[]"]
            .as_array()
            .expect("items")
            .iter()
            .map(|i| {
                assert_eq!(i["Comment"]["userId"], i["User"]["id"], "{engine}: {i}");
                (
                    i["User"]["id"].as_i64().unwrap_or_default(),
                    i["User"]["count(1)"].as_i64().unwrap_or_default(),
                )
            })
            .collect();
        assert_eq!(got, expected, "{engine}: {r}");
    }
}

#[test]
fn app_join_into_a_sub_array_and_untyped_joins() {
    for (engine, url) in demo_databases("pj_app") {
        let s = Server::start(&url, CONFIG);
        let plain = json!({"[]": {"count": 3, "Moment": {"@column": "id", "@order": "id+"},
            "Comment[]": {"count": 2, "Comment": {"momentId@": "[]/Moment/id", "@column": "id,momentId"}}}});
        let mut joined = plain.clone();
        joined["[]"]["join"] = json!("@/Comment[]/Comment/momentId@");
        let (a, b) = (get(&s, plain), get(&s, joined));
        assert_eq!(code(&b), 200, "{engine}: {b}");
        assert_eq!(
            a["[]"], b["[]"],
            "{engine}: the APP JOIN answers the nested rows"
        );
        assert!(
            b["[]"][0]["Comment[]"]
                .as_array()
                .is_some_and(|c| !c.is_empty()),
            "{b}"
        );

        let refused = get(
            &s,
            json!({"[]": {"count": 3, "join": "@/Comment[]/Comment/momentId@", "Moment": {"@column": "id"},
                "Comment[]": {"count": 2, "page": 1, "Comment": {"momentId@": "[]/Moment/id"}}}}),
        );
        assert_eq!(code(&refused), 406, "{engine}: {refused}");
        assert!(
            refused["msg"].as_str().unwrap_or("").contains("page"),
            "{refused}"
        );

        let r = get(
            &s,
            json!({"[]": {"count": 3, "join": "/User", "Moment": {"@column": "id,userId"},
                "User": {"id@": "/Moment/userId"}}}),
        );
        assert_eq!(code(&r), 406, "{engine}: {r}");
        assert!(
            r["msg"]
                .as_str()
                .unwrap_or("")
                .contains("'/User' has no join type"),
            "{r}"
        );
    }
}

#[test]
fn raw_values_come_only_from_the_allow_list() {
    for (engine, url) in demo_databases("pj_raw") {
        let s = Server::start(&url, CONFIG);
        let r = get(
            &s,
            json!({"Comment[]": {"count": 100, "Comment": {"momentId>": "1000 + 40",
                "@raw": "momentId>", "@column": "id,momentId"}}}),
        );
        assert_eq!(code(&r), 200, "{engine}: {r}");
        let rows = r["Comment[]"].as_array().expect("rows");
        assert!(!rows.is_empty(), "{engine}: {r}");
        assert!(
            rows.iter()
                .all(|c| c["momentId"].as_i64().is_some_and(|m| m > 1040)),
            "{engine}: the fragment is SQL, not a string: {r}"
        );
        let r = get(
            &s,
            json!({"Comment": {"momentId>": "to.momentId", "@raw": "momentId>"}}),
        );
        assert_eq!(code(&r), 406, "{engine}: {r}");
        assert!(r["msg"].as_str().unwrap_or("").contains("momentId>"), "{r}");
        let r = get(&s, json!({"Comment": {"momentId>": 0, "@raw": "content"}}));
        assert_eq!(
            code(&r),
            406,
            "{engine}: a @raw key that is no condition: {r}"
        );
    }
}

fn create_procedure(engine: Engine, url: &str) {
    let db = url.rsplit('/').next().unwrap_or_default();
    let sql = match engine {
        Engine::Postgres => {
            "CREATE PROCEDURE moments_of(INOUT uid bigint, INOUT n bigint DEFAULT NULL) \
             LANGUAGE plpgsql AS $$ BEGIN SELECT count(*) INTO n FROM \"Moment\" \
             WHERE \"userId\" = uid; END $$;"
        }
        _ => {
            "CREATE PROCEDURE moments_of(IN uid BIGINT) SELECT count(*) AS n FROM Moment \
             WHERE userId = uid"
        }
    };
    engine
        .cli(db, sql)
        .unwrap_or_else(|e| panic!("creating the procedure on {engine}: {e}"));
}

#[test]
fn stored_procedures_are_called_or_refused_by_name() {
    for (engine, url) in demo_databases("pj_proc") {
        if engine != Engine::Sqlite {
            create_procedure(engine, &url);
        }
        let s = Server::start(&url, CONFIG);
        let total =
            s.post_json("/head", &json!({"Moment": {"userId": 82001}}))["Moment"]["count"].clone();
        let r = get(
            &s,
            json!({"User": {"id": 82001, "@column": "id", "@m()": "moments_of(id)"}}),
        );
        if engine == Engine::Sqlite {
            assert_eq!(code(&r), 406, "{r}");
            assert!(r["msg"].as_str().unwrap_or("").contains("@m()"), "{r}");
        } else {
            assert_eq!(code(&r), 200, "{engine}: {r}");
            assert_eq!(r["User"]["m"]["count"], -1, "{engine}: {r}");
            assert_eq!(r["User"]["m"]["update"], false, "{engine}: {r}");
            assert_eq!(r["User"]["m"]["list"][0]["n"], total, "{engine}: {r}");
        }
        let r = get(
            &s,
            json!({"User": {"id": 82001, "@m()": "drop_everything(id)"}}),
        );
        assert_eq!(code(&r), 403, "{engine}: {r}");
        assert!(
            r["msg"].as_str().unwrap_or("").contains("drop_everything"),
            "{r}"
        );
    }
}
