//! Exposure: `/openapi.json` follows `openapi` ("public", "debug", "off") and `/metrics` is
//! served only behind `metrics_token` or on its own `metrics_listen` address, so neither the
//! schema's private corners nor the server's counters are public by default.

use crate::support::Reply;
use crate::support::{free_port, Client, Server};

fn get(c: &mut Client, path: &str) -> Reply {
    c.get(path).expect("an answer")
}

#[test]
fn openapi_follows_its_setting() {
    let public = Server::fresh_sqlite("");
    let r = get(&mut public.client(), "/openapi.json");
    assert_eq!(r.status, 200, "public by default: {}", r.text);
    assert!(!r.text.contains("\"x-apijson-requests\":"), "no structures");

    for (config, why) in [
        ("openapi = \"off\"\n", "off"),
        ("openapi = \"debug\"\n", "debug"),
    ] {
        let s = Server::fresh_sqlite(config);
        let r = get(&mut s.client(), "/openapi.json");
        assert_eq!(r.status, 404, "{config}: {}", r.text);
        let v = r.json().expect("an APIJSON envelope");
        assert_eq!(v["code"], 404, "{v}");
        assert!(
            v["msg"]
                .as_str()
                .is_some_and(|m| m.contains("openapi") && m.contains(why)),
            "the refusal names the setting: {v}"
        );
    }
    let debug = Server::fresh_sqlite("openapi = \"debug\"\ndebug = true\n");
    let r = get(&mut debug.client(), "/openapi.json");
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(
        r.text.contains("\"x-apijson-requests\":"),
        "debug has the structures"
    );
}

#[test]
fn metrics_need_their_token_or_their_own_listener() {
    let closed = Server::fresh_sqlite("");
    let r = get(&mut closed.client(), "/metrics");
    assert_eq!(r.status, 404, "not served by default: {}", r.text);
    assert!(
        r.text.contains("metrics_token") && r.text.contains("metrics_listen"),
        "{}",
        r.text
    );

    let token = Server::fresh_sqlite("metrics_token = \"scrape-me\"\n");
    let r = get(&mut token.client(), "/metrics");
    assert_eq!(r.status, 401, "{}", r.text);
    assert_eq!(r.header("www-authenticate"), Some("Bearer"));
    let r = get(&mut token.client().with_only_bearer("guessed"), "/metrics");
    assert_eq!(r.status, 401, "{}", r.text);
    let r = get(
        &mut token.client().with_only_bearer("scrape-me"),
        "/metrics",
    );
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(r.text.contains("apijet_requests_total"), "{}", r.text);

    let port = free_port();
    let own = Server::fresh_sqlite(&format!("metrics_listen = \"127.0.0.1:{port}\"\n"));
    let r = get(&mut own.client(), "/metrics");
    assert_eq!(r.status, 404, "not on the API listener: {}", r.text);
    let mut scraper = Client::new(&format!("http://127.0.0.1:{port}"));
    let r = get(&mut scraper, "/metrics");
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(r.text.contains("apijet_connections_open"), "{}", r.text);
    let r = get(&mut scraper, "/get/%7B%7D");
    assert_eq!(r.status, 404, "the metrics listener serves nothing else");
}
