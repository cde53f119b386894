//! The scenarios, each a function from a [`Ctx`] (settings, tools, database) to a
//! [`ScenarioReport`], plus the steps they share: starting a server, checking that sample
//! requests really succeed (an APIJSON error is an HTTP 200 too, so load tools cannot tell),
//! logging in, and one load level measured closed-loop for peak throughput and then open-loop
//! at a fraction of that peak for latency.

pub mod cache;
pub mod inserts;
pub mod list;
pub mod live;
pub mod nested;
pub mod point;
pub mod tfb;

use crate::load::{self, LoadSpec, Loader};
use crate::report::{Row, ScenarioReport, Side};
use crate::server::{self, Server, ServerConfig};
use crate::tools::Tools;
use crate::Settings;
use apijet_testkit::data::demo::{ADA_PASSWORD, ADA_PHONE};
use apijet_testkit::engine::Database;
use apijet_testkit::http::Connection;
use apijet_testkit::{body_code, truncate};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Everything a scenario needs.
pub struct Ctx<'a> {
    pub settings: &'a Settings,
    pub tools: &'a Tools,
    pub loader: &'a Loader,
    pub db: &'a Database,
    pub apijet: &'a Path,
    /// Scratch space of this engine (server logs, body files, scripts).
    pub work: PathBuf,
}

impl Ctx<'_> {
    /// Starts an apijet server on this engine's database.
    pub fn server(&self, name: &str, cfg: &ServerConfig) -> Result<Server, String> {
        eprintln!(
            "[bench] {}: starting apijet ({name})",
            self.db.engine.name()
        );
        server::start(self.apijet, &self.db.url, cfg, &self.work.join(name))
    }

    pub fn engine(&self) -> &'static str {
        self.db.engine.name()
    }
}

/// A report with nothing measured yet.
pub fn empty_report(
    id: &str,
    ctx: &Ctx,
    title: &str,
    request: String,
    goal: &str,
) -> ScenarioReport {
    ScenarioReport {
        id: id.into(),
        engine: ctx.db.engine,
        title: title.into(),
        request,
        goal: goal.into(),
        rows: Vec::new(),
        notes: Vec::new(),
        verdicts: Vec::new(),
        error: None,
    }
}

/// A short count: 10k, 1M.
pub fn short_n(n: u64) -> String {
    if n >= 1_000_000 && n.is_multiple_of(1_000_000) {
        format!("{}M", n / 1_000_000)
    } else if n >= 1000 && n.is_multiple_of(1000) {
        format!("{}k", n / 1000)
    } else {
        n.to_string()
    }
}

/// Sends up to `n` of `bodies` one by one and checks each answer: HTTP 200 and APIJSON code
/// 200, and `check` on the parsed body. Returns the `x-apijet-statements` header of the last.
pub async fn verify(
    addr: SocketAddr,
    path: &str,
    headers: &[(String, String)],
    bodies: &[String],
    n: usize,
    check: &dyn Fn(&serde_json::Value) -> Result<(), String>,
) -> Result<Option<u64>, String> {
    let mut client = Connection::new(addr);
    let headers: Vec<(&str, &str)> = headers
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let mut statements = None;
    for body in bodies.iter().take(n.max(1)) {
        let (head, answer) = client
            .post(path, &headers, body.as_bytes())
            .await
            .map_err(|e| format!("POST {path}: {e}"))?;
        let text = String::from_utf8_lossy(&answer);
        if head.status != 200 || body_code(&answer) != Some(200) {
            return Err(format!(
                "POST {path} {} answered HTTP {}: {}",
                truncate(body, 200),
                head.status,
                truncate(&text, 400)
            ));
        }
        let v: serde_json::Value = serde_json::from_slice(&answer).map_err(|e| e.to_string())?;
        check(&v).map_err(|e| {
            format!(
                "POST {path} {}: {e}: {}",
                truncate(body, 200),
                truncate(&text, 400)
            )
        })?;
        statements = head
            .header("x-apijet-statements")
            .and_then(|s| s.parse().ok());
    }
    Ok(statements)
}

