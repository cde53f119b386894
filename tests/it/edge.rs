//! The HTTP edge under hostile clients: header, body and idle timeouts, the connection cap,
//! and HTTP-level refusals answered as APIJSON envelopes (with their HTTP status kept).

use crate::support::Server;
use serde_json::Value;
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

fn sqlite_server(_test: &str, config: &str) -> Server {
    Server::fresh_sqlite(config)
}

/// Reads until the server closes the connection (or `limit` passes); the bytes read.
fn read_until_closed(s: &mut TcpStream, limit: Duration) -> Result<Vec<u8>, String> {
    s.set_read_timeout(Some(limit)).expect("timeout");
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return Ok(out),
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == ErrorKind::ConnectionReset => return Ok(out),
            Err(e) => {
                return Err(format!(
                    "still open after {limit:?} ({e}), having read: {}",
                    String::from_utf8_lossy(&out)
                ))
            }
        }
    }
}

/// The body of a raw HTTP/1.1 answer, parsed as JSON.
fn body_json(raw: &[u8]) -> Value {
    let text = String::from_utf8_lossy(raw);
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
    serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

#[test]
fn slow_loris_is_cut_off_after_the_header_timeout() {
    let server = sqlite_server(
        "edge_slow_loris",
        "header_timeout_ms = 1000\nidle_timeout_ms = 20000\n",
    );
    let mut s = TcpStream::connect(("127.0.0.1", server.port)).expect("connect");
    let started = Instant::now();
    // One header byte every 200 ms: never a complete head.
    let request = b"POST /get HTTP/1.1\r\nHost: x\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    let mut cut = None;
    for b in request.iter() {
        if s.write_all(&[*b]).is_err() {
            cut = Some(started.elapsed());
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
        let mut probe = [0u8; 1];
        s.set_nonblocking(true).expect("nonblocking");
        let closed = matches!(s.read(&mut probe), Ok(0));
        s.set_nonblocking(false).expect("blocking");
        if closed {
            cut = Some(started.elapsed());
            break;
        }
    }
    let cut = cut.expect("the server kept a trickling connection open for 15 s");
    assert!(
        cut >= Duration::from_millis(900) && cut < Duration::from_secs(4),
        "closed after {cut:?}, expected about header_timeout_ms = 1 s"
    );
    // The server still serves everyone else.
    assert_eq!(server.post("/get", r#"{"User":{"id":82001}}"#)["code"], 200);
}

#[test]
fn an_idle_keep_alive_connection_is_closed_after_the_idle_timeout() {
    let server = sqlite_server(
        "edge_idle",
        "header_timeout_ms = 20000\nidle_timeout_ms = 1000\n",
    );
    let mut s = TcpStream::connect(("127.0.0.1", server.port)).expect("connect");
    let started = Instant::now();
    let got = read_until_closed(&mut s, Duration::from_secs(10)).expect("closed");
    assert!(got.is_empty());
    let after = started.elapsed();
    assert!(
        after >= Duration::from_millis(900) && after < Duration::from_secs(4),
        "closed after {after:?}, expected about idle_timeout_ms = 1 s"
    );
}

#[test]
fn a_body_that_stops_coming_gets_a_408_envelope() {
    let server = sqlite_server("edge_body_timeout", "body_timeout_ms = 1000\n");
    let mut s = TcpStream::connect(("127.0.0.1", server.port)).expect("connect");
    s.write_all(b"POST /get HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"User\":")
        .expect("write");
    let started = Instant::now();
    let raw = read_until_closed(&mut s, Duration::from_secs(10)).expect("answered and closed");
    assert!(started.elapsed() < Duration::from_secs(4));
    let text = String::from_utf8_lossy(&raw);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    let v = body_json(&raw);
    assert_eq!(v["ok"], false);
    assert_eq!(v["code"], 408);
    assert!(
        v["msg"].as_str().unwrap_or("").contains("body_timeout_ms"),
        "{v}"
    );
}

#[test]
fn a_2_mib_body_gets_a_413_envelope() {
    let server = sqlite_server("edge_413", "");
    let big = format!(r#"{{"User":{{"name":"{}"}}}}"#, "a".repeat(2 << 20));
    let reply = server.client().post("/get", &big).expect("answer");
    assert_eq!(reply.status, 413, "{}", reply.text);
    let v = reply.json().expect("a JSON envelope");
    assert_eq!(v["ok"], false);
    assert_eq!(v["code"], 413);
    assert!(
        v["msg"].as_str().unwrap_or("").contains("max_body_bytes"),
        "{v}"
    );
    // Chunked, without a length: refused the same way once the limit is crossed.
    let mut s = TcpStream::connect(("127.0.0.1", server.port)).expect("connect");
    s.write_all(
        b"POST /get HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n",
    )
    .expect("write");
    let chunk = vec![b'a'; 64 * 1024];
    for _ in 0..32 {
        if s.write_all(format!("{:x}\r\n", chunk.len()).as_bytes())
            .is_err()
            || s.write_all(&chunk).is_err()
            || s.write_all(b"\r\n").is_err()
        {
            break;
        }
    }
    let raw = read_until_closed(&mut s, Duration::from_secs(10)).unwrap_or_default();
    if !raw.is_empty() {
        assert!(String::from_utf8_lossy(&raw).starts_with("HTTP/1.1 413"));
        assert_eq!(body_json(&raw)["code"], 413);
    }
}

#[test]
fn http_refusals_are_apijson_envelopes() {
    let server = sqlite_server("edge_envelopes", "");
    let mut c = server.client();
    // 404: no such route.
    let r = c.get("/no/such/route").expect("answer");
    assert_eq!(r.status, 404);
    let v = r.json().expect("JSON");
    assert_eq!(
        (v["ok"].clone(), v["code"].clone()),
        (false.into(), 404.into())
    );
    // 405: a GET on a POST route.
    let r = c.get("/login").expect("answer");
    assert_eq!(r.status, 405);
    assert_eq!(r.json().expect("JSON")["code"], 405);
    // An unparsable URL: bad percent-encoding in the request-in-the-URL form.
    let r = c.get("/get/%ZZ%7B").expect("answer");
    assert!(r.status == 400 || r.status == 200, "{}", r.status);
    let v = r.json().expect("JSON");
    assert_eq!(v["ok"], false);
    assert!(v["code"].as_i64().unwrap_or(0) >= 400, "{v}");
    // A bad query string.
    let r = c.get("/get/%7B%7D?%ZZ=1").expect("answer");
    assert!(r.json().is_ok(), "{}", r.text);
}

/// hyper answers a request it cannot parse by itself; the answer is an envelope all the same,
/// its status kept, the connection closed.
#[test]
fn requests_the_http_parser_refuses_get_envelopes() {
    let server = sqlite_server("edge_parser_refusals", "");
    let url = format!(
        "/get/{}",
        "%7B%22User%22%3A%7B%22id%22%3A82001%7D%7D".repeat(100 * 1024 / 40)
    );
    let head_of = |status: u16, request: &[u8]| {
        let mut s = TcpStream::connect(("127.0.0.1", server.port)).expect("connect");
        s.write_all(request).expect("write");
        let raw = read_until_closed(&mut s, Duration::from_secs(10)).expect("closed");
        let text = String::from_utf8_lossy(&raw).to_string();
        assert!(
            text.starts_with(&format!("HTTP/1.1 {status} ")),
            "{status}: {}",
            &text[..text.len().min(300)]
        );
        assert!(text.contains("application/json"), "{text}");
        let v = body_json(&raw);
        assert_eq!(
            (v["ok"].clone(), v["code"].clone()),
            (false.into(), status.into())
        );
        v["msg"].as_str().unwrap_or_default().to_string()
    };
    // A 100 KB URL: past the 65,534 bytes a request line may have.
    let msg = head_of(
        414,
        format!("GET {url} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes(),
    );
    assert!(msg.contains("POST"), "{msg}");
    // A head past hyper's buffer.
    let big = format!(
        "GET /health HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n",
        "a".repeat(600 * 1024)
    );
    head_of(431, big.as_bytes());
    // Not HTTP at all.
    head_of(400, b"HELLO THERE\r\n\r\n");
    // The server still answers, and an ordinary answer is untouched.
    let r = server.post_json("/get", &serde_json::json!({"User": {"id": 82001}}));
    assert_eq!(r["User"]["id"], 82001, "{r}");
}

#[test]
fn the_connection_cap_holds() {
    let server = sqlite_server(
        "edge_cap",
        "max_connections = 3\nheader_timeout_ms = 20000\nidle_timeout_ms = 20000\n\
         metrics_token = \"edge\"\n",
    );
    // Wait until the start-up probes' connections are gone: only the asking one is open.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut s = TcpStream::connect(("127.0.0.1", server.port)).expect("connect");
        s.write_all(
            b"GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer edge\r\nConnection: close\r\n\r\n",
        )
            .expect("write");
        let raw = read_until_closed(&mut s, Duration::from_secs(5)).expect("metrics");
        let open = String::from_utf8_lossy(&raw).lines().find_map(|l| {
            l.strip_prefix("apijet_connections_open ")
                .map(str::to_string)
        });
        if open.as_deref() == Some("1") {
            break;
        }
        assert!(Instant::now() < deadline, "connections stay open: {open:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(100));
    // Three idle connections fill the cap.
    let held: Vec<TcpStream> = (0..3)
        .map(|_| TcpStream::connect(("127.0.0.1", server.port)).expect("connect"))
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let mut extra = TcpStream::connect(("127.0.0.1", server.port)).expect("connect");
    extra
        .write_all(b"POST /get HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
        .expect("write");
    let raw = read_until_closed(&mut extra, Duration::from_secs(10)).expect("closed");
    let text = String::from_utf8_lossy(&raw);
    assert!(text.starts_with("HTTP/1.1 503"), "{text}");
    assert_eq!(body_json(&raw)["code"], 503);
    // A slot frees when one closes.
    drop(held);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(server.post("/get", r#"{"User":{"id":82001}}"#)["code"], 200);
}

#[test]
fn cors_preflight_and_credentialed_calls_echo_the_origin() {
    let server = sqlite_server("edge_cors", "");
    let origin = "http://localhost:3000";
    let pre = server
        .client()
        .request(
            "OPTIONS",
            "/get",
            &[
                ("Origin", origin),
                ("Access-Control-Request-Method", "POST"),
                ("Access-Control-Request-Headers", "content-type"),
            ],
            b"",
        )
        .expect("preflight");
    assert!(
        (200..300).contains(&pre.status),
        "preflight answered {}",
        pre.status
    );
    let h = |name: &str| pre.header(name).unwrap_or("").to_string();
    assert_eq!(h("access-control-allow-origin"), origin);
    assert_eq!(h("access-control-allow-credentials"), "true");
    assert!(h("access-control-allow-methods").contains("POST"));
    assert!(h("access-control-allow-headers")
        .to_lowercase()
        .contains("content-type"));
    let from = |s: &Server, origin: &str| {
        s.client()
            .request(
                "POST",
                "/get",
                &[("Origin", origin)],
                br#"{"User":{"id":82001}}"#,
            )
            .expect("call")
    };
    let r = from(&server, origin);
    assert_eq!(r.header("access-control-allow-origin"), Some(origin));

    // A configured list: other origins get no CORS headers.
    let listed = sqlite_server(
        "edge_cors_list",
        "cors_origins = [\"https://app.example.com\"]\n",
    );
    let r = from(&listed, "https://evil.example.com");
    assert!(r.header("access-control-allow-origin").is_none());
    let r = from(&listed, "https://app.example.com");
    assert_eq!(
        r.header("access-control-allow-origin"),
        Some("https://app.example.com")
    );
}

/// Answers are compressed only for a client that asks (`Accept-Encoding`), and an answer that
/// would be compressed for one says `Vary: accept-encoding` whether the client asked or not,
/// so that a cache never hands a compressed answer to a client that cannot read it.
#[test]
fn answers_vary_on_accept_encoding_whether_it_is_sent_or_not() {
    let server = sqlite_server("edge_vary", "");
    let call = |headers: &[(&str, &str)]| {
        server
            .client()
            .request("POST", "/get", headers, br#"{"User":{"id":82001}}"#)
            .expect("call")
    };
    let varies = |headers: &[(String, String)]| {
        headers.iter().any(|(k, v)| {
            k.eq_ignore_ascii_case("vary") && v.to_ascii_lowercase().contains("accept-encoding")
        })
    };
    let plain = call(&[]);
    assert_eq!(plain.json().expect("JSON")["code"], 200);
    assert_eq!(plain.header("content-encoding"), None);
    assert!(varies(&plain.headers), "{:?}", plain.headers);
    for encoding in ["gzip", "br", "zstd"] {
        let compressed = call(&[("Accept-Encoding", encoding)]);
        assert_eq!(compressed.status, 200);
        assert_eq!(compressed.header("content-encoding"), Some(encoding));
        assert!(varies(&compressed.headers), "{:?}", compressed.headers);
    }
    let identity = call(&[("Accept-Encoding", "identity")]);
    assert_eq!(identity.header("content-encoding"), None);
    assert_eq!(
        identity.text,
        plain.text.replace(
            &plain.json().expect("JSON")["time"].to_string(),
            &identity.json().expect("JSON")["time"].to_string(),
        )
    );
    assert!(varies(&identity.headers), "{:?}", identity.headers);
}
