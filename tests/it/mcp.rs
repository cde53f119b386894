//! The MCP server, driven by the official MCP Python SDK (`mcp` on PyPI, which
//! `scripts/test.sh` installs; the client is `tests/it/mcp_client.py`) over both transports —
//! Streamable HTTP at `/mcp` and stdio through `apijet mcp` — on every engine: an agent gets
//! what an HTTP client with the same token gets, through the same rules, and answers that fit
//! a model's context.

use crate::support::{code, demo_databases, skip, Engine, Server};
use serde_json::{json, Value};
use std::io::Write;
use std::process::{Command, Stdio};

const ADA_PHONE: &str = "13000082001";
const ADA_PASSWORD: &str = "123456";
/// The protocol revision both SDKs speak today.
const PROTOCOL: &str = "2026-07-28";
const NESTED: &str = r#"{"[]":{"Moment":{},"User":{"id@":"/Moment/userId"}}}"#;

/// The Python with the MCP SDK: `APIJET_TEST_MCP_PYTHON`, else `python3` when it has it.
fn sdk() -> Option<String> {
    let python = std::env::var("APIJET_TEST_MCP_PYTHON").unwrap_or_else(|_| "python3".into());
    let ok = Command::new(&python)
        .args(["-c", "import mcp"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    ok.then_some(python)
}

/// How the client reaches the server.
enum Transport<'a> {
    Http {
        server: &'a Server,
        token: Option<String>,
        /// The token sent as the login cookie instead of `Authorization: Bearer`.
        as_cookie: bool,
    },
    Stdio {
        db: &'a str,
        config: std::path::PathBuf,
        env: Vec<(&'static str, String)>,
    },
}

impl Transport<'_> {
    fn plan(&self) -> Value {
        match self {
            Transport::Http {
                server,
                token,
                as_cookie,
            } => json!({"http": server.url("/mcp"), "token": token, "as_cookie": as_cookie}),
            Transport::Stdio { db, config, env } => {
                let env: serde_json::Map<String, Value> =
                    env.iter().map(|(k, v)| (k.to_string(), json!(v))).collect();
                json!({"stdio": {
                    "command": crate::support::apijet_bin(),
                    "args": ["mcp", "--db", db, "--config", config],
                    "env": env,
                }})
            }
        }
    }

    fn name(&self) -> String {
        match self {
            Transport::Http {
                token, as_cookie, ..
            } => match (token, as_cookie) {
                (None, _) => "http".into(),
                (Some(_), false) => "http with a token".into(),
                (Some(_), true) => "http with the login cookie".into(),
            },
            Transport::Stdio { env, .. } => {
                let who: Vec<&str> = env.iter().map(|(k, _)| *k).collect();
                format!("stdio {who:?}")
            }
        }
    }
}

/// Runs `steps` with the SDK's client over `transport`: one result per step.
fn agent(python: &str, transport: &Transport, steps: &[Value]) -> Vec<Value> {
    let mut plan = transport.plan();
    plan["steps"] = json!(steps);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/it/mcp_client.py");
    let mut child = Command::new(python)
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the MCP client starts");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(plan.to_string().as_bytes())
        .expect("the plan is written");
    let out = child.wait_with_output().expect("the MCP client ends");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}: the MCP client failed: {}\n{}",
        transport.name(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let answer: Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!(
            "{}: the client's output is not JSON ({e}): {stdout}",
            transport.name()
        )
    });
    assert_eq!(answer["protocol"], PROTOCOL, "{}", transport.name());
    assert_eq!(answer["server"], "apijet", "{}", transport.name());
    answer["results"].as_array().cloned().unwrap_or_default()
}

fn call(tool: &str, request: Value) -> Value {
    json!({"op": "call", "tool": tool, "arguments": {"request": request}})
}

/// The APIJSON answer a tool call's text holds (its last text: a cut answer's note comes
/// first), and whether the SDK saw a tool error.
fn answer_of(result: &Value) -> (bool, Value) {
    let texts = result["texts"]
        .as_array()
        .unwrap_or_else(|| panic!("{result}"));
    let last = texts.last().and_then(Value::as_str).unwrap_or_default();
    let v = serde_json::from_str(last).unwrap_or_else(|e| panic!("{e}: {last}"));
    (result["is_error"] == json!(true), v)
}

