//! Driving HTTP load: oha (preferred), wrk, or the built-in closed-loop runner.
//!
//! * **oha** (crates.io, `cargo install oha --locked`): closed loop for peak throughput, and
//!   open loop at a fixed rate with `-q RATE --latency-correction` for latency percentiles
//!   free of coordinated omission. Random request bodies come from `-Z FILE` (one body per
//!   line, picked at random per request).
//! * **wrk** (Debian package): closed loop only; a Lua script picks a random body per request
//!   and prints the percentiles as JSON. Its percentiles are closed-loop numbers.
//! * **built-in**: a closed-loop runner on our own small HTTP client, used when neither tool is
//!   installed (CI). Labelled as such in every row it produces.
//!
//! Every result says which tool and which loop produced it.

use crate::stats::{summarize_us, Latency};
use crate::tools::Tool;
use apijet_testkit::http::Connection;
use apijet_testkit::Rng;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The load generator in use.
#[derive(Clone, Debug)]
pub enum Loader {
    Oha(Tool),
    Wrk(Tool),
    Builtin,
}

impl Loader {
    /// Whether it can run open-loop (fixed-rate) steps.
    pub fn open_loop(&self) -> bool {
        matches!(self, Loader::Oha(_))
    }

    pub fn describe(&self) -> String {
        match self {
            Loader::Oha(t) => t.version.clone(),
            Loader::Wrk(t) => format!("{} (closed loop only)", t.version),
            Loader::Builtin => "built-in closed-loop runner (neither oha nor wrk found)".into(),
        }
    }
}

/// One load step against one URL.
#[derive(Clone, Debug)]
pub struct LoadSpec {
    pub addr: SocketAddr,
    /// `/get`, `/post`, …
    pub path: String,
    /// Request bodies; each request picks one at random.
    pub bodies: Arc<Vec<String>>,
    /// Extra headers (`Authorization`).
    pub headers: Vec<(String, String)>,
    pub connections: usize,
    pub duration: Duration,
    /// Open loop at this many requests per second (oha only); closed loop when `None`.
    pub rate: Option<f64>,
}

/// What a step measured.
#[derive(Clone, Debug, Default)]
pub struct Measured {
    /// Completed requests (any status).
    pub samples: u64,
    /// Transport errors and non-2xx answers.
    pub errors: u64,
    pub latency: Latency,
    /// Successful requests per second.
    pub req_s: f64,
    /// Body bytes per second.
    pub bytes_s: f64,
    /// e.g. "oha 1.16.0, open loop 1200 req/s, latency-corrected".
    pub tool: String,
    /// "closed" or "open".
    pub mode: &'static str,
}

/// Runs one step with `loader`; `work` holds the body files and scripts.
pub async fn run(loader: &Loader, spec: &LoadSpec, work: &Path) -> Result<Measured, String> {
    match loader {
        Loader::Oha(t) => run_oha(t, spec, work).await,
        Loader::Wrk(t) => {
            if spec.rate.is_some() {
                return Err("wrk cannot run open-loop steps".into());
            }
            run_wrk(t, spec, work).await
        }
        Loader::Builtin => {
            if spec.rate.is_some() {
                return Err("the built-in runner is closed-loop only".into());
            }
            Ok(run_builtin(spec).await)
        }
    }
}

