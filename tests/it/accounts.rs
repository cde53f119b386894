//! Issue 9: the account endpoints of the reference's demo application on every engine —
//! verification codes (`/post/verify`, `/gets/verify`, `/heads/verify`), `/register` with its
//! code, login by code, `/put/password`, `/put/balance`, the `defaults` of `/login` — and the
//! rules that keep codes secret: never readable through the API, expiring, spent by use or by
//! too many wrong guesses, answered only where the configuration allows it.

use crate::support::{code, demo_databases, post, verify_code, wrong_code, Client, Engine, Server};
use serde_json::{json, Value};
use std::time::Duration;

const OPEN: &str =
    "verify_code_in_answer = true\nverify_code_ttl_secs = 60\nlogin_failures_per_phone = 1000\n";
const SHORT: &str = "verify_code_in_answer = true\nverify_code_ttl_secs = 1\n";
const HIDDEN: &str = "verify_code_ttl_secs = 60\n";

/// A fresh code of `kind` for `phone` (servers that answer codes only).
/// Logs in with `body`; the answer and a client that carries the token.
fn login_with(s: &Server, body: Value) -> (Value, Client) {
    let r = post(&mut s.client(), "/login", &body);
    let token = r["token"].as_str().unwrap_or_default().to_string();
    let c = s.client().with_only_bearer(&token);
    (r, c)
}