fn without_time(mut v: Value) -> Value {
    if let Some(m) = v.as_object_mut() {
        m.remove("time");
    }
    v
}

fn tools(result: &Value) -> Vec<String> {
    serde_json::from_value(result["tools"].clone()).unwrap_or_else(|_| panic!("{result}"))
}

fn ada_token(server: &Server) -> String {
    let mut c = server.client();
    c.login(ADA_PHONE, ADA_PASSWORD).expect("login");
    c.bearer().expect("a token").to_string()
}

const READS: [&str; 5] = ["describe", "get", "head", "gets", "heads"];
const WITH_WRITES: [&str; 8] = [
    "describe", "get", "head", "gets", "heads", "post", "put", "delete",
];

#[test]
fn agents_read_and_write_through_the_rules_of_their_token_over_http_and_stdio() {
    let Some(python) = sdk() else {
        skip("mcp: python3 with the MCP SDK (mcp on PyPI) not found (scripts/test.sh installs it)");
        return;
    };
    for (engine, url) in demo_databases("mcp_agents") {
        let server = Server::start(&url, "token_secret = \"mcp-agents-secret\"\n");
        let config = server.dir().join("config.toml");
        let token = ada_token(&server);
        let nested_by_http = without_time(server.post("/get", NESTED));
        assert_eq!(code(&nested_by_http), 200, "{engine}: {nested_by_http}");
        let anonymous = [
            Transport::Http {
                server: &server,
                token: None,
                as_cookie: false,
            },
            Transport::Stdio {
                db: &url,
                config: config.clone(),
                env: vec![],
            },
        ];
        for transport in &anonymous {
            let what = format!("{engine}, {}", transport.name());
            let r = agent(
                &python,
                transport,
                &[
                    json!({"op": "list_tools"}),
                    json!({"op": "call", "tool": "describe", "arguments": {}}),
                    call("get", serde_json::from_str(NESTED).expect("json")),
                    call("gets", json!({"tag": "Privacy", "Privacy": {"id": 82001}})),
                    call(
                        "post",
                        json!({"tag": "Comment", "Comment": {"momentId": 1001, "content": "anonymous"}}),
                    ),
                    call("get", json!({"Privacy": {"id": 82001}})),
                ],
            );
            assert_eq!(tools(&r[0]), READS, "{what}: no write tool without a login");
            let (failed, described) = answer_of(&r[1]);
            assert!(!failed, "{what}: {described}");
            check_public_description(&what, &described);
            let (failed, nested) = answer_of(&r[2]);
            assert!(!failed, "{what}: {nested}");
            assert_eq!(
                without_time(nested),
                nested_by_http,
                "{what}: the nested read is /get's"
            );
            for (step, refused) in [(3, "gets Privacy"), (4, "post Comment")] {
                let (failed, answer) = answer_of(&r[step]);
                assert!(
                    failed && code(&answer) == 407,
                    "{what}: {refused} without a login: {answer}"
                );
            }
            let (failed, answer) = answer_of(&r[5]);
            assert!(
                failed && code(&answer) == 401,
                "{what}: get Privacy: {answer}"
            );
            eprintln!(
                "mcp [{what}]: {PROTOCOL}, tools {:?}, describe {} tables, the nested read as \
                 /get ({} items), gets Privacy 407, post Comment 407, get Privacy 401 (tool errors)",
                tools(&r[0]),
                described["tables"].as_array().map_or(0, Vec::len),
                nested_by_http["[]"].as_array().map_or(0, Vec::len),
            );
        }
        let logged_in = [
            Transport::Http {
                server: &server,
                token: Some(token.clone()),
                as_cookie: false,
            },
            Transport::Stdio {
                db: &url,
                config: config.clone(),
                env: vec![("APIJET_MCP_TOKEN", token.clone())],
            },
            Transport::Stdio {
                db: &url,
                config: config.clone(),
                env: vec![
                    ("APIJET_MCP_PHONE", ADA_PHONE.into()),
                    ("APIJET_MCP_PASSWORD", ADA_PASSWORD.into()),
                ],
            },
        ];
        for transport in &logged_in {
            let what = format!("{engine}, {}", transport.name());
            let content = format!("written by an agent over {}", transport.name());
            let r = agent(
                &python,
                transport,
                &[
                    json!({"op": "list_tools"}),
                    json!({"op": "call", "tool": "describe", "arguments": {"tables": ["Privacy"]}}),
                    call("gets", json!({"tag": "Privacy", "Privacy": {"id": 82001}})),
                    call("gets", json!({"tag": "Privacy", "Privacy": {"id": 82002}})),
                    call(
                        "post",
                        json!({"tag": "Comment", "Comment": {"momentId": 1001, "content": content}}),
                    ),
                ],
            );
            assert_eq!(tools(&r[0]), WITH_WRITES, "{what}");
            let (_, described) = answer_of(&r[1]);
            let gets_privacy = described["requests"].as_array().is_some_and(|rs| {
                rs.iter()
                    .any(|x| x["method"] == "gets" && x["tag"] == "Privacy")
            });
            assert!(
                gets_privacy,
                "{what}: describe lists GETS Privacy: {described}"
            );
            let (failed, own) = answer_of(&r[2]);
            assert!(!failed, "{what}: {own}");
            assert_eq!(own["Privacy"]["id"], 82001, "{what}: {own}");
            assert_eq!(own["Privacy"]["phone"], ADA_PHONE, "{what}: {own}");
            assert!(own["Privacy"].get("_password").is_none(), "{what}: {own}");
            let (failed, other) = answer_of(&r[3]);
            assert!(
                failed && code(&other) != 200,
                "{what}: another user's Privacy: {other}"
            );
            let (failed, written) = answer_of(&r[4]);
            assert!(!failed, "{what}: {written}");
            let id = written["Comment"]["id"]
                .as_i64()
                .unwrap_or_else(|| panic!("{what}: {written}"));
            let read = server.post("/get", &json!({"Comment": {"id": id}}).to_string());
            assert_eq!(read["Comment"]["content"], json!(content), "{what}: {read}");
            assert_eq!(
                read["Comment"]["userId"], 82001,
                "{what}: written as Ada: {read}"
            );
            eprintln!(
                "mcp [{what}]: tools {:?}, gets Privacy 82001 200, gets Privacy 82002 {} (tool \
                 error), post Comment 200 (id {id}, read back through /get as Ada's)",
                tools(&r[0]),
                code(&other)
            );
        }
        // The login cookie, which a browser sends along with other pages' requests, is no
        // credential of /mcp.
        let by_cookie = Transport::Http {
            server: &server,
            token: Some(token.clone()),
            as_cookie: true,
        };
        let r = agent(&python, &by_cookie, &[json!({"op": "list_tools"})]);
        assert_eq!(
            tools(&r[0]),
            READS,
            "{engine}: a cookie is not a login here"
        );
        if engine == Engine::Sqlite {
            check_stdio_refuses_a_foreign_token(&url, &token);
        }
    }
}

