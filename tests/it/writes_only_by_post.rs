//! Writes only by POST: `GET /{method}/{json}` serves `get` and `head` only (as the reference,
//! which maps `GET /get/{request}`); every other method answers HTTP 405 with an APIJSON
//! envelope and `Allow: POST`, and changes nothing. In Chromium: a link on another site,
//! followed with the visitor's `SameSite=Lax` login cookie (which browsers send on a cross-site
//! top-level navigation), cannot edit the visitor's rows.

use crate::support::browser::Browser;
use crate::support::{ada, code, demo_databases, post, skip, Client, Server};
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::TcpListener;

/// `/{method}/{json}` with the JSON percent-encoded, as a browser sends it.
fn in_url(method: &str, request: &Value) -> String {
    let text = request.to_string();
    let encoded: String = text
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect();
    format!("/{method}/{encoded}")
}

/// The content of moment `id` as Ada reads it.
fn content(c: &mut Client, id: i64) -> Value {
    let r = post(
        c,
        "/get",
        &json!({"Moment": {"id": id, "@column": "content"}}),
    );
    r["Moment"]["content"].clone()
}

/// One of Ada's moments.
fn adas_moment(c: &mut Client) -> i64 {
    let r = post(
        c,
        "/get",
        &json!({"Moment": {"userId": 82001, "@column": "id"}}),
    );
    r["Moment"]["id"].as_i64().expect("Ada has a moment")
}

#[test]
fn get_serves_only_reads_on_every_engine() {
    for (engine, url) in demo_databases("writes_only_by_post") {
        let s = Server::start(&url, "");
        let mut ada = ada(&s);
        let moment = adas_moment(&mut ada);
        let before = content(&mut ada, moment);
        let writes = [
            (
                "put",
                json!({"tag": "Moment", "Moment": {"id": moment, "content": "written by a link"}}),
            ),
            (
                "post",
                json!({"tag": "Moment", "Moment": {"content": "posted by a link"}}),
            ),
            ("delete", json!({"tag": "Moment", "Moment": {"id": moment}})),
            (
                "crud",
                json!({"Moment": {"@method": "PUT", "id": moment, "content": "crud by a link"}, "tag": "Moment"}),
            ),
            ("gets", json!({"tag": "Privacy", "Privacy": {"id": 82001}})),
            ("heads", json!({"tag": "Privacy", "Privacy": {"id": 82001}})),
        ];
        for (method, request) in writes {
            let r = ada.get(&in_url(method, &request)).expect("an answer");
            assert_eq!(r.status, 405, "{engine}: GET /{method}: {}", r.text);
            assert_eq!(r.header("allow"), Some("POST"), "{engine}: {method}");
            let v = r.json().expect("an APIJSON envelope");
            assert_eq!(code(&v), 405, "{engine}: {v}");
            assert!(
                v["msg"].as_str().is_some_and(|m| m.contains("POST")),
                "{engine}: {v}"
            );
        }
        assert_eq!(
            content(&mut ada, moment),
            before,
            "{engine}: nothing changed"
        );
        let r = post(
            &mut ada,
            "/get",
            &json!({"Moment": {"content": "posted by a link", "@column": "id"}}),
        );
        assert!(r.get("Moment").is_none(), "{engine}: nothing posted: {r}");

        // The reads still answer through GET.
        for method in ["get", "head"] {
            let r = ada
                .get(&in_url(method, &json!({"Moment": {"id": moment}})))
                .expect("an answer");
            assert_eq!(r.status, 200, "{engine}: {}", r.text);
            assert_eq!(code(&r.json().expect("json")), 200, "{engine}: {}", r.text);
        }
    }
}

/// A page on another site (served here on `localhost`, while apijet is `127.0.0.1`: another
/// site, so the browser applies `SameSite=Lax`) with links to apijet.
fn serve_page(html: String) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf);
            let answer = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{html}",
                html.len()
            );
            let _ = stream.write_all(answer.as_bytes());
        }
    });
    port
}

#[test]
fn a_cross_site_link_cannot_write_in_chromium() {
    let s = Server::fresh_sqlite("");
    let Some(b) = Browser::start() else {
        skip("writes_only_by_post: chromium and chromedriver not found (scripts/test.sh installs them)");
        return;
    };
    let mut ada = ada(&s);
    let moment = adas_moment(&mut ada);
    let before = content(&mut ada, moment);

    // Ada logs in on apijet's own origin: the browser keeps the SameSite=Lax cookie.
    b.goto(&s.url("/health"));
    let login = b.script_async(
        r#"fetch("/login", {method: "POST", headers: {"Content-Type": "application/json"},
             body: JSON.stringify({phone: "13000082001", password: "123456"})})
           .then(r => r.json()).then(v => done(v.code), e => done(String(e)));"#,
    );
    assert_eq!(login, 200, "the browser logged in");

    // The other site links to a write, and (to show the cookie does ride along) to a read
    // that needs the login.
    let write = s.url(&in_url(
        "put",
        &json!({"tag": "Moment", "Moment": {"id": moment, "content": "written by a link"}}),
    ));
    let proof = s.url(&in_url(
        "get",
        &json!({"User": {"id": 82001, "@column": "id"}, "@role": "LOGIN"}),
    ));
    let page = serve_page(format!(
        r#"<!doctype html><a id="proof" href="{proof}">proof</a> <a id="write" href="{write}">win a prize</a>"#
    ));
    let other_site = format!("http://localhost:{page}/");

    let follow = |link: &str| -> Value {
        b.goto(&other_site);
        b.wait_for(
            "the other site",
            "return document.getElementById('write') !== null",
        );
        b.click(&format!("#{link}"));
        b.wait_for(
            "apijet's answer",
            "return location.host.startsWith('127.0.0.1') && document.body && document.body.innerText.includes('code')",
        );
        let text = b.script("return document.body.innerText");
        serde_json::from_str(text.as_str().unwrap_or_default()).expect("an APIJSON answer")
    };
    let r = follow("proof");
    assert_eq!(
        code(&r),
        200,
        "the login cookie is sent on a cross-site navigation, so the test is real: {r}"
    );
    let r = follow("write");
    assert_eq!(code(&r), 405, "a link cannot write: {r}");
    assert_eq!(content(&mut ada, moment), before, "nothing changed");
}
