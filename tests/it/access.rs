//! Who may do what: logins, tokens and the roles of the `Access` table, on every engine.

use crate::support::{ada, code, demo_databases, post, Client, Server};
use serde_json::{json, Value};

const SECRET: &str = "token_secret = \"test secret shared by every instance\"\n";

#[test]
fn two_instances_accept_each_others_tokens() {
    let (_, url) = demo_databases("tokens_between_instances").remove(0);
    let a = Server::start(&url, SECRET);
    let b = Server::start(&url, SECRET);
    let other = Server::start(&url, "token_secret = \"another key\"\n");
    let token = ada(&a).login("13000082001", "123456").expect("login")["token"]
        .as_str()
        .expect("token")
        .to_string();
    let own = json!({"Moment": {"@role": "OWNER", "@column": "userId"}});
    let mut on_b = b.client().with_only_bearer(&token);
    let r = post(&mut on_b, "/get", &own);
    assert_eq!(
        r["Moment"]["userId"], 82001,
        "instance B accepts A's token: {r}"
    );
    let mut on_other = other.client().with_only_bearer(&token);
    assert_eq!(
        code(&post(&mut on_other, "/get", &own)),
        407,
        "another key rejects it"
    );
}

#[test]
fn logins_cookies_bearers_and_bad_tokens() {
    let (_, url) = demo_databases("login_paths").remove(0);
    let s = Server::start(&url, &format!("{SECRET}token_ttl_secs = 1\n"));
    let mut anon = s.client();
    let r = post(
        &mut anon,
        "/login",
        &json!({"type": 0, "phone": "13000082001", "password": "nope"}),
    );
    assert_eq!(code(&r), 412, "{r}");
    let r = post(
        &mut anon,
        "/login",
        &json!({"type": 0, "phone": "13999999999", "password": "123456"}),
    );
    assert_eq!(code(&r), 404, "{r}");

    let own = json!({"Moment": {"@role": "OWNER", "@column": "userId"}});
    let mut logged = ada(&s);
    let token = logged.login("13000082001", "123456").expect("login")["token"]
        .as_str()
        .expect("token")
        .to_string();
    let mut by_cookie = logged.clone().without_bearer();
    assert_eq!(
        post(&mut by_cookie, "/get", &own)["Moment"]["userId"],
        82001,
        "cookie path"
    );
    let mut by_bearer = s.client().with_only_bearer(&token);
    assert_eq!(
        post(&mut by_bearer, "/get", &own)["Moment"]["userId"],
        82001,
        "bearer path"
    );

    let tampered = format!("{}x", &token[..token.len() - 1]);
    let mut forged = s.client().with_only_bearer(&tampered);
    assert_eq!(
        code(&post(&mut forged, "/get", &own)),
        407,
        "a tampered token is not a login"
    );
    let mut junk = s.client().with_only_bearer("not.a.token");
    assert_eq!(code(&post(&mut junk, "/get", &own)), 407);
    // Anonymous reads still work with a broken token.
    assert_eq!(
        code(&post(
            &mut junk,
            "/get",
            &json!({"Moment": {"@column": "id"}})
        )),
        200
    );

    std::thread::sleep(std::time::Duration::from_millis(2100));
    assert_eq!(
        code(&post(&mut by_bearer, "/get", &own)),
        407,
        "an expired token is not a login"
    );

    let mut again = ada(&s);
    let r = post(&mut again, "/logout", &json!({}));
    assert_eq!(code(&r), 200, "{r}");
    let mut after = again.without_bearer();
    assert_eq!(
        code(&post(&mut after, "/get", &own)),
        407,
        "logout clears the cookie"
    );
}

/// Roles allowed per (table, method) in the demo's Access table, in the order of `ROLES`.
const ROLES: [&str; 6] = ["UNKNOWN", "LOGIN", "CONTACT", "CIRCLE", "OWNER", "ADMIN"];