/// Sends each of `bodies` to both servers and checks that the answers are the same JSON apart
/// from `time` (a baseline must answer what apijet answers).
pub async fn same_answers(
    apijet: SocketAddr,
    other: SocketAddr,
    path: &str,
    bodies: &[String],
) -> Result<(), String> {
    let (mut a, mut b) = (Connection::new(apijet), Connection::new(other));
    for body in bodies {
        let mut answers = Vec::new();
        for client in [&mut a, &mut b] {
            let (_, answer) = client
                .post(path, &[], body.as_bytes())
                .await
                .map_err(|e| format!("POST {path}: {e}"))?;
            let mut v: serde_json::Value = serde_json::from_slice(&answer).map_err(|e| {
                format!(
                    "POST {path} {}: {e}",
                    truncate(&String::from_utf8_lossy(&answer), 200)
                )
            })?;
            if let Some(m) = v.as_object_mut() {
                m.remove("time");
            }
            answers.push(v);
        }
        if answers[0] != answers[1] {
            return Err(format!(
                "the baseline answers {} differently: apijet {} vs baseline {}",
                truncate(body, 200),
                truncate(&answers[0].to_string(), 400),
                truncate(&answers[1].to_string(), 400)
            ));
        }
    }
    Ok(())
}

/// Logs in as Ada (the demo login) and returns the `Authorization` header.
pub async fn login(addr: SocketAddr) -> Result<(String, String), String> {
    let mut client = Connection::new(addr);
    let (_, body) = client
        .post(
            "/login",
            &[],
            serde_json::json!({"type": 0, "phone": ADA_PHONE, "password": ADA_PASSWORD})
                .to_string()
                .as_bytes(),
        )
        .await
        .map_err(|e| format!("POST /login: {e}"))?;
    let v: serde_json::Value =
        serde_json::from_slice(&body).map_err(|e| format!("POST /login: {e}"))?;
    let token = v.get("token").and_then(|t| t.as_str()).ok_or_else(|| {
        format!(
            "POST /login gave no token: {}",
            String::from_utf8_lossy(&body)
        )
    })?;
    Ok(("Authorization".into(), format!("Bearer {token}")))
}

/// One load level against apijet.
pub struct Level<'a> {
    pub server: &'a Server,
    pub path: &'a str,
    pub bodies: Arc<Vec<String>>,
    pub headers: Vec<(String, String)>,
    pub connections: usize,
    /// Row label prefix, e.g. "apijet c=64".
    pub label: String,
    /// Chart category, e.g. "c=64".
    pub group: String,
    /// Series name prefix, e.g. "apijet".
    pub series: String,
    /// Also measure open-loop latency at a fraction of the peak.
    pub latency: bool,
}

/// Measures one level: closed loop (peak), then, when asked and oha is present, open loop at
/// `rate_fraction` of that peak. Returns the rows and notes.
pub async fn measure_level(
    ctx: &Ctx<'_>,
    lv: Level<'_>,
) -> Result<(Vec<Row>, Vec<String>), String> {
    let mut spec = LoadSpec {
        addr: lv.server.addr,
        path: lv.path.to_string(),
        bodies: lv.bodies,
        headers: lv.headers,
        connections: lv.connections,
        duration: ctx.settings.duration,
        rate: None,
    };
    let work = ctx.work.join("load");
    let peak = load::run(ctx.loader, &spec, &work).await?;
    let mut rows = vec![Row::from_measured(
        format!("{} peak", lv.label),
        format!("{}, closed loop", lv.series),
        lv.group.clone(),
        Side::Apijet,
        Some(lv.connections),
        &peak,
    )];
    let mut notes = Vec::new();
    if lv.latency {
        if ctx.loader.open_loop() && peak.req_s > 0.0 {
            let rate = (peak.req_s * ctx.settings.rate_fraction).max(1.0);
            spec.rate = Some(rate);
            let open = load::run(ctx.loader, &spec, &work).await?;
            let mut row = Row::from_measured(
                format!(
                    "{} @{:.0}% of peak",
                    lv.label,
                    ctx.settings.rate_fraction * 100.0
                ),
                format!("{}, open loop", lv.series),
                lv.group.clone(),
                Side::Apijet,
                Some(lv.connections),
                &open,
            );
            row.rate = Some(rate);
            rows.push(row);
        } else if !ctx.loader.open_loop() {
            notes.push(format!(
                "open-loop latency skipped: {} cannot run at a fixed rate (install oha: cargo install oha --locked); \
                 the closed-loop percentiles shown suffer from coordinated omission",
                ctx.loader.describe()
            ));
        }
    }
    Ok((rows, notes))
}

