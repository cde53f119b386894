//! What a run produced: one [`ScenarioReport`] per scenario and engine, each a list of
//! [`Row`]s in the aggregate-table shape (label, samples, avg … max, error %, req/s, KB/s),
//! plus rows/s, the ratio to the baseline, peak RSS and statements where they mean something.
//! Rendered as text tables ([`table`]), JSON ([`json`]) and an SVG/HTML chart ([`chart`]).

pub mod chart;
pub mod compare;
pub mod json;
pub mod table;

use crate::load::Measured;
use crate::stats::Latency;
use apijet_testkit::engine::Engine;
use serde::{Deserialize, Serialize};

/// Which side of the comparison a row measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    Apijet,
    Baseline,
}

/// One line of an aggregate table.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Row {
    pub label: String,
    /// The chart's series (e.g. "apijet, closed", "baseline pgbench") …
    pub series: String,
    /// … and its x category (e.g. "c=64", "N=100k").
    pub group: String,
    pub side: Side,
    /// "closed" (peak throughput), "open" (fixed rate, latency-corrected) or "single"
    /// (one request at a time, timed end to end).
    pub mode: String,
    /// The tool and how it was driven.
    pub tool: String,
    /// Concurrent connections (clients), when the step had a level.
    pub connections: Option<usize>,
    /// The open-loop target rate, req/s.
    pub rate: Option<f64>,
    pub samples: u64,
    /// Latency in milliseconds.
    pub latency: Latency,
    pub error_pct: f64,
    pub req_s: f64,
    pub kb_s: f64,
    pub rows_s: Option<f64>,
    /// This row against its baseline; the scenario's notes say which way (time or rate).
    pub ratio: Option<f64>,
    /// Peak RSS of the apijet process during the step, MiB.
    pub rss_mib: Option<f64>,
    /// SQL statements per request (`x-apijet-statements`).
    pub statements: Option<u64>,
}

impl Row {
    pub fn from_measured(
        label: impl Into<String>,
        series: impl Into<String>,
        group: impl Into<String>,
        side: Side,
        conns: Option<usize>,
        m: &Measured,
    ) -> Row {
        Row {
            label: label.into(),
            series: series.into(),
            group: group.into(),
            side,
            mode: m.mode.to_string(),
            tool: m.tool.clone(),
            connections: conns,
            rate: None,
            samples: m.samples,
            latency: m.latency,
            error_pct: if m.samples == 0 {
                0.0
            } else {
                100.0 * m.errors as f64 / m.samples as f64
            },
            req_s: m.req_s,
            kb_s: m.bytes_s / 1024.0,
            rows_s: None,
            ratio: None,
            rss_mib: None,
            statements: None,
        }
    }
}

/// One scenario on one engine.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ScenarioReport {
    /// `list`, `point`, `nested`, `insert`, `tfb`.
    pub id: String,
    pub engine: Engine,
    pub title: String,
    /// An example request body.
    pub request: String,
    /// The goal, as stated in the issue.
    pub goal: String,
    pub rows: Vec<Row>,
    /// What the ratio means, fallbacks used, sizes.
    pub notes: Vec<String>,
    /// Goal checks: "met: …" / "missed: …" lines.
    pub verdicts: Vec<String>,
    /// Set when the scenario could not run to the end.
    pub error: Option<String>,
}

/// A whole run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Report {
    pub date: String,
    pub command: String,
    pub machine: Machine,
    pub loader: String,
    pub quick: bool,
    /// Load averages (1/5/15 min) when the run started and ended.
    pub loadavg_start: String,
    pub loadavg_end: String,
    /// Engine name → server version.
    pub engines: Vec<(Engine, String)>,
    pub scenarios: Vec<ScenarioReport>,
}

/// Where it ran.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Machine {
    pub cpus: usize,
    pub cpu_model: String,
    pub memory_gib: f64,
    pub os: String,
    pub apijet_commit: String,
}

impl Machine {
    pub fn detect() -> Machine {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu_model = cpuinfo
            .lines()
            .find_map(|l| {
                l.strip_prefix("model name")?
                    .split_once(':')
                    .map(|x| x.1.trim().to_string())
            })
            .unwrap_or_else(|| "unknown".into());
        let memory_gib = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|m| {
                m.lines()
                    .find_map(|l| l.strip_prefix("MemTotal:"))
                    .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
            })
            .map(|kib| kib / 1024.0 / 1024.0)
            .unwrap_or(0.0);
        let os = std::fs::read_to_string("/etc/os-release")
            .ok()
            .and_then(|t| {
                t.lines()
                    .find_map(|l| l.strip_prefix("PRETTY_NAME="))
                    .map(|v| v.trim_matches('"').to_string())
            })
            .unwrap_or_else(|| std::env::consts::OS.to_string());
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
        let commit = std::process::Command::new("git")
            .args(["rev-parse", "--short", "HEAD"])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_else(|| "unknown".into());
        Machine {
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            cpu_model,
            memory_gib,
            os: format!("{os}, Linux {}", kernel.trim()),
            apijet_commit: commit,
        }
    }
}
