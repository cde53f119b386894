//! One client, one identity, in every limiter: a client is its connection's peer, or what a
//! trusted proxy (`trusted_proxies`) says in a PROXY protocol header or in `Forwarded` /
//! `X-Forwarded-For`, and nobody else's word; IPv6 clients count by their /64. (The login
//! limiter and the live answers counted raw IPv6 addresses, anonymous reads per /64, and
//! behind a proxy every client shared the proxy's address.)

use crate::support::{code, Server};
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::TcpStream;

/// A wrong login for a phone of its own (so that only the address's count can refuse it),
/// sent as from `from` (an `X-Forwarded-For` hop).
fn wrong_login(server: &Server, from: &str, n: u32) -> Value {
    let body = json!({"phone": format!("139{n:08}"), "password": "wrong-one"}).to_string();
    server
        .client()
        .request(
            "POST",
            "/login",
            &[("X-Forwarded-For", from)],
            body.as_bytes(),
        )
        .expect("answer")
        .json()
        .expect("JSON")
}

/// A wrong login over a raw connection that starts with `preamble` (a PROXY header).
fn wrong_login_after(server: &Server, preamble: &[u8], n: u32) -> Value {
    let body = json!({"phone": format!("139{n:08}"), "password": "wrong-one"}).to_string();
    // One write: a server that refuses the preamble closes at once, and a second write would
    // meet a closed socket before the answer is read.
    let mut sent = preamble.to_vec();
    write!(
        sent,
        "POST /login HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .expect("request");
    let mut s = TcpStream::connect(("127.0.0.1", server.port)).expect("connect");
    let written = s.write_all(&sent);
    let mut answer = Vec::new();
    let read = s.read_to_end(&mut answer);
    // A refusal may close the connection with part of the request unread (a reset): what
    // arrived before it is the answer.
    if answer.is_empty() {
        written.expect("send");
        read.expect("answer");
    }
    let answer = String::from_utf8_lossy(&answer);
    let json = answer.split("\r\n\r\n").nth(1).unwrap_or_default();
    serde_json::from_str(json).unwrap_or_else(|_| json!({"code": 0, "raw": answer}))
}

#[test]
fn forwarding_headers_name_the_client_only_when_a_trusted_proxy_sends_them() {
    // Two failures per address, then 429 for that address whatever the phone.
    let limits = "login_failures_per_address = 2\nlogin_failures_per_phone = 100\n";
    let trusting = Server::fresh_sqlite(&format!("{limits}trusted_proxies = [\"127.0.0.1\"]\n"));
    for n in 0..2 {
        assert_eq!(code(&wrong_login(&trusting, "203.0.113.1", n)), 404);
    }
    let locked = wrong_login(&trusting, "203.0.113.1", 2);
    assert_eq!(code(&locked), 429, "{locked}");
    assert!(
        locked["msg"]
            .as_str()
            .unwrap_or_default()
            .contains("login_failures_per_address"),
        "{locked}"
    );
    // Another client behind the same proxy has its own count.
    assert_eq!(code(&wrong_login(&trusting, "203.0.113.2", 3)), 404);
    // What a client writes before the proxy's hop is not believed.
    assert_eq!(
        code(&wrong_login(&trusting, "203.0.113.7, 203.0.113.1", 4)),
        429
    );
    let forwarded = json!({"phone": "13900000005", "password": "wrong-one"}).to_string();
    let r = trusting
        .client()
        .request(
            "POST",
            "/login",
            &[("Forwarded", "for=\"203.0.113.1:4711\"")],
            forwarded.as_bytes(),
        )
        .expect("answer")
        .json()
        .expect("JSON");
    assert_eq!(code(&r), 429, "Forwarded names the same client: {r}");

    // Without trusted_proxies every request is its connection's: the headers change nothing.
    let plain = Server::fresh_sqlite(limits);
    assert_eq!(code(&wrong_login(&plain, "203.0.113.1", 0)), 404);
    assert_eq!(code(&wrong_login(&plain, "203.0.113.2", 1)), 404);
    assert_eq!(code(&wrong_login(&plain, "203.0.113.3", 2)), 429);
}

#[test]
fn ipv6_clients_count_by_their_64_in_the_login_limits_and_the_live_answers() {
    let server = Server::fresh_sqlite(
        "trusted_proxies = [\"127.0.0.1\"]\nlogin_failures_per_address = 2\n\
         login_failures_per_phone = 100\nlive_max_per_visitor = 1\n",
    );
    assert_eq!(code(&wrong_login(&server, "2001:db8:1:2::1", 0)), 404);
    assert_eq!(code(&wrong_login(&server, "2001:db8:1:2:ffff::9", 1)), 404);
    assert_eq!(
        code(&wrong_login(&server, "[2001:db8:1:2::77]:443", 2)),
        429
    );
    assert_eq!(code(&wrong_login(&server, "2001:db8:1:3::1", 3)), 404);

    // One open subscription per visitor: a second from the same /64 is refused.
    let subscribe = |from: &str| {
        let mut s = TcpStream::connect(("127.0.0.1", server.port)).expect("connect");
        let body = json!({"User": {"id": 82002}}).to_string();
        write!(
            s,
            "POST /subscribe HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: {from}\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .expect("send");
        let mut head = [0u8; 2048];
        let n = s.read(&mut head).expect("answer");
        (String::from_utf8_lossy(&head[..n]).into_owned(), s)
    };
    let (first, _open) = subscribe("2001:db8:1:2::1");
    assert!(first.contains("text/event-stream"), "{first}");
    let (second, _) = subscribe("2001:db8:1:2::2");
    assert!(second.contains("live_max_per_visitor"), "{second}");
    let (other, _other_open) = subscribe("2001:db8:1:3::2");
    assert!(other.contains("text/event-stream"), "{other}");
}

#[test]
fn a_proxy_protocol_header_from_a_trusted_proxy_names_the_client() {
    let limits = "login_failures_per_address = 2\nlogin_failures_per_phone = 100\n";
    let server = Server::fresh_sqlite(&format!("{limits}trusted_proxies = [\"127.0.0.0/8\"]\n"));
    let v1 = |client: &str| format!("PROXY TCP4 {client} 127.0.0.1 40000 8080\r\n").into_bytes();
    let v2 = |octets: [u8; 4]| {
        let mut block = b"\r\n\r\n\0\r\nQUIT\n".to_vec();
        block.extend_from_slice(&[0x21, 0x11, 0, 12]);
        block.extend_from_slice(&octets);
        block.extend_from_slice(&[127, 0, 0, 1, 0x9c, 0x40, 0x1f, 0x90]);
        block
    };
    assert_eq!(
        code(&wrong_login_after(&server, &v1("203.0.113.5"), 0)),
        404
    );
    assert_eq!(
        code(&wrong_login_after(&server, &v2([203, 0, 113, 5]), 1)),
        404
    );
    // The same client by either version: its address's count is spent.
    let r = wrong_login_after(&server, &v1("203.0.113.5"), 2);
    assert_eq!(code(&r), 429, "{r}");
    assert_eq!(
        code(&wrong_login_after(&server, &v2([203, 0, 113, 6]), 3)),
        404
    );
    // A plain request from the trusted proxy (no header) is the proxy's own.
    assert_eq!(code(&wrong_login_after(&server, b"", 4)), 404);

    // From a peer that is not trusted, a PROXY line is no HTTP: the request is refused.
    let untrusting = Server::fresh_sqlite(limits);
    let r = wrong_login_after(&untrusting, &v1("203.0.113.5"), 0);
    assert_eq!(code(&r), 400, "{r}");
}
