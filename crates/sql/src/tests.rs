//! Rendering tests: the same planned request rendered for each dialect.

use crate::{render, MySql, Postgres, Sqlite};
use apijet_core::{Method, Role, Value};
use apijet_plan::schema::{ColumnKind, SchemaCache, Table};
use apijet_plan::verify::RequestRules;
use apijet_plan::{Context, PlanOptions, Scope, TablePlan};
use apijet_request::{Node, Request};

fn schema() -> SchemaCache {
    use ColumnKind::*;
    let columns = [
        ("id", Int),
        ("name", Text),
        ("contactIdList", Json),
        ("_password", Text),
    ];
    let mut s = SchemaCache::new();
    s.insert(Table::granted(
        "User",
        "apijson_user",
        &columns,
        &[Role::Unknown, Role::Login],
    ));
    s
}

/// Plans the first table object of `body` as an anonymous GET.
fn table_plan(body: &str) -> Result<TablePlan, apijet_plan::PlanError> {
    let schema = schema();
    let options = PlanOptions::default();
    let req = Request::from_map(apijet_request::parse_body(body.as_bytes()).expect("json"))
        .expect("request");
    let Node::Table(t) = &req.root.members[0].node else {
        panic!("table")
    };
    let rules = RequestRules::default();
    let ctx = Scope::new(Context {
        schema: &schema,
        rules: &rules,
        options: &options,
        method: Method::Get,
        visitor: None,
        trusted: false,
    });
    TablePlan::new(t, &ctx)
}

fn plan(body: &str) -> apijet_plan::query::Select {
    let p = table_plan(body).expect("plan");
    p.select(&[], &mut |_| None)
        .expect("select")
        .expect("exists")
}