#[test]
fn codes_register_log_in_and_change_passwords_on_every_engine() {
    for (engine, url) in demo_databases("accounts") {
        let s = Server::start(&url, OPEN);
        let mut c = s.client();
        let phone = "13900002222";

        // /heads/verify: wrong 412, missing 404, right 200.
        let reg = verify_code(&mut c, 1, phone);
        let check = |c: &mut Client, v: &str| {
            post(
                c,
                "/heads/verify",
                &json!({"type": 1, "phone": phone, "verify": v}),
            )
        };
        assert_eq!(code(&check(&mut c, &wrong_code(&reg))), 412, "{engine}");
        assert_eq!(code(&check(&mut c, "")), 404, "{engine}");
        let r = check(&mut c, &reg);
        assert_eq!(code(&r), 200, "{engine}: {r}");
        assert_eq!(r["Verify"]["count"], 1, "{engine}");
        let r = post(&mut c, "/gets/verify", &json!({"type": 1, "phone": phone}));
        assert_eq!(r["Verify"]["verify"], reg, "{engine}: {r}");

        // /register needs the code of type 1.
        let account =
            json!({"Privacy": {"phone": phone, "_password": "secret1"}, "User": {"name": "Coder"}});
        let mut body = account.clone();
        assert_eq!(
            code(&post(&mut c, "/register", &body)),
            406,
            "{engine}: no code"
        );
        body["verify"] = json!(wrong_code(&reg));
        assert_eq!(
            code(&post(&mut c, "/register", &body)),
            412,
            "{engine}: wrong code"
        );
        body["verify"] = json!(reg);
        let r = post(&mut c, "/register", &body);
        assert_eq!(code(&r), 200, "{engine}: {r}");
        let id = r["Privacy"]["id"].as_i64().expect("new id");
        assert_eq!(
            code(&post(&mut c, "/register", &body)),
            412,
            "{engine}: a code registers once"
        );

        // The Verify table is never reachable through the API, not even for its owner.
        let mut me = s.client();
        me.login(phone, "secret1").expect("the new account logs in");
        for (path, req) in [
            ("/get", json!({"Verify": {"phone": phone}})),
            (
                "/gets",
                json!({"Verify": {"phone": phone}, "tag": "Verify"}),
            ),
            (
                "/heads",
                json!({"Verify": {"phone": phone}, "tag": "Verify"}),
            ),
        ] {
            let r = post(&mut me, path, &req);
            assert_ne!(code(&r), 200, "{engine}: {path} Verify: {r}");
            assert!(!r.to_string().contains(&reg), "{engine}: {r}");
        }

        // Login type 1: a code of type 0 instead of the password, spent by its use.
        let lc = verify_code(&mut c, 0, phone);
        let (r, mut by_code) = login_with(&s, json!({"type": 1, "phone": phone, "password": lc}));
        assert_eq!(code(&r), 200, "{engine}: {r}");
        assert_eq!(r["User"]["id"], id, "{engine}");
        let r = post(
            &mut by_code,
            "/gets",
            &json!({"Privacy": {"id": id}, "tag": "Privacy"}),
        );
        assert_eq!(code(&r), 200, "{engine}: the code login is a login: {r}");
        let r = post(
            &mut s.client(),
            "/login",
            &json!({"type": 1, "phone": phone, "password": lc}),
        );
        assert_eq!(code(&r), 412, "{engine}: a code logs in once: {r}");

        // Five wrong guesses spend a code.
        let lc = verify_code(&mut c, 0, phone);
        for _ in 0..5 {
            let r = post(
                &mut c,
                "/heads/verify",
                &json!({"type": 0, "phone": phone, "verify": wrong_code(&lc)}),
            );
            assert_eq!(code(&r), 412, "{engine}");
        }
        let r = post(
            &mut c,
            "/heads/verify",
            &json!({"type": 0, "phone": phone, "verify": lc}),
        );
        assert_eq!(
            code(&r),
            412,
            "{engine}: the right code after five wrong ones: {r}"
        );

        // /put/password with the old password, then with a code of type 2.
        let change = |c: &mut Client, body: Value| post(c, "/put/password", &body);
        let r = change(
            &mut c,
            json!({"oldPassword": "wrong11", "Privacy": {"id": id, "_password": "secret2"}}),
        );
        assert_eq!(code(&r), 412, "{engine}: {r}");
        let r = change(
            &mut c,
            json!({"oldPassword": "secret1", "Privacy": {"id": id, "_password": "secret1"}}),
        );
        assert_eq!(code(&r), 409, "{engine}: {r}");
        let r = change(
            &mut c,
            json!({"oldPassword": "secret1", "Privacy": {"id": id, "_password": "secret2"}}),
        );
        assert_eq!(code(&r), 200, "{engine}: {r}");
        s.client().login(phone, "secret2").expect("new password");
        let pc = verify_code(&mut c, 2, phone);
        let r = change(
            &mut c,
            json!({"verify": pc, "Privacy": {"phone": phone, "_password": "secret3"}}),
        );
        assert_eq!(code(&r), 200, "{engine}: {r}");
        s.client()
            .login(phone, "secret3")
            .expect("password set by code");
        assert!(
            s.client().login(phone, "secret2").is_err(),
            "{engine}: old one gone"
        );

        // /login answers its defaults; what a login cannot keep is refused.
        let db = match engine {
            Engine::Postgres => "POSTGRESQL",
            Engine::Mariadb => "MYSQL",
            _ => "SQLITE",
        };
        let schema = match engine {
            Engine::Postgres => "public",
            Engine::Mariadb => "apijet_it_accounts",
            _ => "main",
        };
        let defaults = json!({"@database": db, "@schema": schema});
        let r = post(
            &mut s.client(),
            "/login",
            &json!({"phone": phone, "password": "secret3", "defaults": defaults}),
        );
        assert_eq!(code(&r), 200, "{engine}: {r}");
        assert_eq!(r["defaults"], defaults, "{engine}");
        let r = post(
            &mut s.client(),
            "/login",
            &json!({"phone": phone, "password": "secret3", "defaults": {"@role": "OWNER"}}),
        );
        assert_eq!(code(&r), 406, "{engine}: {r}");
        // A schema not served is accepted as the reference accepts it; the login's requests
        // that would read it are refused by name, unless they name their own @schema.
        let mut elsewhere = s.client();
        let r = post(
            &mut elsewhere,
            "/login",
            &json!({"phone": phone, "password": "secret3", "defaults": {"@schema": "elsewhere"}}),
        );
        assert_eq!(code(&r), 200, "{engine}: a schema not served: {r}");
        let r = post(&mut elsewhere, "/get", &json!({"User": {"id": 82001}}));
        assert_eq!(code(&r), 406, "{engine}: {r}");
        assert!(
            r["msg"].as_str().is_some_and(|m| m.contains("elsewhere")),
            "{engine}: {r}"
        );
        let r = post(
            &mut elsewhere,
            "/get",
            &json!({"User": {"id": 82001}, "@schema": schema}),
        );
        assert_eq!(code(&r), 200, "{engine}: its own @schema: {r}");
    }
}