fn allowed(table: &str, method: &str, role: &str) -> bool {
    let all_but_unknown = role != "UNKNOWN";
    match (table, method) {
        ("User" | "Moment" | "Comment", "get" | "head") => true,
        ("Privacy", "get" | "head") => false,
        _ => all_but_unknown,
    }
}

#[test]
fn every_role_on_every_public_method_on_every_engine() {
    for (engine, url) in demo_databases("role_matrix") {
        let s = Server::start(&url, SECRET);
        for logged_in in [false, true] {
            let mut c = if logged_in { ada(&s) } else { s.client() };
            for table in ["User", "Moment", "Comment", "Privacy"] {
                for method in ["get", "head"] {
                    for role in ROLES {
                        let body = json!({ table: {"@role": role} });
                        let got = code(&post(&mut c, &format!("/{method}"), &body));
                        let want = if role != "UNKNOWN" && !logged_in {
                            407
                        } else if role == "ADMIN" {
                            403
                        } else if allowed(table, method, role) {
                            200
                        } else {
                            401
                        };
                        assert_eq!(
                            got, want,
                            "{engine}: {method} {table} as {role}, logged in: {logged_in}"
                        );
                    }
                }
            }
        }
        // The roles restrict rows: OWNER sees only Ada's moments, CONTACT only her contacts'.
        let mut c = ada(&s);
        let owners = |c: &mut Client, role: &str| -> Vec<i64> {
            let r = post(
                c,
                "/get",
                &json!({"Moment-userId[]": {"count": 0, "Moment": {"@role": role}}}),
            );
            r["Moment-userId[]"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .iter()
                .filter_map(Value::as_i64)
                .collect()
        };
        let own = owners(&mut c, "OWNER");
        assert!(
            !own.is_empty() && own.iter().all(|&u| u == 82001),
            "{engine}: {own:?}"
        );
        let contacts = [82002, 82003, 82004, 82005, 10001];
        let theirs = owners(&mut c, "CONTACT");
        assert!(
            !theirs.is_empty() && theirs.iter().all(|u| contacts.contains(u)),
            "{engine}: {theirs:?}"
        );
        let circle = owners(&mut c, "CIRCLE");
        assert!(
            circle.iter().all(|u| *u == 82001 || contacts.contains(u))
                && circle.len() > theirs.len(),
            "{engine}"
        );
        // Naming someone else's row under OWNER is refused, not silently empty.
        let r = post(
            &mut c,
            "/get",
            &json!({"Moment": {"@role": "OWNER", "userId": 82002}}),
        );
        assert_eq!(code(&r), 401, "{engine}: {r}");
        // System tables stay closed outside debug mode, even to a logged-in visitor.
        assert_eq!(
            code(&post(&mut c, "/get", &json!({"Access": {}}))),
            401,
            "{engine}"
        );
    }
}

#[test]
fn reload_under_load_answers_every_request() {
    let (_, url) = demo_databases("reload_under_load").remove(0);
    let s = Server::start(&url, &format!("{SECRET}admins = [82001]\n"));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let readers: Vec<_> = (0..4)
        .map(|_| {
            let mut c = s.client();
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut answered = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let r = post(&mut c, "/get", &json!({"[]": {"count": 2, "Moment": {}, "User": {"id@": "/Moment/userId"}}}));
                    assert_eq!(code(&r), 200, "a read during reload: {r}");
                    answered += 1;
                }
                answered
            })
        })
        .collect();
    let mut admin = ada(&s);
    for _ in 0..20 {
        let r = post(&mut admin, "/reload", &json!({}));
        assert_eq!(code(&r), 200, "{r}");
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let answered: usize = readers.into_iter().map(|t| t.join().expect("reader")).sum();
    assert!(answered > 0);
    // Only configured admins may reload.
    let (_, url) = demo_databases("reload_refused").remove(0);
    let s = Server::start(&url, SECRET);
    let r = post(&mut ada(&s), "/reload", &json!({}));
    assert_eq!(code(&r), 403, "{r}");
    assert_eq!(code(&post(&mut s.client(), "/reload", &json!({}))), 407);
}