/// Writes the bodies one per line (JSON bodies hold no raw newline) and returns the file.
fn bodies_file(spec: &LoadSpec, work: &Path) -> Result<PathBuf, String> {
    std::fs::create_dir_all(work).map_err(|e| format!("cannot create {}: {e}", work.display()))?;
    let path = work.join(format!("bodies-{:016x}.txt", fingerprint(&spec.bodies)));
    if !path.exists() {
        let mut text = String::new();
        for b in spec.bodies.iter() {
            text.push_str(&b.replace('\n', " "));
            text.push('\n');
        }
        std::fs::write(&path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    Ok(path)
}

async fn output_of(mut cmd: Command, what: &str) -> Result<String, String> {
    let what = what.to_string();
    let out = tokio::task::spawn_blocking(move || {
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .output()
    })
    .await
    .map_err(|e| format!("{what}: {e}"))?
    .map_err(|e| format!("cannot run {what}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{what} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).to_string())
}

async fn run_oha(tool: &Tool, spec: &LoadSpec, work: &Path) -> Result<Measured, String> {
    let file = bodies_file(spec, work)?;
    let mut cmd = Command::new(&tool.path);
    cmd.args([
        "--no-tui",
        "--output-format",
        "json",
        "--disable-compression",
    ])
    .arg("-z")
    .arg(format!("{}ms", spec.duration.as_millis()))
    .arg("-c")
    .arg(spec.connections.to_string())
    .args(["-m", "POST", "-H", "Content-Type: application/json"])
    .arg("-Z")
    .arg(&file);
    for (k, v) in &spec.headers {
        cmd.arg("-H").arg(format!("{k}: {v}"));
    }
    if let Some(rate) = spec.rate {
        cmd.arg("-q")
            .arg(format!("{:.0}", rate.max(1.0)))
            .arg("--latency-correction");
    }
    cmd.arg(format!("http://{}{}", spec.addr, spec.path));
    let out = output_of(cmd, "oha").await?;
    let mut m = parse_oha(&out)?;
    m.tool = match spec.rate {
        Some(r) => format!(
            "{}, open loop at {r:.0} req/s, latency-corrected",
            tool.version
        ),
        None => format!("{}, closed loop", tool.version),
    };
    m.mode = if spec.rate.is_some() {
        "open"
    } else {
        "closed"
    };
    Ok(m)
}

#[derive(Deserialize)]
struct OhaSummary {
    total: f64,
    slowest: Option<f64>,
    fastest: Option<f64>,
    average: Option<f64>,
    #[serde(rename = "sizePerSec")]
    size_per_sec: Option<f64>,
}

#[derive(Deserialize)]
struct OhaJson {
    summary: OhaSummary,
    #[serde(rename = "latencyPercentiles")]
    latency_percentiles: BTreeMap<String, Option<f64>>,
    #[serde(rename = "statusCodeDistribution")]
    status_code_distribution: BTreeMap<String, u64>,
    #[serde(rename = "errorDistribution")]
    error_distribution: BTreeMap<String, u64>,
}

/// Parses `oha --output-format json` (times in seconds).
pub fn parse_oha(text: &str) -> Result<Measured, String> {
    let j: OhaJson = serde_json::from_str(text.trim())
        .map_err(|e| format!("cannot parse oha's JSON output: {e}"))?;
    let ms = |s: Option<f64>| s.unwrap_or(0.0) * 1000.0;
    let pct = |k: &str| ms(j.latency_percentiles.get(k).copied().flatten());
    let ok: u64 = j
        .status_code_distribution
        .iter()
        .filter(|(k, _)| k.starts_with('2'))
        .map(|(_, v)| v)
        .sum();
    let answered: u64 = j.status_code_distribution.values().sum();
    // Requests cut by the end of the run are not the server's errors.
    let failed: u64 = j
        .error_distribution
        .iter()
        .filter(|(k, _)| !k.contains("deadline"))
        .map(|(_, v)| v)
        .sum();
    let total = j.summary.total.max(1e-9);
    Ok(Measured {
        samples: answered + failed,
        errors: answered - ok + failed,
        latency: Latency {
            avg: ms(j.summary.average),
            median: pct("p50"),
            p90: pct("p90"),
            p95: pct("p95"),
            p99: pct("p99"),
            min: ms(j.summary.fastest),
            max: ms(j.summary.slowest),
        },
        req_s: ok as f64 / total,
        bytes_s: j.summary.size_per_sec.unwrap_or(0.0),
        tool: String::new(),
        mode: "closed",
    })
}

async fn run_wrk(tool: &Tool, spec: &LoadSpec, work: &Path) -> Result<Measured, String> {
    let file = bodies_file(spec, work)?;
    let header_lines: Vec<String> = spec
        .headers
        .iter()
        .map(|(k, v)| format!("{k}: {v}"))
        .collect();
    let lua = work.join(format!(
        "wrk-{:016x}-{:016x}.lua",
        fingerprint(&spec.bodies),
        fingerprint(&header_lines)
    ));
    let mut headers = String::new();
    for (k, v) in &spec.headers {
        headers.push_str(&format!("wrk.headers[{k:?}] = {v:?}\n"));
    }
    let script = format!(
        r#"-- written by apijet bench: a random body per request, percentiles as JSON
local bodies = {{}}
for line in io.lines({file:?}) do bodies[#bodies + 1] = line end
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
{headers}math.randomseed(math.floor(os.clock() * 1000000) + #bodies)
request = function()
  return wrk.format(nil, nil, nil, bodies[math.random(#bodies)])
end
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "JSON {{\"requests\":%d,\"duration_us\":%d,\"bytes\":%d,\"connect\":%d,\"read\":%d,\"write\":%d,\"status\":%d,\"timeout\":%d,\"mean\":%f,\"min\":%d,\"max\":%d,\"p50\":%d,\"p90\":%d,\"p95\":%d,\"p99\":%d}}\n",
    summary.requests, summary.duration, summary.bytes, e.connect, e.read, e.write, e.status, e.timeout,
    latency.mean, latency.min, latency.max, latency:percentile(50), latency:percentile(90),
    latency:percentile(95), latency:percentile(99)))
end
"#,
        file = file.display().to_string()
    );
    std::fs::write(&lua, script).map_err(|e| format!("cannot write {}: {e}", lua.display()))?;
    let threads = spec.connections.clamp(1, 2);
    let secs = spec.duration.as_secs_f64().ceil().max(1.0) as u64;
    let mut cmd = Command::new(&tool.path);
    cmd.arg("-t")
        .arg(threads.to_string())
        .arg("-c")
        .arg(spec.connections.max(threads).to_string())
        .arg("-d")
        .arg(format!("{secs}s"))
        .arg("-s")
        .arg(&lua)
        .arg(format!("http://{}{}", spec.addr, spec.path));
    let out = output_of(cmd, "wrk").await?;
    let mut m = parse_wrk(&out)?;
    m.tool = format!("{}, closed loop (percentiles not corrected)", tool.version);
    Ok(m)
}

#[derive(Deserialize)]
struct WrkJson {
    requests: u64,
    duration_us: u64,
    bytes: u64,
    connect: u64,
    read: u64,
    write: u64,
    status: u64,
    timeout: u64,
    mean: f64,
    min: u64,
    max: u64,
    p50: u64,
    p90: u64,
    p95: u64,
    p99: u64,
}

/// Parses the `JSON {…}` line our wrk script prints (times in microseconds).
pub fn parse_wrk(text: &str) -> Result<Measured, String> {
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("JSON "))
        .ok_or_else(|| format!("wrk printed no JSON line:\n{text}"))?;
    let j: WrkJson =
        serde_json::from_str(line).map_err(|e| format!("cannot parse wrk's summary: {e}"))?;
    let ms = |us: f64| us / 1000.0;
    let secs = (j.duration_us as f64 / 1e6).max(1e-9);
    let errors = j.connect + j.read + j.write + j.status + j.timeout;
    Ok(Measured {
        samples: j.requests + j.connect + j.write,
        errors,
        latency: Latency {
            avg: ms(j.mean),
            median: ms(j.p50 as f64),
            p90: ms(j.p90 as f64),
            p95: ms(j.p95 as f64),
            p99: ms(j.p99 as f64),
            min: ms(j.min as f64),
            max: ms(j.max as f64),
        },
        req_s: j.requests.saturating_sub(j.status + j.read + j.timeout) as f64 / secs,
        bytes_s: j.bytes as f64 / secs,
        tool: String::new(),
        mode: "closed",
    })
}

/// The built-in closed-loop runner: `connections` tasks, each on its own keep-alive
/// connection, sending the next request as soon as the previous answer is complete.
async fn run_builtin(spec: &LoadSpec) -> Measured {
    let start = Instant::now();
    let deadline = start + spec.duration;
    let bytes = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for i in 0..spec.connections.max(1) {
        let spec = spec.clone();
        let bytes = Arc::clone(&bytes);
        tasks.push(tokio::spawn(async move {
            let mut client = Connection::new(spec.addr);
            let mut rng = Rng::new(0xB0D1E5 ^ ((i as u64) << 20));
            let headers: Vec<(&str, &str)> = spec
                .headers
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            let (mut lat, mut errors) = (Vec::new(), 0u64);
            while Instant::now() < deadline {
                let body = &spec.bodies[rng.below(spec.bodies.len() as u64) as usize];
                let t0 = Instant::now();
                let mut ok_code = false;
                let mut tail: Vec<u8> = Vec::new();
                // The envelope (`"code":200`) closes the answer: keep its last bytes.
                let r = client
                    .request("POST", &spec.path, &headers, body.as_bytes(), &mut |b| {
                        tail.extend_from_slice(&b[b.len().saturating_sub(512)..]);
                        let cut = tail.len().saturating_sub(512);
                        tail.drain(..cut);
                    })
                    .await;
                let us = t0.elapsed().as_micros() as u64;
                match r {
                    Ok(h) => {
                        bytes.fetch_add(h.bytes, Ordering::Relaxed);
                        ok_code = h.status == 200 && contains(&tail, b"\"code\":200");
                        lat.push(us);
                    }
                    Err(_) => lat.push(us),
                }
                if !ok_code {
                    errors += 1;
                }
            }
            (lat, errors)
        }));
    }
    let (mut all, mut errors) = (Vec::new(), 0);
    for t in tasks {
        if let Ok((lat, e)) = t.await {
            all.extend(lat);
            errors += e;
        }
    }
    let secs = start.elapsed().as_secs_f64().max(1e-9);
    let samples = all.len() as u64;
    Measured {
        samples,
        errors,
        latency: summarize_us(&mut all),
        req_s: (samples - errors.min(samples)) as f64 / secs,
        bytes_s: bytes.load(Ordering::Relaxed) as f64 / secs,
        tool: "built-in closed-loop runner (no oha/wrk; percentiles not corrected)".into(),
        mode: "closed",
    }
}

/// FNV-1a over the bodies: names their file, so equal sets share one and different sets never do.
fn fingerprint(bodies: &[String]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bodies {
        for &byte in b.as_bytes().iter().chain(b"\n") {
            h ^= u64::from(byte);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_oha_json() {
        let text = r#"{"summary":{"successRate":1.0,"total":2.0,"slowest":0.010,"fastest":0.001,
          "average":0.002,"requestsPerSec":500.0,"totalData":10000,"sizePerRequest":10,"sizePerSec":5000.0},
          "latencyPercentiles":{"p10":0.001,"p50":0.002,"p90":0.004,"p95":0.005,"p99":0.008,"p99.9":0.009},
          "statusCodeDistribution":{"200":990,"500":10},
          "errorDistribution":{"aborted due to deadline":3,"connection refused":2}}"#;
        let m = parse_oha(text).expect("parse");
        assert_eq!(m.samples, 1002);
        assert_eq!(m.errors, 12);
        assert!((m.req_s - 495.0).abs() < 1e-9);
        assert!((m.latency.p99 - 8.0).abs() < 1e-9);
        assert!((m.latency.median - 2.0).abs() < 1e-9);
        assert!((m.bytes_s - 5000.0).abs() < 1e-9);
    }

    #[test]
    fn parses_wrk_line() {
        let text = "Running 1s test\nJSON {\"requests\":1000,\"duration_us\":2000000,\"bytes\":4000,\
          \"connect\":0,\"read\":0,\"write\":0,\"status\":10,\"timeout\":0,\"mean\":1500.5,\"min\":100,\
          \"max\":9000,\"p50\":1200,\"p90\":2000,\"p95\":2500,\"p99\":5000}\n";
        let m = parse_wrk(text).expect("parse");
        assert_eq!(m.samples, 1000);
        assert_eq!(m.errors, 10);
        assert!((m.req_s - 495.0).abs() < 1e-9);
        assert!((m.latency.p99 - 5.0).abs() < 1e-9);
    }
}