#[test]
fn balance_changes_need_the_owner_and_the_pay_password_on_every_engine() {
    for (engine, url) in demo_databases("balance") {
        let s = Server::start(&url, HIDDEN);
        let mut ada = crate::support::ada(&s);
        let balance = |c: &mut Client| -> f64 {
            let r = post(
                c,
                "/gets",
                &json!({"Privacy": {"id": 82001}, "tag": "Privacy"}),
            );
            let b = &r["Privacy"]["balance"];
            b.as_f64()
                .or_else(|| b.as_str()?.parse().ok())
                .unwrap_or_else(|| panic!("{engine}: a balance: {r}"))
        };
        let before = balance(&mut ada);
        let put = |c: &mut Client, change: f64, pay: &str| {
            post(
                c,
                "/put/balance",
                &json!({"Privacy": {"id": 82001, "balance+": change, "_payPassword": pay}}),
            )
        };
        let r = put(&mut ada, 100.5, "123456");
        assert_eq!(code(&r), 200, "{engine}: {r}");
        assert!(
            (balance(&mut ada) - (before + 100.5)).abs() < 1e-6,
            "{engine}"
        );
        let r = put(&mut ada, -50.0, "123456");
        assert_eq!(code(&r), 200, "{engine}: withdrawal: {r}");
        assert!(
            (balance(&mut ada) - (before + 50.5)).abs() < 1e-6,
            "{engine}"
        );
        assert_eq!(
            code(&put(&mut ada, 10.0, "654321")),
            412,
            "{engine}: pay password"
        );
        assert_eq!(
            code(&put(&mut ada, 20000.0, "123456")),
            416,
            "{engine}: range"
        );
        assert_eq!(code(&put(&mut ada, 0.0, "123456")), 416, "{engine}: zero");
        assert_eq!(
            code(&put(&mut ada, -(before + 1000.0), "123456")),
            416,
            "{engine}: more than the balance"
        );
        assert_eq!(
            code(&put(&mut s.client(), 10.0, "123456")),
            407,
            "{engine}: login"
        );
        let mut bob = s.client();
        bob.login("13000082002", "123456").expect("login");
        assert_ne!(
            code(&put(&mut bob, 10.0, "123456")),
            200,
            "{engine}: not the owner"
        );
        assert!(
            (balance(&mut ada) - (before + 50.5)).abs() < 1e-6,
            "{engine}"
        );
    }
}

/// Finding 7: `/put/balance` moves whole cents only, and exactly on every engine (SQLite's
/// `DECIMAL` holds binary floating point: `balance + 0.1` drifted to `9022.280999999`).
#[test]
fn balances_move_in_whole_cents_on_every_engine() {
    for (engine, url) in demo_databases("balance_cents") {
        let s = Server::start(&url, HIDDEN);
        let mut ada = crate::support::ada(&s);
        // The balance as the database answers it, in cents, refusing any third decimal.
        let cents = |c: &mut Client| -> i64 {
            let r = post(
                c,
                "/gets",
                &json!({"Privacy": {"id": 82001}, "tag": "Privacy"}),
            );
            let text = match &r["Privacy"]["balance"] {
                Value::String(t) => t.clone(),
                other => other.to_string(),
            };
            let (whole, fraction) = text.split_once('.').unwrap_or((&text, ""));
            assert!(fraction.len() <= 2, "{engine}: the balance drifted: {text}");
            let whole: i64 = whole.parse().expect("digits");
            whole * 100 + format!("{fraction:0<2}").parse::<i64>().expect("digits")
        };
        let put = |c: &mut Client, change: Value| {
            post(
                c,
                "/put/balance",
                &json!({"Privacy": {"id": 82001, "balance+": change, "_payPassword": "123456"}}),
            )
        };
        let before = cents(&mut ada);
        for fraction in [json!(0.001), json!(100.005), json!("12.345"), json!("1e2")] {
            let r = put(&mut ada, fraction.clone());
            assert_eq!(code(&r), 406, "{engine}: {fraction}: {r}");
        }
        let r = post(
            &mut ada,
            "/put/balance",
            &json!({"Privacy": {"id": "82001abc", "balance+": 1, "_payPassword": "123456"}}),
        );
        assert_eq!(code(&r), 406, "{engine}: {r}");
        assert_eq!(cents(&mut ada), before, "{engine}: nothing moved");
        // Every step is read back: a float addition shows its drift at once.
        let steps = std::iter::repeat_n((json!(0.1), 10), 10)
            .chain(std::iter::repeat_n((json!("0.07"), 7), 3))
            .chain([(json!(-0.3), -30), (json!(1234.56), 123456)]);
        let mut expected = before;
        for (change, moved) in steps {
            let r = put(&mut ada, change.clone());
            assert_eq!(code(&r), 200, "{engine}: {change}: {r}");
            expected += moved;
            assert_eq!(cents(&mut ada), expected, "{engine}: after {change}");
        }
    }
}