#[test]
fn private_reads_follow_the_request_table_on_every_engine() {
    for (engine, url) in demo_databases("private_reads") {
        let s = Server::start(&url, SECRET);
        let mut c = ada(&s);
        let r = post(
            &mut c,
            "/gets",
            &json!({"tag": "Privacy", "Privacy": {"id": 82001}}),
        );
        assert_eq!(r["Privacy"]["id"], 82001, "{engine}: {r}");
        assert!(
            r["Privacy"].get("_password").is_none(),
            "{engine}: hidden columns stay hidden"
        );
        let r = c
            .post("/gets/Privacy", r#"{"id": 82001}"#)
            .expect("answer")
            .json()
            .expect("json");
        assert_eq!(r["Privacy"]["id"], 82001, "{engine}: tag shortcut {r}");
        let r = post(
            &mut c,
            "/heads",
            &json!({"tag": "Privacy", "Privacy": {"id": 82001}}),
        );
        assert_eq!(r["Privacy"]["count"], 1, "{engine}: {r}");
        // Someone else's row under the structure's OWNER role.
        let r = post(
            &mut c,
            "/gets",
            &json!({"tag": "Privacy", "Privacy": {"id": 82002}}),
        );
        assert_eq!(code(&r), 401, "{engine}: {r}");
        // The structure's rules: tag required, known tags only, MUST and REFUSE.
        assert_eq!(
            code(&post(&mut c, "/gets", &json!({"Privacy": {"id": 82001}}))),
            406,
            "{engine}"
        );
        assert_eq!(
            code(&post(
                &mut c,
                "/gets",
                &json!({"tag": "Nope", "Privacy": {"id": 82001}})
            )),
            403,
            "{engine}"
        );
        assert_eq!(
            code(&post(
                &mut c,
                "/gets",
                &json!({"tag": "Privacy", "Privacy": {}})
            )),
            406,
            "{engine}"
        );
        let r = post(
            &mut c,
            "/gets",
            &json!({"tag": "Privacy", "Privacy": {"id": 82001, "phone": "1"}}),
        );
        assert_eq!(code(&r), 406, "{engine}: REFUSE \"!\" {r}");
        let r = post(
            &mut c,
            "/gets",
            &json!({"tag": "Privacy", "Privacy": {"id": 82001, "@combine": "id"}}),
        );
        assert!(
            matches!(code(&r), 403 | 406),
            "{engine}: no @combine in private requests {r}"
        );
        // Private methods need a login first.
        let mut anon = s.client();
        assert_eq!(
            code(&post(
                &mut anon,
                "/gets",
                &json!({"tag": "Privacy", "Privacy": {"id": 82001}})
            )),
            407,
            "{engine}"
        );
        assert_eq!(
            code(&post(
                &mut anon,
                "/heads",
                &json!({"tag": "Privacy", "Privacy": {"id": 82001}})
            )),
            407,
            "{engine}"
        );
    }
}

#[test]
fn register_then_log_in_on_every_engine() {
    for (engine, url) in demo_databases("register") {
        let s = Server::start(&url, &format!("{SECRET}verify_code_in_answer = true\n"));
        let mut c = s.client();
        // The code of /post/verify (type 1) that /register checks (tests/it/accounts.rs).
        let code_for = |c: &mut crate::support::Client| {
            let r = post(
                c,
                "/post/verify",
                &json!({"type": 1, "phone": "13900001234"}),
            );
            r["Verify"]["verify"].clone()
        };
        let mut body = json!({"Privacy": {"phone": "13900001234", "_password": "secret1"}, "User": {"name": "Newbie"}});
        body["verify"] = code_for(&mut c);
        let r = post(&mut c, "/register", &body);
        assert_eq!(code(&r), 200, "{engine}: {r}");
        assert_eq!(
            r["User"]["id"], r["Privacy"]["id"],
            "{engine}: the user row takes the privacy row's id"
        );
        body["verify"] = code_for(&mut c);
        assert_eq!(
            code(&post(&mut c, "/register", &body)),
            409,
            "{engine}: a phone registers once"
        );
        let bad =
            json!({"Privacy": {"phone": "123", "_password": "secret1"}, "User": {"name": "Bad"}});
        assert_eq!(
            code(&post(&mut c, "/register", &bad)),
            406,
            "{engine}: VERIFY phone"
        );
        let short = json!({"Privacy": {"phone": "13900005678", "_password": "123"}, "User": {"name": "Bad"}});
        assert_eq!(
            code(&post(&mut c, "/register", &short)),
            406,
            "{engine}: VERIFY password length"
        );
        let mut newbie = s.client();
        let r = newbie
            .login("13900001234", "secret1")
            .expect("the new account logs in");
        assert_eq!(r["User"]["name"], "Newbie", "{engine}");
    }
}

/// Point lookups are planned once per shape (`{"User":{"id":…}}`) and then only bound: the
/// cached shape must still answer each value's own row, refuse what the role may not read,
/// and follow an `Access` change after a reload, for the anonymous and the logged-in visitor
/// separately.
#[test]
fn a_cached_point_lookup_binds_its_values_and_keeps_the_role_rules() {
    for (engine, url) in demo_databases("point_cache") {
        let s = Server::start(&url, &format!("{SECRET}admins = [82001]\n"));
        let mut anon = s.client();
        let mut logged = ada(&s);
        for c in [&mut anon, &mut logged] {
            for _ in 0..2 {
                for id in [82001, 82002, 82003] {
                    let r = post(c, "/get", &json!({"User": {"id": id}}));
                    assert_eq!(r["User"]["id"], id, "{engine}: {r}");
                }
                let r = post(c, "/get", &json!({"User": {"id": 1}}));
                assert!(r.get("User").is_none(), "{engine}: no such user: {r}");
            }
            let r = post(c, "/get", &json!({"User": {"id": 82002}}));
            let name = r["User"]["name"].clone();
            for _ in 0..2 {
                let r = post(c, "/get", &json!({"User": {"name": name}}));
                assert_eq!(r["User"]["id"], 82002, "{engine}: a string slot: {r}");
                let r = post(c, "/get", &json!({"User": {"name": "nobody at all"}}));
                assert!(r.get("User").is_none(), "{engine}: {r}");
                // Privacy is closed to every role on GET, however often it is asked.
                let r = post(c, "/get", &json!({"Privacy": {"id": 82001}}));
                assert_eq!(code(&r), 401, "{engine}: {r}");
            }
        }
        // GETS still goes through its Request structure: the OWNER role it imposes holds.
        for _ in 0..2 {
            let own = json!({"tag": "Privacy", "Privacy": {"id": 82001}});
            assert_eq!(post(&mut logged, "/gets", &own)["Privacy"]["id"], 82001);
            let theirs = json!({"tag": "Privacy", "Privacy": {"id": 82002}});
            assert_eq!(code(&post(&mut logged, "/gets", &theirs)), 401, "{engine}");
        }
        let Some(path) = url.strip_prefix("sqlite://") else {
            continue;
        };
        // Moment becomes readable by logged-in visitors only; the reload drops every plan,
        // and the logged-in visitor's plan must not serve the anonymous one.
        let db = rusqlite::Connection::open(path).expect("open the demo database");
        db.execute(
            "UPDATE Access SET get = '[\"LOGIN\"]' WHERE name = 'Moment'",
            [],
        )
        .expect("update Access");
        let r = post(&mut logged, "/reload", &json!({}));
        assert_eq!(code(&r), 200, "{r}");
        let moment = json!({"Moment": {"id": 1001}});
        for _ in 0..2 {
            assert_eq!(post(&mut logged, "/get", &moment)["Moment"]["id"], 1001);
            assert_eq!(code(&post(&mut anon, "/get", &moment)), 401, "{engine}");
        }
    }
}