#[test]
fn hidden_columns_are_never_selected_and_values_are_bound() {
    let s = plan(r#"{"User":{"id":1,"name$":"%a%"}}"#);
    let st = render(&Postgres, &s);
    assert_eq!(
        st.sql,
        r#"SELECT "User"."id" AS "id", "User"."name" AS "name", "User"."contactIdList" AS "contactIdList" FROM "apijson_user" AS "User" WHERE ("User"."id" = $1 AND "User"."name" ILIKE $2)"#
    );
    assert_eq!(st.binds, [Value::Int(1), Value::Text("%a%".into())]);
}

#[test]
fn each_dialect_spells_regex_and_json_contains_its_own_way() {
    let s = plan(r#"{"User":{"@column":"id","name~":"^a","contactIdList<>":82001}}"#);
    let my = render(&MySql { mariadb: true }, &s).sql;
    assert!(my.contains("`User`.`name` REGEXP BINARY ?"), "{my}");
    assert!(
        my.contains("json_contains(`User`.`contactIdList`, ?)"),
        "{my}"
    );
    let lite = render(&Sqlite, &s).sql;
    assert!(lite.contains(r#"regexp(?1, "User"."name")"#), "{lite}");
    assert!(lite.contains("json_each"), "{lite}");
    let pg = render(&Postgres, &s).sql;
    assert!(pg.contains(r#""User"."name" ~ $1"#), "{pg}");
    assert!(pg.contains("@> jsonb_build_array"), "{pg}");
}

#[test]
fn range_strings_become_bound_comparisons() {
    let s = plan(r#"{"User":{"@column":"id","id{}":">80000,<=90000","name{}":"=null"}}"#);
    let st = render(&MySql { mariadb: true }, &s);
    assert!(
        st.sql.contains("(`User`.`id` > ? OR `User`.`id` <= ?)"),
        "{}",
        st.sql
    );
    assert!(st.sql.contains("`User`.`name` IS NULL"), "{}", st.sql);
    assert_eq!(st.binds, [Value::Int(80000), Value::Int(90000)]);
}

#[test]
fn public_reads_may_not_test_hidden_columns_in_any_spelling() {
    for key in [
        "_password",
        "_password$",
        "_password%$",
        "_password~",
        "_password>",
        "_password{}",
    ] {
        let body = format!(r#"{{"User":{{"id":1,"{key}":"1%"}}}}"#);
        let err = table_plan(&body).expect_err(key);
        assert!(
            matches!(err, apijet_plan::PlanError::Forbidden(ref m) if m.contains(key)),
            "{key}: {err}"
        );
    }
}

#[test]
fn postgres_types_literal_arguments_and_spells_mysql_functions() {
    let s = plan(
        r#"{"User":{"@column":"id;concat(name,'-',id):x;date_format(name,'%Y-%m'):d;locate('a',name):l"}}"#,
    );
    let st = render(&Postgres, &s);
    assert!(
        st.sql
            .contains(r#"concat("User"."name", $1::text, "User"."id") AS "x""#),
        "{}",
        st.sql
    );
    assert!(
        st.sql
            .contains(r#"to_char(CAST("User"."name" AS timestamp), $2::text)"#),
        "{}",
        st.sql
    );
    assert!(
        st.sql.contains(r#"strpos("User"."name", $3::text)"#),
        "{}",
        st.sql
    );
    assert_eq!(st.binds[1], Value::Text("YYYY\"-\"MM".into()));
    let my = render(&MySql { mariadb: true }, &s);
    assert!(
        my.sql.contains("concat(`User`.`name`, ?, `User`.`id`)"),
        "{}",
        my.sql
    );
    assert_eq!(my.binds[1], Value::Text("%Y-%m".into()));
}

#[test]
fn having_without_group_filters_rows_like_mysql() {
    let s = plan(r#"{"User":{"@column":"id","@having":"length(name)>3"}}"#);
    for sql in [render(&Postgres, &s).sql, render(&Sqlite, &s).sql] {
        assert!(sql.contains(" WHERE "), "{sql}");
        assert!(!sql.contains("HAVING"), "{sql}");
    }
    let s = plan(r#"{"User":{"@column":"id;count(id):n","@having":"count(id)>3"}}"#);
    let pg = render(&Postgres, &s).sql;
    assert!(
        pg.contains(r#"(array_agg("User"."id"))[1] AS "id""#),
        "{pg}"
    );
    assert!(pg.contains("HAVING"), "{pg}");
    let lite = render(&Sqlite, &s).sql;
    assert!(lite.contains("GROUP BY (1 = 1) HAVING"), "{lite}");
}

#[test]
fn a_total_order_ends_with_the_key_unless_it_names_it_or_cannot_have_one() {
    let order = |body: &str| {
        let mut s = plan(body);
        let total = s.order_totally_by("id");
        let sql = render(&Postgres, &s).sql;
        (
            total,
            sql.split_once(" ORDER BY ").map(|(_, o)| o.to_string()),
        )
    };
    assert_eq!(
        order(r#"{"User":{}}"#),
        (true, Some(r#""User"."id" ASC"#.into()))
    );
    assert_eq!(
        order(r#"{"User":{"@order":"name-"}}"#),
        (true, Some(r#""User"."name" DESC, "User"."id" ASC"#.into()))
    );
    assert_eq!(
        order(r#"{"User":{"@order":"id-"}}"#),
        (true, Some(r#""User"."id" DESC"#.into()))
    );
    assert!(!order(r#"{"User":{"@order":"rand()"}}"#).0);
    assert!(!order(r#"{"User":{"@column":"name","@group":"name"}}"#).0);
}

/// The plan of `body`'s shape (an anonymous GET) over a list of `slot`'s values.
fn multiplexed(body: &str, slot: usize) -> apijet_plan::read::MultiplexPlan {
    let schema = schema();
    let options = PlanOptions::default();
    let mut req = Request::from_map(apijet_request::parse_body(body.as_bytes()).expect("json"))
        .expect("request");
    apijet_plan::shape::take_values(&mut req, &options.expr).expect("values");
    let rules = RequestRules::default();
    let ctx = Context {
        schema: &schema,
        rules: &rules,
        options: &options,
        method: Method::Get,
        visitor: None,
        trusted: false,
    };
    let plan = apijet_plan::read::ReadPlan::build(&req, &ctx).expect("a plan");
    apijet_plan::read::MultiplexPlan::of(&plan, slot).expect("multiplexed")
}

#[test]
fn a_multiplexed_list_joins_its_values_in_and_numbers_each_keys_rows() {
    use apijet_plan::read::ListKind;
    use apijet_plan::template::Bind;
    let plan = multiplexed(
        r#"{"User[]":{"count":2,"page":1,"User":{"name":"a","@column":"id:name,name:id","@order":"id-"}}}"#,
        0,
    );
    let sqlite = crate::render_multiplexed(&Sqlite, &plan, ListKind::Text);
    assert_eq!(
        sqlite.sql,
        "SELECT \"apijet~rows\".\"apijet~key\" AS \"apijet~key\", \"apijet~rows\".\"name\" AS \"name\", \
         \"apijet~rows\".\"id\" AS \"id\" FROM (SELECT \"apijet~listed\".\"apijet~key\" AS \"apijet~key\", \
         \"User\".\"id\" AS \"name\", \"User\".\"name\" AS \"id\", ROW_NUMBER() OVER (PARTITION BY \
         \"apijet~listed\".\"apijet~key\" ORDER BY \"User\".\"id\" DESC) AS \"apijet~row\" FROM (SELECT \
         \"key\" AS \"apijet~key\", \"value\" AS \"apijet~value\" FROM json_each(?1)) AS \"apijet~listed\" \
         CROSS JOIN \"apijson_user\" AS \"User\" WHERE \"User\".\"name\" = \"apijet~listed\".\"apijet~value\") \
         AS \"apijet~rows\" WHERE \"apijet~row\" > 2 AND \"apijet~row\" <= 4 ORDER BY \"apijet~key\", \"apijet~row\""
    );
    assert_eq!(
        sqlite.binds,
        vec![Bind::Slot(0)],
        "the list is the one bind"
    );
    let pg = crate::render_multiplexed(&Postgres, &plan, ListKind::Int);
    assert!(
        pg.sql
            .contains("jsonb_array_elements_text($1::text::jsonb) WITH ORDINALITY"),
        "{}",
        pg.sql
    );
    // Numbers listed for a text column are typed as the column, as a bound value would be.
    assert!(pg.sql.contains("\"x\" AS \"apijet~value\""), "{}", pg.sql);
    let my = crate::render_multiplexed(&MySql { mariadb: true }, &plan, ListKind::Int);
    assert!(
        my.sql
            .contains("JSON_TABLE(?, '$[*]' COLUMNS (`o` FOR ORDINALITY, `x` BIGINT PATH '$'))"),
        "{}",
        my.sql
    );
}