#[test]
fn codes_expire_and_stay_hidden_unless_configured() {
    for (engine, url) in demo_databases("codes_hidden") {
        let phone = "13900003333";
        {
            let s = Server::start(&url, SHORT);
            let mut c = s.client();
            let v = verify_code(&mut c, 1, phone);
            std::thread::sleep(Duration::from_millis(2200));
            let r = post(
                &mut c,
                "/heads/verify",
                &json!({"type": 1, "phone": phone, "verify": v}),
            );
            assert_eq!(code(&r), 408, "{engine}: expired: {r}");
            let r = post(
                &mut c,
                "/heads/verify",
                &json!({"type": 1, "phone": phone, "verify": v}),
            );
            assert_eq!(code(&r), 412, "{engine}: an expired code is deleted: {r}");
        }
        // Wrong codes count against the phone with its failed logins (5 by default): a fresh
        // code buys no more guesses.
        {
            let s = Server::start(&url, SHORT);
            let mut c = s.client();
            let other = "13900004444";
            let v = verify_code(&mut c, 0, other);
            for _ in 0..5 {
                let r = post(
                    &mut c,
                    "/heads/verify",
                    &json!({"type": 0, "phone": other, "verify": wrong_code(&v)}),
                );
                assert_eq!(code(&r), 412, "{engine}: {r}");
            }
            let v = verify_code(&mut c, 0, other);
            let r = post(
                &mut c,
                "/heads/verify",
                &json!({"type": 0, "phone": other, "verify": v}),
            );
            assert_eq!(
                code(&r),
                429,
                "{engine}: guesses are limited per phone: {r}"
            );
            let r = post(
                &mut s.client(),
                "/login",
                &json!({"type": 1, "phone": other, "password": v}),
            );
            assert_eq!(code(&r), 429, "{engine}: also for a login by code: {r}");
        }
        let s = Server::start(&url, HIDDEN);
        let mut c = s.client();
        let r = post(&mut c, "/post/verify", &json!({"type": 1, "phone": phone}));
        assert_eq!(code(&r), 200, "{engine}: {r}");
        assert!(
            r["Verify"].get("verify").is_none(),
            "{engine}: no code in the answer: {r}"
        );
        let r = post(&mut c, "/gets/verify", &json!({"type": 1, "phone": phone}));
        assert_eq!(code(&r), 403, "{engine}: {r}");
        let r = post(&mut c, "/post/verify", &json!({"type": 9, "phone": phone}));
        assert_eq!(code(&r), 406, "{engine}: {r}");
        // Codes for one phone are limited like failed logins (5 per window by default).
        for _ in 0..4 {
            let r = post(&mut c, "/post/verify", &json!({"type": 1, "phone": phone}));
            assert_eq!(code(&r), 200, "{engine}: {r}");
        }
        let r = post(&mut c, "/post/verify", &json!({"type": 1, "phone": phone}));
        assert_eq!(
            code(&r),
            429,
            "{engine}: the sixth code within the window: {r}"
        );
        let r = post(&mut c, "/post/verify", &json!({"type": 0, "phone": "12"}));
        assert_eq!(code(&r), 406, "{engine}: {r}");
    }
}

#[test]
fn router_runs_the_document_templates_on_every_engine() {
    for (engine, url) in demo_databases("router") {
        let s = Server::start(&url, HIDDEN);
        let mut c = s.client();
        let ids = |r: &Value| -> Vec<i64> {
            r["Moment[]"]
                .as_array()
                .unwrap_or_else(|| panic!("{engine}: a list: {r}"))
                .iter()
                .filter_map(|m| m["id"].as_i64())
                .collect()
        };
        let r = post(&mut c, "/router/get/moments", &json!({}));
        assert_eq!(
            ids(&r),
            vec![1001, 1002, 1003],
            "{engine}: the template: {r}"
        );
        let r = post(&mut c, "/router/get/moments", &json!({"Moment[].page": 1}));
        assert_eq!(
            ids(&r),
            vec![1004, 1005, 1006],
            "{engine}: merged by path: {r}"
        );
        let r = post(&mut c, "/router/get/moments?Moment[].page=2", &json!({}));
        assert_eq!(
            ids(&r),
            vec![1007, 1008, 1009],
            "{engine}: URL parameters: {r}"
        );
        let r = post(&mut c, "/router/get/moments?version=2", &json!({}));
        assert_eq!(code(&r), 406, "{engine}: no such version: {r}");
        let r = post(&mut c, "/router/get/nothing", &json!({}));
        assert_eq!(code(&r), 406, "{engine}: no template: {r}");
        let r = post(&mut c, "/router/patch/moments", &json!({}));
        assert_eq!(code(&r), 406, "{engine}: no such method: {r}");
    }
}
