//! One account, one spelling: every account path (`/login` types 0 and 1, `/post/verify`,
//! `/gets/verify`, `/heads/verify`, `/register`, `/put/password`) canonicalises the phone or
//! refuses it with 406 before it is a limiter key or a bound value. Spellings a database reads
//! as the same number (`" \t13000082003\n "`, `"013000082003"`, `"+13000082003"`,
//! `"13000082003abc"`, `"00013000082001"`) get no fresh count and do not walk around a lock:
//! on our demo (phones as text, every engine) and on the APIJSON demo database (phones as
//! `bigint`, PostgreSQL and MariaDB), where no answer may carry database text either.
//! Wrong codes and wrong old passwords also count per client address.

use crate::support::{
    apijson_demo_databases, code, demo_databases, post, verify_code, wrong_code, Engine, Server,
};
use serde_json::{json, Value};

/// Spellings of 13000082003 (and, last, of 13000082001) that a database may read as the number.
const SPELLINGS: [&str; 5] = [
    " \t13000082003\n ",
    "013000082003",
    "+13000082003",
    "13000082003abc",
    "00013000082001",
];

const CONFIG: &str = "verify_code_in_answer = true\nverify_code_ttl_secs = 60\n";
/// The APIJSON demo's `Privacy._password` is `varchar(20)`: plain text, as the Java server
/// stores it (a shared database).
const SHARED: &str =
    "verify_code_in_answer = true\nverify_code_ttl_secs = 60\npassword_storage = \"plain\"\n";

/// `spelling` with its digits turned into the other account's (the last spelling names
/// 13000082001, the others 13000082003).
fn of(spelling: &str, canonical: &str) -> String {
    spelling
        .replace("13000082003", canonical)
        .replace("13000082001", canonical)
}

/// Whether `spelling` is canonicalised (only surrounding whitespace is).
fn accepted(spelling: &str) -> bool {
    spelling.trim().len() == 11 && spelling.trim().bytes().all(|b| b.is_ascii_digit())
}

/// An answer that refuses the spelling (406) or counts it against the canonical account; never
/// a success, never database text.
fn assert_no_way_in(engine: Engine, what: &str, r: &Value) {
    let text = r.to_string();
    assert_ne!(code(r), 200, "{engine}: {what}: {r}");
    for leak in ["syntax", "bigint", "Truncated", "incorrect", "SQL"] {
        assert!(!text.contains(leak), "{engine}: {what}: database text: {r}");
    }
}

/// The finding, replayed: a locked login, a spent code budget, a registration.
fn replay(engine: Engine, s: &Server, password: &str) {
    let mut c = s.client();
    let locked = "13000082001";
    // Five wrong passwords lock the account…
    for _ in 0..5 {
        let r = post(
            &mut c,
            "/login",
            &json!({"phone": locked, "password": "wrong-pw"}),
        );
        assert_eq!(code(&r), 412, "{engine}: {r}");
    }
    // …and no spelling walks around the lock with the right password.
    for spelling in SPELLINGS {
        let spelling = of(spelling, locked);
        let r = post(
            &mut c,
            "/login",
            &json!({"phone": spelling, "password": password}),
        );
        assert_no_way_in(engine, &format!("login as {spelling:?}"), &r);
        let expected = if accepted(&spelling) { 429 } else { 406 };
        assert_eq!(code(&r), expected, "{engine}: {spelling:?}: {r}");
    }

    // A code's guesses: four wrong ones, then the spellings; the fifth failure is the last.
    let phone = "13000082003";
    let login_code = verify_code(&mut c, 0, phone);
    for _ in 0..4 {
        let r = post(
            &mut c,
            "/heads/verify",
            &json!({"type": 0, "phone": phone, "verify": wrong_code(&login_code)}),
        );
        assert_eq!(code(&r), 412, "{engine}: {r}");
    }
    for spelling in SPELLINGS {
        let spelling = of(spelling, phone);
        let r = post(
            &mut c,
            "/heads/verify",
            &json!({"type": 0, "phone": spelling, "verify": wrong_code(&login_code)}),
        );
        assert_no_way_in(engine, &format!("heads/verify {spelling:?}"), &r);
        let expected = if accepted(&spelling) { 412 } else { 406 };
        assert_eq!(code(&r), expected, "{engine}: {spelling:?}: {r}");
    }
    for spelling in SPELLINGS.iter().map(|s| of(s, phone)).chain([phone.into()]) {
        for (path, body) in [
            (
                "/heads/verify",
                json!({"type": 0, "phone": spelling, "verify": login_code}),
            ),
            (
                "/login",
                json!({"type": 1, "phone": spelling, "password": login_code}),
            ),
            (
                "/put/password",
                json!({"verify": login_code, "Privacy": {"phone": spelling, "_password": "taken1"}}),
            ),
        ] {
            let r = post(&mut c, path, &body);
            assert_no_way_in(engine, &format!("{path} {spelling:?}"), &r);
            let expected = if accepted(&spelling) { [429] } else { [406] };
            assert!(
                expected.contains(&code(&r)),
                "{engine}: {path} {spelling:?}: {r}"
            );
        }
    }

    // Codes cannot be asked for, nor read, under another spelling.
    for spelling in SPELLINGS.iter().filter(|s| !accepted(s)) {
        for path in ["/post/verify", "/gets/verify"] {
            let r = post(&mut c, path, &json!({"type": 1, "phone": spelling}));
            assert_no_way_in(engine, &format!("{path} {spelling:?}"), &r);
            assert_eq!(code(&r), 406, "{engine}: {path} {spelling:?}: {r}");
        }
    }

    // /register stores the canonical spelling, which then logs in.
    let fresh = "13900006543";
    let mut anon = s.client();
    let reg = verify_code(&mut anon, 1, fresh);
    let refused = json!({
        "Privacy": {"phone": format!("+{fresh}"), "_password": "secret1"},
        "User": {"name": "Spelled"},
        "verify": reg
    });
    let r = post(&mut anon, "/register", &refused);
    assert_no_way_in(engine, "register +phone", &r);
    assert_eq!(code(&r), 406, "{engine}: {r}");
    let padded = json!({
        "Privacy": {"phone": format!(" {fresh}\t"), "_password": "secret1"},
        "User": {"name": "Spelled"},
        "verify": reg
    });
    let r = post(&mut anon, "/register", &padded);
    assert_eq!(code(&r), 200, "{engine}: {r}");
    s.client()
        .login(fresh, "secret1")
        .unwrap_or_else(|e| panic!("{engine}: the canonical phone was stored: {e}"));
}

