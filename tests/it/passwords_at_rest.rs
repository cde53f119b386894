//! Passwords at rest: every password apijet sets (`/register`, `/put/password`, pay passwords)
//! is stored as an argon2id hash, read back here straight from the database on every engine;
//! `password_storage = "plain"` keeps the reference's plain text for a `Privacy` table the Java
//! server shares; a check accepts both forms; and on the APIJSON demo database (`varchar(20)`
//! password columns) the default setting says what to change instead of failing obscurely.

use serde_json::json;

use crate::support::{
    apijson_demo_databases, code, demo_databases, post, verify_code, Client, Engine, Server,
};

const CONFIG: &str = "verify_code_in_answer = true\nverify_code_ttl_secs = 60\n";

/// One value straight from the database at `url` (the first column of the first row).
fn stored(engine: Engine, url: &str, sql: &str) -> String {
    if let Some(path) = url.strip_prefix("sqlite://") {
        let conn = rusqlite::Connection::open(path).expect("open the SQLite file");
        return conn
            .query_row(sql, [], |r| r.get::<_, String>(0))
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    let database = url
        .rsplit('/')
        .next()
        .and_then(|d| d.split('?').next())
        .expect("a database in the URL");
    engine
        .cli(database, sql)
        .unwrap_or_else(|e| panic!("{e}"))
        .trim()
        .to_string()
}

/// The quoted `_payPassword` column (mixed case).
fn pay_column(engine: Engine) -> &'static str {
    match engine {
        Engine::Mariadb => "`_payPassword`",
        _ => "\"_payPassword\"",
    }
}

fn register(s: &Server, phone: &str, password: &str) -> i64 {
    let mut c = s.client();
    let verify = verify_code(&mut c, 1, phone);
    let r = post(
        &mut c,
        "/register",
        &json!({"Privacy": {"phone": phone, "_password": password}, "User": {"name": "Keeper"}, "verify": verify}),
    );
    assert_eq!(code(&r), 200, "{r}");
    r["Privacy"]["id"].as_i64().expect("the new id")
}

#[test]
fn passwords_are_stored_as_argon2id_hashes_on_every_engine() {
    for (engine, url) in demo_databases("passwords_at_rest") {
        let s = Server::start(&url, CONFIG);
        let phone = "13900008888";
        let id = register(&s, phone, "secret1");
        let password = |s: &str| format!("SELECT _password FROM apijson_privacy WHERE id = {s}");
        let pay = format!(
            "SELECT {} FROM apijson_privacy WHERE id = {id}",
            pay_column(engine)
        );
        let at_rest = stored(engine, &url, &password(&id.to_string()));
        assert!(at_rest.starts_with("$argon2id$"), "{engine}: {at_rest}");
        assert!(!at_rest.contains("secret1"), "{engine}");
        let default_pay = stored(engine, &url, &pay);
        assert!(
            default_pay.starts_with("$argon2id$"),
            "{engine}: {default_pay}"
        );
        s.client()
            .login(phone, "secret1")
            .unwrap_or_else(|e| panic!("{engine}: {e}"));

        // /put/password by the old password, then the pay password by a code of type 3.
        let mut c = s.client();
        let r = post(
            &mut c,
            "/put/password",
            &json!({"oldPassword": "secret1", "Privacy": {"id": id, "_password": "secret2"}}),
        );
        assert_eq!(code(&r), 200, "{engine}: {r}");
        let changed = stored(engine, &url, &password(&id.to_string()));
        assert!(
            changed.starts_with("$argon2id$") && changed != at_rest,
            "{engine}"
        );
        assert!(s.client().login(phone, "secret1").is_err(), "{engine}");
        let mut me = s.client();
        me.login(phone, "secret2")
            .unwrap_or_else(|e| panic!("{engine}: {e}"));
        let verify = verify_code(&mut c, 3, phone);
        let r = post(
            &mut c,
            "/put/password",
            &json!({"verify": verify, "Privacy": {"phone": phone, "_payPassword": "654321"}}),
        );
        assert_eq!(code(&r), 200, "{engine}: {r}");
        let new_pay = stored(engine, &url, &pay);
        assert!(
            new_pay.starts_with("$argon2id$") && new_pay != default_pay,
            "{engine}"
        );
        let top_up = |c: &mut Client, pay: &str| {
            post(
                c,
                "/put/balance",
                &json!({"Privacy": {"id": id, "balance+": 12.34, "_payPassword": pay}}),
            )
        };
        assert_eq!(code(&top_up(&mut me, "123456")), 412, "{engine}");
        let r = top_up(&mut me, "654321");
        assert_eq!(code(&r), 200, "{engine}: {r}");

        // The generic API can neither set a password (it would be stored as sent) nor test one
        // in SQL (a hash matches no condition): passwords go through the account endpoints.
        let r = post(
            &mut me,
            "/put",
            &json!({"tag": "Privacy", "Privacy": {"id": id, "_password": "plain-text"}}),
        );
        assert_ne!(code(&r), 200, "{engine}: {r}");
        let r = post(
            &mut me,
            "/heads",
            &json!({"tag": "Privacy", "Privacy": {"id": id, "_password": "secret2"}}),
        );
        assert_eq!(code(&r), 406, "{engine}: {r}");
        assert_eq!(stored(engine, &url, &password(&id.to_string())), changed);
    }
}

