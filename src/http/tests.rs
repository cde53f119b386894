//! The HTTP edge in process: the routes over a started state on a fresh SQLite demo database,
//! called without a socket or a child process. Every entry point answers through the same three
//! stages, so the same request answers the same whichever way it came in; a write moves the
//! generations of what it changed before its answer is sent; an error reaches the edge typed,
//! and the envelope's code and the one the access log reads are the same.

use super::drain::Drain;
use super::middleware::{Around, Edge};
use super::routes::routes;
use crate::app::AppState;
use crate::config::Config;
use crate::observe::Facts;
use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use axum::response::Response;
use axum::Router;
use http_body_util::BodyExt;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tower::ServiceExt;

/// A started state and its routes over a demo database of its own, removed when dropped.
struct InProcess {
    state: Arc<AppState>,
    routes: Router,
    dir: PathBuf,
}

impl Drop for InProcess {
    fn drop(&mut self) {
        self.state.live.shutdown();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

async fn started(name: &str) -> InProcess {
    let dir = std::env::temp_dir().join(format!("apijet-in-process-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let cfg = Config {
        db: format!("sqlite://{}", dir.join("demo.db").display()),
        live_interval_ms: 50,
        token_secret: Some("in-process tests of the HTTP edge".into()),
        ..Config::default()
    };
    let state = Arc::new(AppState::start(&cfg).await.expect("the state starts"));
    state.live.start();
    let drain = Arc::new(Drain::new(Duration::from_millis(cfg.drain_ms)));
    let routes = routes(Arc::clone(&state), &cfg, &drain);
    InProcess { state, routes, dir }
}

impl InProcess {
    async fn send(&self, method: &str, uri: &str, body: &str, token: Option<&str>) -> Response {
        let mut request = Request::builder()
            .method(method)
            .uri(uri)
            .header(header::CONTENT_TYPE, "application/json");
        if let Some(token) = token {
            request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        let request = request
            .body(Body::from(body.to_string()))
            .expect("a request");
        self.routes.clone().oneshot(request).await.expect("routed")
    }

    /// The answer of a call, as JSON, and the code the access log reads from the response.
    async fn json(
        &self,
        method: &str,
        uri: &str,
        body: &Value,
        token: Option<&str>,
    ) -> (Value, u16) {
        let r = self.send(method, uri, &body.to_string(), token).await;
        assert_eq!(r.status(), StatusCode::OK, "{uri}");
        let logged = r.extensions().get::<Facts>().map_or(0, |f| f.code);
        let bytes = r.into_body().collect().await.expect("a body").to_bytes();
        let answer = serde_json::from_slice(&bytes).expect("a JSON answer");
        (answer, logged)
    }

    async fn post(&self, uri: &str, body: &Value, token: Option<&str>) -> Value {
        self.json("POST", uri, body, token).await.0
    }

    /// What the MCP tool `method` answers for `request` at `/mcp`, as JSON (the text the
    /// agent reads).
    async fn tool_call(&self, method: &str, request: &Value) -> Value {
        let call = json!({
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": method, "arguments": {"request": request}}
        });
        let request = Request::builder()
            .method("POST")
            .uri("/mcp")
            .header(header::HOST, "localhost")
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::ACCEPT, "application/json, text/event-stream")
            .body(Body::from(call.to_string()))
            .expect("a request");
        let r = self.routes.clone().oneshot(request).await.expect("routed");
        let status = r.status();
        let bytes = r.into_body().collect().await.expect("a body").to_bytes();
        assert_eq!(
            status,
            StatusCode::OK,
            "{}",
            String::from_utf8_lossy(&bytes)
        );
        let answer: Value = serde_json::from_slice(&bytes).expect("a JSON-RPC answer");
        let text = answer["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_else(|| panic!("a text content: {answer}"));
        serde_json::from_str(text).expect("the tool's text is the APIJSON answer")
    }

    async fn login_as_ada(&self) -> String {
        let body = json!({"type": 0, "phone": "13000082001", "password": "123456"});
        let answer = self.post("/login", &body, None).await;
        answer["token"].as_str().expect("a token").to_string()
    }
}

/// An answer without its `time`.
fn content(mut v: Value) -> Value {
    if let Some(m) = v.as_object_mut() {
        m.remove("time");
    }
    v
}

fn url_encoded(v: &Value) -> String {
    percent_encoding::utf8_percent_encode(&v.to_string(), percent_encoding::NON_ALPHANUMERIC)
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_entry_point_answers_a_read_as_post_get_answers_it() {
    let s = started("reads").await;
    let ada = json!({"User": {"id": 82001}});
    let by_post = content(s.post("/get", &ada, None).await);
    assert_eq!(by_post["code"], 200, "{by_post}");
    assert_eq!(by_post["User"]["id"], 82001, "{by_post}");
    let in_url = format!("/get/{}", url_encoded(&ada));
    let (by_url, _) = s.json("GET", &in_url, &json!({}), None).await;
    assert_eq!(content(by_url), by_post);
    let by_tool = s.tool_call("get", &ada).await;
    assert_eq!(content(by_tool), by_post, "an agent's MCP tool call");
    let by_tag = s.post("/get/User", &json!({"id": 82001}), None).await;
    let mut tagged = by_post.clone();
    tagged["User"] = by_tag["User"].clone();
    assert_eq!(content(by_tag), tagged);
    // The Document template of /router/get/moments, and the request it stands for.
    let routed = s.post("/router/get/moments", &json!({}), None).await;
    let template = json!({"Moment[]": {"count": 3, "page": 0, "Moment": {"@order": "id+"}}});
    let direct = s.post("/get", &template, None).await;
    assert_eq!(content(routed), content(direct.clone()));
    assert_eq!(
        direct["Moment[]"].as_array().map(Vec::len),
        Some(3),
        "{direct}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_moves_what_it_changed_before_its_answer_and_crud_reads_see_its_writes() {
    let s = started("writes").await;
    let token = s.login_as_ada().await;
    let changes = &s.state.pipeline.changes;
    let before = changes.follow();
    let written = s
        .post(
            "/post",
            &json!({"Moment": {"content": "in process"}, "tag": "Moment"}),
            Some(&token),
        )
        .await;
    assert_eq!(written["code"], 200, "{written}");
    assert!(changes.moved_since(before, |t| t == "Moment"));
    assert!(!changes.moved_since(before, |t| t == "Comment"));
    let id = written["Moment"]["id"].clone();
    let after_post = changes.stamp();
    let crud = s
        .post(
            "/crud",
            &json!({
                "@post": {"Comment": "Comment"},
                "Comment": {"momentId": id, "content": "in process too"},
                "Moment": {"id": id}
            }),
            Some(&token),
        )
        .await;
    assert_eq!(crud["code"], 200, "{crud}");
    assert!(crud["Comment"]["id"].is_number(), "{crud}");
    assert_eq!(crud["Moment"]["content"], "in process", "{crud}");
    assert!(changes.moved_since(after_post, |t| t == "Comment"));
    let comment = json!({"Comment": {"id": crud["Comment"]["id"]}});
    let read = s.post("/get", &comment, None).await;
    assert_eq!(read["Comment"]["content"], "in process too", "{read}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_reach_the_edge_typed_and_the_log_reads_the_code_the_client_gets() {
    let s = started("errors").await;
    let cases = [
        ("/nosuch", json!({}), 406),
        ("/post", json!({"Moment": {"content": "no login"}}), 407),
        ("/get", json!({"Nosuch": {"id": 1}}), 401),
        ("/gets", json!({"User": {"id": 82001}}), 407),
        (
            "/get",
            json!({"User": {"id": 82001, "@column": "nosuch"}}),
            406,
        ),
    ];
    for (uri, body, code) in cases {
        let (answer, logged) = s.json("POST", uri, &body, None).await;
        assert_eq!(answer["code"], code, "{uri} {body}: {answer}");
        assert_eq!(
            u64::from(logged),
            answer["code"].as_u64().unwrap_or(0),
            "{uri} {body}"
        );
    }
    let r = s.send("POST", "/get", "[1, 2", None).await;
    let logged = r.extensions().get::<Facts>().map_or(0, |f| f.code);
    let bytes = r.into_body().collect().await.expect("a body").to_bytes();
    let answer: Value = serde_json::from_slice(&bytes).expect("JSON");
    assert_eq!(
        (answer["code"].as_u64(), logged),
        (Some(400), 400),
        "{answer}"
    );
}

/// The next event of a stream of events, as its data.
async fn next_event(body: &mut Body) -> Value {
    let mut text = String::new();
    loop {
        let frame = tokio::time::timeout(Duration::from_secs(20), body.frame())
            .await
            .expect("an event in time")
            .expect("the stream is open")
            .expect("a frame");
        if let Ok(data) = frame.into_data() {
            text.push_str(&String::from_utf8_lossy(&data));
        }
        if let Some(data) = text
            .split("\n\n")
            .filter_map(|event| event.lines().find_map(|l| l.strip_prefix("data: ")))
            .next()
        {
            return serde_json::from_str(data).expect("JSON data");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscription_answers_what_its_get_answers_and_follows_a_write() {
    let s = started("subscribe").await;
    let token = s.login_as_ada().await;
    let ada = json!({"User": {"id": 82001}});
    let r = s.send("POST", "/subscribe", &ada.to_string(), None).await;
    assert_eq!(
        r.headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok()),
        Some("text/event-stream; charset=utf-8")
    );
    let mut body = r.into_body();
    let first = next_event(&mut body).await;
    assert_eq!(content(first), content(s.post("/get", &ada, None).await));
    let edit = json!({"User": {"id": 82001, "tag": "followed in process"}, "tag": "User"});
    let edited = s.post("/put", &edit, Some(&token)).await;
    assert_eq!(edited["code"], 200, "{edited}");
    let next = next_event(&mut body).await;
    assert_eq!(next["User"]["tag"], "followed in process", "{next}");
    assert_eq!(content(next), content(s.post("/get", &ada, None).await));
    // A refused subscription is answered as its GET is refused, as JSON.
    let refused = s
        .post("/subscribe/gets", &json!({"User": {"id": 82001}}), None)
        .await;
    assert_eq!(refused["code"], 407, "{refused}");
}

/// Calls the middleware answers itself (`POST /{method}` without a query, after reading the
/// body) answer as their route does: the same status, envelope and headers of the call, and
/// every other request still reaches its route.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_through_the_middleware_answer_as_their_routes_do() {
    let s = started("middleware").await;
    let edge = Arc::new(Edge {
        metrics: Arc::clone(&s.state.pipeline.metrics),
        max_body: 1 << 20,
        body_timeout: Duration::from_secs(30),
        slow: None,
        server_timing: false,
    });
    let stack = Around::new(edge, Arc::clone(&s.state), s.routes.clone());
    let ada = json!({"User": {"id": 82001}}).to_string();
    let cases = [
        ("/get", ada.clone()),
        ("/head", ada.clone()),
        ("/gets", ada.clone()),
        (
            "/get",
            json!({"Moment[]": {"count": 3, "Moment": {"@order": "id+"}}}).to_string(),
        ),
        ("/get", json!({"Nosuch": {"id": 1}}).to_string()),
        (
            "/post",
            json!({"Moment": {"content": "no login"}}).to_string(),
        ),
        ("/get", "[1, 2".to_string()),
        ("/get?@explain=true", ada.clone()),
        ("/get/User", json!({"id": 82001}).to_string()),
        ("/nosuch", "{}".to_string()),
        ("/GET", ada.clone()),
    ];
    let request = |uri: &str, body: &str| {
        Request::builder()
            .method("POST")
            .uri(uri)
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(body.to_string()))
            .expect("a request")
    };
    let seen = |r: Response| async move {
        let status = r.status();
        let headers: Vec<_> = ["content-type", "x-apijet-statements", "x-apijet-cache"]
            .into_iter()
            .map(|h| r.headers().get(h).cloned())
            .collect();
        let bytes = r.into_body().collect().await.expect("a body").to_bytes();
        let answer = serde_json::from_slice(&bytes).map_or(Value::Null, content);
        (status, headers, answer)
    };
    for (uri, body) in cases {
        let through = stack.clone().oneshot(request(uri, &body)).await;
        let Ok(through) = through;
        let routed = s.routes.clone().oneshot(request(uri, &body)).await;
        let Ok(routed) = routed;
        let (through, routed) = (seen(through).await, seen(routed).await);
        assert_ne!(through.2, Value::Null, "{uri} {body}: a JSON answer");
        assert_eq!(through, routed, "{uri} {body}");
    }
}