#[test]
fn no_spelling_of_a_phone_gets_its_own_count_on_every_engine() {
    for (engine, url) in demo_databases("phone_spellings") {
        let s = Server::start(&url, CONFIG);
        replay(engine, &s, "123456");
    }
}

#[test]
fn no_spelling_of_a_phone_gets_its_own_count_on_the_apijson_demo_database() {
    for (engine, url) in apijson_demo_databases("phone_spellings_apijson") {
        let s = Server::start(&url, SHARED);
        replay(engine, &s, "123456");
    }
}

/// Finding 7: one password sprayed across accounts from one address hits the address's limit,
/// at `/put/password` and with wrong codes, on every engine.
#[test]
fn one_address_guessing_across_accounts_is_limited_on_every_engine() {
    let config = format!("{CONFIG}login_failures_per_address = 12\n");
    for (engine, url) in demo_databases("phone_spellings_spray") {
        let s = Server::start(&url, &config);
        let mut c = s.client();
        // Twelve accounts, one wrong old password each: the thirteenth is refused unasked,
        // even for an account whose old password is right.
        for id in 82001..82013 {
            let r = post(
                &mut c,
                "/put/password",
                &json!({"oldPassword": "sprayed1", "Privacy": {"id": id, "_password": "newpass1"}}),
            );
            assert_eq!(code(&r), 412, "{engine}: account {id}: {r}");
        }
        let r = post(
            &mut c,
            "/put/password",
            &json!({"oldPassword": "123456", "Privacy": {"id": 82020, "_password": "newpass1"}}),
        );
        assert_eq!(code(&r), 429, "{engine}: the address is locked: {r}");
        drop(s);

        // Wrong codes: six phones, one code and one wrong guess each (no phone near its own
        // limit of five); the address has twelve failures and the next guess is refused.
        let s = Server::start(&url, &config);
        s.client()
            .login("13000082020", "123456")
            .unwrap_or_else(|e| panic!("{engine}: the password was not changed: {e}"));
        let mut c = s.client();
        let phones: Vec<String> = (0..6).map(|i| format!("1390000700{i}")).collect();
        let codes: Vec<String> = phones.iter().map(|p| verify_code(&mut c, 1, p)).collect();
        for (p, v) in phones.iter().zip(&codes) {
            let r = post(
                &mut c,
                "/heads/verify",
                &json!({"type": 1, "phone": p, "verify": wrong_code(v)}),
            );
            assert_eq!(code(&r), 412, "{engine}: {r}");
        }
        let r = post(
            &mut c,
            "/heads/verify",
            &json!({"type": 1, "phone": phones[0], "verify": codes[0]}),
        );
        assert_eq!(
            code(&r),
            429,
            "{engine}: wrong codes count per address: {r}"
        );
    }
}