/// What `describe` tells an anonymous visitor of the demo dataset: its public tables with
/// their columns, types and comments, never Privacy nor a `_` column; the functions with
/// their demos; no private structure.
fn check_public_description(what: &str, d: &Value) {
    let tables = d["tables"]
        .as_array()
        .unwrap_or_else(|| panic!("{what}: {d}"));
    let names: Vec<&str> = tables.iter().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(names, ["Comment", "Moment", "User"], "{what}: {d}");
    let moment = &tables[1];
    assert_eq!(moment["comment"], "Posts.", "{what}: {moment}");
    assert_eq!(
        moment["methods"],
        json!({"get": ["UNKNOWN"], "head": ["UNKNOWN"]}),
        "{what}"
    );
    let columns = moment["columns"].as_array().expect("columns");
    assert!(
        columns.contains(&json!({"name": "userId", "type": "integer"})),
        "{what}: {moment}"
    );
    assert!(
        columns.contains(&json!({"name": "praiseUserIdList", "type": "JSON"})),
        "{what}"
    );
    assert!(!d.to_string().contains("_password"), "{what}: {d}");
    assert_eq!(d["requests"], json!([]), "{what}: {d}");
    let contains = d["functions"]
        .as_array()
        .and_then(|f| f.iter().find(|f| f["name"] == "isContain"))
        .unwrap_or_else(|| panic!("{what}: {d}"));
    assert_eq!(contains["demo"]["value"], 82002, "{what}: {contains}");
}