#[test]
fn plain_storage_keeps_the_reference_text_and_checks_both_forms_on_every_engine() {
    for (engine, url) in demo_databases("passwords_plain") {
        let s = Server::start(&url, &format!("{CONFIG}password_storage = \"plain\"\n"));
        let id = register(&s, "13900008889", "secret1");
        let sql = format!("SELECT _password FROM apijson_privacy WHERE id = {id}");
        assert_eq!(stored(engine, &url, &sql), "secret1", "{engine}");
        s.client()
            .login("13900008889", "secret1")
            .unwrap_or_else(|e| panic!("{engine}: plain text checks: {e}"));
        // The demo's own accounts hold hashes: they still log in.
        crate::support::ada(&s);
        let r = post(
            &mut s.client(),
            "/put/password",
            &json!({"oldPassword": "123456", "Privacy": {"id": 82002, "_password": "plain22"}}),
        );
        assert_eq!(code(&r), 200, "{engine}: {r}");
        let sql = "SELECT _password FROM apijson_privacy WHERE id = 82002";
        assert_eq!(stored(engine, &url, sql), "plain22", "{engine}");
    }
}

#[test]
fn the_apijson_demo_database_logs_in_and_names_the_setting_for_its_narrow_columns() {
    for (engine, url) in apijson_demo_databases("passwords_apijson") {
        let sql = "SELECT _password FROM apijson_privacy WHERE id = 82003";
        let s = Server::start(&url, CONFIG);
        s.client()
            .login("13000082003", "123456")
            .unwrap_or_else(|e| panic!("{engine}: the reference's plain text checks: {e}"));
        let change =
            json!({"oldPassword": "123456", "Privacy": {"id": 82003, "_password": "abcdef"}});
        let r = post(&mut s.client(), "/put/password", &change);
        assert_eq!(code(&r), 403, "{engine}: {r}");
        let msg = r["msg"].as_str().unwrap_or_default();
        assert!(
            msg.contains("password_storage") && msg.contains("_password"),
            "{engine}: {r}"
        );
        assert_eq!(stored(engine, &url, sql), "123456", "{engine}: unchanged");
        drop(s);

        let s = Server::start(&url, &format!("{CONFIG}password_storage = \"plain\"\n"));
        let r = post(&mut s.client(), "/put/password", &change);
        assert_eq!(code(&r), 200, "{engine}: {r}");
        assert_eq!(stored(engine, &url, sql), "abcdef", "{engine}");
        s.client()
            .login("13000082003", "abcdef")
            .unwrap_or_else(|e| panic!("{engine}: {e}"));
    }
}