/// A short closed-loop run whose numbers are discarded: connection set-up, caches, JIT-free
/// but allocator and plan caches warm.
pub async fn warm_up(
    ctx: &Ctx<'_>,
    server: &Server,
    path: &str,
    bodies: Arc<Vec<String>>,
    headers: Vec<(String, String)>,
    connections: usize,
) {
    let spec = LoadSpec {
        addr: server.addr,
        path: path.to_string(),
        bodies,
        headers,
        connections,
        duration: ctx.settings.warmup,
        rate: None,
    };
    if ctx.settings.warmup > Duration::ZERO {
        let _ = load::run(ctx.loader, &spec, &ctx.work.join("load")).await;
    }
}

/// `part / whole`, or `None` when the whole is 0.
/// The text of a server's `/metrics`, read with `token` (its `metrics_token`).
pub async fn metrics_text(addr: SocketAddr, token: &str) -> Result<String, String> {
    let mut client = Connection::new(addr);
    let auth = format!("Bearer {token}");
    let mut text = Vec::new();
    client
        .request(
            "GET",
            "/metrics",
            &[("Authorization", auth.as_str())],
            b"",
            &mut |b| text.extend_from_slice(b),
        )
        .await
        .map_err(|e| format!("GET /metrics: {e}"))?;
    Ok(String::from_utf8_lossy(&text).into_owned())
}

pub fn ratio(part: f64, whole: f64) -> Option<f64> {
    (whole > 0.0 && part.is_finite()).then(|| part / whole)
}

/// POSTs `body` to `/get` at `addr` and reads the answer to its last byte without holding it:
/// counts the occurrences of `needle` (one per row or item) and the bytes, and checks the answer
/// starts with `opening` and ends in a success envelope. `what` names the answer in errors.
pub async fn post_counting(
    addr: SocketAddr,
    body: &str,
    needle: &[u8],
    opening: &[u8],
    what: &str,
) -> Result<(u64, u64), String> {
    let mut client = Connection::new(addr);
    let (mut count, mut carry, mut head, mut tail) = (0u64, Vec::new(), Vec::new(), Vec::new());
    let h = client
        .request("POST", "/get", &[], body.as_bytes(), &mut |b| {
            if head.len() < 64 {
                head.extend_from_slice(&b[..b.len().min(64)]);
            }
            carry.extend_from_slice(b);
            count += carry.windows(needle.len()).filter(|w| *w == needle).count() as u64;
            let keep = carry.len().saturating_sub(needle.len() - 1);
            carry.drain(..keep);
            tail.extend_from_slice(&b[b.len().saturating_sub(256)..]);
            let cut = tail.len().saturating_sub(256);
            tail.drain(..cut);
        })
        .await
        .map_err(|e| format!("POST /get ({what}): {e}"))?;
    let tail = String::from_utf8_lossy(&tail);
    if h.status != 200 || !head.starts_with(opening) || !tail.contains("\"code\":200") {
        return Err(format!(
            "the {what} is not a successful answer (HTTP {}): {}…{tail}",
            h.status,
            String::from_utf8_lossy(&head)
        ));
    }
    Ok((count, h.bytes))
}

/// The APIJSON code of an answer body (`"code":200` on success), when it has one.
pub fn apijson_code(body: &[u8]) -> Option<i64> {
    let v: serde_json::Value = serde_json::from_slice(body).ok()?;
    v.get("code")?.as_i64()
}