/// A token signed with another `token_secret` fails the start of `apijet mcp`, saying why.
fn check_stdio_refuses_a_foreign_token(db: &str, token: &str) {
    let out = Command::new(crate::support::apijet_bin())
        .args(["mcp", "--db", db])
        .env("APIJET_TOKEN_SECRET", "another-secret")
        .env("APIJET_MCP_TOKEN", token)
        .stdin(Stdio::null())
        .output()
        .expect("apijet mcp runs");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("token_secret"), "{err}");
    assert!(out.stdout.is_empty(), "nothing but MCP on stdout");
}

#[test]
fn a_long_tool_answer_is_cut_with_count_and_page_guidance() {
    let Some(python) = sdk() else {
        skip("mcp: python3 with the MCP SDK (mcp on PyPI) not found (scripts/test.sh installs it)");
        return;
    };
    let request = json!({"[]": {"count": 40, "Moment": {"@order": "id+"}, "User": {"id@": "/Moment/userId"}}});
    for (engine, url) in demo_databases("mcp_long_answers") {
        let server = Server::start(&url, "mcp_max_answer_bytes = 4096\n");
        let config = server.dir().join("config.toml");
        let whole = server.post("/get", &request.to_string());
        let all = whole["[]"].as_array().cloned().expect("items");
        assert_eq!(all.len(), 40, "{engine}");
        let transports = [
            Transport::Http {
                server: &server,
                token: None,
                as_cookie: false,
            },
            Transport::Stdio {
                db: &url,
                config: config.clone(),
                env: vec![],
            },
        ];
        for transport in &transports {
            let what = format!("{engine}, {}", transport.name());
            let r = agent(&python, transport, &[call("get", request.clone())]);
            let texts = r[0]["texts"].as_array().cloned().unwrap_or_default();
            assert_eq!(
                texts.len(),
                2,
                "{what}: a note and the cut answer: {}",
                r[0]
            );
            let bytes: usize = texts.iter().filter_map(Value::as_str).map(str::len).sum();
            assert!(bytes <= 4096, "{what}: {bytes} bytes");
            let note = texts[0].as_str().unwrap_or_default();
            let (failed, cut) = answer_of(&r[0]);
            assert!(!failed, "{what}: {cut}");
            let kept = cut["[]"].as_array().cloned().unwrap_or_default();
            assert!(
                !kept.is_empty() && kept.len() < 40,
                "{what}: {}",
                kept.len()
            );
            assert_eq!(
                kept[..],
                all[..kept.len()],
                "{what}: the first items, as /get answers them"
            );
            let k = kept.len();
            assert!(note.contains(&format!("first {k} of 40")), "{what}: {note}");
            assert!(
                note.contains(&format!("\"count\":{k}")) && note.contains("\"page\":1"),
                "{what}: {note}"
            );
            // Following the guidance reads the next page whole.
            let next = json!({"[]": {"count": k, "page": 1, "Moment": {"@order": "id+"}, "User": {"id@": "/Moment/userId"}}});
            let r = agent(&python, transport, &[call("get", next)]);
            let (failed, page) = answer_of(&r[0]);
            assert!(!failed, "{what}: {page}");
            assert_eq!(
                r[0]["texts"].as_array().map(Vec::len),
                Some(1),
                "{what}: not cut"
            );
            assert_eq!(
                page["[]"].as_array().map(|p| p[..].to_vec()),
                Some(all[k..2 * k].to_vec()),
                "{what}"
            );
            eprintln!(
                "mcp [{what}]: 40 items cut to {k} in {bytes} bytes with guidance; count {k} \
                 page 1 read whole"
            );
        }
    }
}

/// Sends a `tools/call` of `get` with `request` on a connection of its own, whose answer
/// nobody will read, as the visitor of `token`.
fn send_tool_call(server: &Server, token: &str, request: Value) -> std::net::TcpStream {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "get", "arguments": {"request": request}}})
    .to_string();
    let mut client = std::net::TcpStream::connect(("127.0.0.1", server.port)).expect("connect");
    write!(
        client,
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAuthorization: Bearer {token}\r\n\
         Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        server.port,
        body.len()
    )
    .expect("send");
    client
}

/// The whole answer of `POST /get` with `request` as the visitor of `token`, however long it
/// takes on a busy machine (the test client gives up after 15 s).
fn whole_read(server: &Server, token: &str, request: &Value) -> String {
    use std::io::Read;
    let body = request.to_string();
    let mut c = std::net::TcpStream::connect(("127.0.0.1", server.port)).expect("connect");
    c.set_read_timeout(Some(std::time::Duration::from_secs(300)))
        .expect("timeout");
    write!(
        c,
        "POST /get HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n\
         Connection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .expect("send");
    let mut answer = String::new();
    c.read_to_string(&mut answer).expect("the whole answer");
    answer
}

#[test]
fn a_tool_call_whose_client_hangs_up_stops_its_statement() {
    use crate::request_cost::{add_big_table, running_now, window};
    use std::time::{Duration, Instant};
    for (engine, url) in demo_databases("mcp_hangup") {
        add_big_table(engine, &url);
        // No statement timeout: on a busy machine the whole read may take longer than the
        // default's 30 s, and only the hang-up may end the abandoned one.
        let server = Server::start(&url, "pool_size = 12\nstatement_timeout_ms = 0\n");
        let token = ada_token(&server);
        // Logged in: neither the anonymous timeout nor the per-address limit ends it.
        let cpu = || server.cpu_seconds().expect("the server's CPU time");
        let (started, cpu_before) = (Instant::now(), cpu());
        let r = whole_read(&server, &token, &window());
        let (takes, takes_cpu) = (started.elapsed(), cpu() - cpu_before);
        assert!(r.contains("\"code\":200"), "{engine}: {r}");
        if engine == Engine::Sqlite {
            // SQLite's statements run inside the server: measured by the CPU time it spends,
            // which other processes on the machine do not change. The call is left once it
            // spent a tenth of what the whole read takes.
            let before = cpu();
            let client = send_tool_call(&server, &token, window());
            let sent = Instant::now();
            while cpu() - before < takes_cpu / 10.0 {
                assert!(
                    sent.elapsed() < Duration::from_secs(60),
                    "{engine}: the tool call's statement never started"
                );
                std::thread::sleep(Duration::from_millis(20));
            }
            drop(client);
            let left = Instant::now();
            let mut last = cpu();
            loop {
                std::thread::sleep(Duration::from_millis(300));
                let now = cpu();
                if now - last < 0.02 {
                    break;
                }
                last = now;
                assert!(
                    left.elapsed() < Duration::from_secs(60),
                    "{engine}: the server is still busy"
                );
            }
            let spent = last - before;
            assert!(
                spent < takes_cpu * 0.6,
                "{engine}: the abandoned tool call spent {spent:.2} s of CPU; the whole read \
                 takes {takes_cpu:.2} s"
            );
            eprintln!(
                "mcp [{engine}]: an abandoned tool call spent {spent:.2} s of CPU of the \
                 {takes_cpu:.2} s the whole read takes"
            );
            continue;
        }
        let client = send_tool_call(&server, &token, window());
        let sent = Instant::now();
        while !running_now(engine, &url, &server) {
            assert!(
                sent.elapsed() < Duration::from_secs(30),
                "{engine}: the tool call's statement never started"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        drop(client);
        let left = Instant::now();
        while running_now(engine, &url, &server) {
            assert!(
                left.elapsed() < takes / 2,
                "{engine}: the tool call's statement still runs {:?} after its client left (one \
                 takes {takes:?})",
                left.elapsed()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        eprintln!(
            "mcp [{engine}]: a tool call's statement gone {:?} after its client left (one takes \
             {takes:?})",
            left.elapsed()
        );
    }
}
