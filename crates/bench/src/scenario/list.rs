//! Scenario 1, big list: `{"TEvent[]":{"count":N,"TEvent":{"@column":…}}}` for each N, with and
//! without `"x_xid{}":[1001,1002]`, one request at a time, timed to the last byte while the
//! server's RSS is sampled. Baseline: the engine's own client reading the same rows to
//! /dev/null (psql COPY, mariadb --quick, sqlite3).

use super::post_counting;
use super::{empty_report, short_n, Ctx};
use crate::baseline::{client_reader, raw_read, time_command};
use crate::load::Measured;
use crate::report::{Row, ScenarioReport, Side};
use crate::server::{Server, ServerConfig};
use crate::stats::{median, summarize_us};
use apijet_testkit::data::t_event;
use apijet_testkit::http::Connection;
use std::time::Duration;

/// The worst time ratio (apijet ÷ baseline) the goal allows.
const GOAL_RATIO: f64 = 1.3;

pub const GOAL: &str =
    "apijet time ≤ 1.3× the baseline's for the same rows; apijet peak RSS flat in N";

pub async fn run(ctx: &Ctx<'_>) -> ScenarioReport {
    let sizes = &ctx.settings.list_sizes;
    let mut r = empty_report(
        "list",
        ctx,
        "Big list, streamed",
        t_event::request(*sizes.last().unwrap_or(&10), false),
        GOAL,
    );
    if let Err(e) = body(ctx, &mut r).await {
        r.error = Some(e);
    }
    r
}

async fn body(ctx: &Ctx<'_>, r: &mut ScenarioReport) -> Result<(), String> {
    let sizes = ctx.settings.list_sizes.clone();
    let max_n = sizes.iter().copied().max().unwrap_or(1);
    let server = ctx.server(
        "list",
        &ServerConfig {
            max_count: max_n,
            write_queue: true,
            answer_cap: None,
        },
    )?;
    std::thread::sleep(Duration::from_millis(300));
    let idle_kib = server.rss_kib().unwrap_or(0);
    let mut peaks: Vec<(u64, bool, f64)> = Vec::new();
    let mut worst_ratio: Option<(f64, String)> = None;
    let mut baseline_tool = String::new();
    for filtered in [false, true] {
        for &n in &sizes {
            let suffix = if filtered { " x_xid{}" } else { "" };
            let group = format!("N={}{}", short_n(n), if filtered { " xid" } else { "" });
            let body = t_event::request(n, filtered);
            // Check (and warm up): the whole answer, rows counted as they stream.
            let (rows_seen, bytes) = post_counting(
                server.addr,
                &body,
                b"\"x_uin\":",
                b"{\"TEvent[]\":[",
                "list",
            )
            .await?;
            if rows_seen != n {
                return Err(format!("N={n}{suffix}: the answer held {rows_seen} rows"));
            }
            let mut times = Vec::new();
            let mut firsts = Vec::new();
            let mut peak_kib = 0u64;
            for _ in 0..ctx.settings.repeat {
                server.reset_peak();
                let sampler = server.sample_rss();
                let (total, first) = timed(&server, &body).await?;
                let sampled = sampler.stop();
                let hwm = server.peak_rss_kib().unwrap_or(0);
                peak_kib = peak_kib.max(sampled).max(hwm);
                times.push(total);
                firsts.push(first);
            }
            let select = t_event::select_sql(n, filtered);
            let mut base_times = Vec::new();
            for _ in 0..ctx.settings.repeat {
                let reader = client_reader(
                    ctx.db,
                    ctx.tools.psql.as_ref(),
                    ctx.tools.mariadb.as_ref(),
                    ctx.tools.sqlite3.as_ref(),
                    &select,
                );
                let t = match reader {
                    Some((cmd, label)) => {
                        baseline_tool = label;
                        time_command(cmd).await?
                    }
                    None => {
                        baseline_tool =
                            "raw driver read (the engine's client is not installed)".into();
                        raw_read(ctx.db, &select).await?
                    }
                };
                base_times.push(t);
            }
            let secs = |v: &[Duration]| v.iter().map(Duration::as_secs_f64).collect::<Vec<_>>();
            let (med, base_med) = (median(&secs(&times)), median(&secs(&base_times)));
            let mut row = single_row(
                format!("apijet N={}{suffix}", short_n(n)),
                "apijet",
                &group,
                Side::Apijet,
                &times,
                bytes,
                "apijet, one request at a time, timed to the last byte (built-in client)",
            );
            row.rows_s = Some(n as f64 / med.max(1e-9));
            row.ratio = super::ratio(med, base_med);
            row.rss_mib = Some(peak_kib as f64 / 1024.0);
            if let Some(q) = row.ratio {
                if worst_ratio.as_ref().is_none_or(|(w, _)| q > *w) {
                    worst_ratio = Some((q, row.label.clone()));
                }
            }
            r.rows.push(row);
            let mut brow = single_row(
                format!("baseline N={}{suffix}", short_n(n)),
                &format!(
                    "baseline {}",
                    baseline_tool.split(" >").next().unwrap_or("")
                ),
                &group,
                Side::Baseline,
                &base_times,
                0,
                &baseline_tool,
            );
            brow.rows_s = Some(n as f64 / base_med.max(1e-9));
            r.rows.push(brow);
            peaks.push((n, filtered, peak_kib as f64 / 1024.0));
            r.notes.push(format!(
                "N={}{suffix}: apijet first byte after {:.1} ms (median), {} bytes of JSON",
                short_n(n),
                median(&secs(&firsts)) * 1000.0,
                bytes
            ));
            if !server_alive(&server) {
                return Err(format!("apijet died during N={n}{suffix}"));
            }
        }
    }
    r.notes.push(format!(
        "ratio = apijet time ÷ baseline time (median of {} rounds; lower is better). Baseline: {baseline_tool}; \
         it prints tab-separated text without keys, so it moves fewer bytes than the JSON answer, and its time \
         includes the client's start-up and connection",
        ctx.settings.repeat
    ));
    r.notes.push(format!(
        "idle RSS {:.1} MiB; peak RSS = max of VmRSS sampled every 10 ms and VmHWM (reset before each request)",
        idle_kib as f64 / 1024.0
    ));
    if let Some((q, label)) = worst_ratio {
        r.verdicts.push(format!(
            "{}: worst time ratio {q:.2}× ({label}) against the goal ≤ {GOAL_RATIO}×",
            if q <= GOAL_RATIO { "met" } else { "missed" }
        ));
    }
    let (lo, hi) = (
        peaks.iter().map(|p| p.2).fold(f64::MAX, f64::min),
        peaks.iter().map(|p| p.2).fold(0.0f64, f64::max),
    );
    if !peaks.is_empty() {
        let max_n = peaks.iter().map(|p| p.0).max().unwrap_or(0);
        let min_n = peaks.iter().map(|p| p.0).min().unwrap_or(0);
        r.verdicts.push(format!(
            "{}: peak RSS {lo:.1}–{hi:.1} MiB from N={} to N={} (spread {:.1} MiB; flat = within 32 MiB)",
            if hi - lo <= 32.0 { "met" } else { "missed" },
            short_n(min_n),
            short_n(max_n),
            hi - lo
        ));
    }
    Ok(())
}

fn server_alive(server: &Server) -> bool {
    std::path::Path::new(&format!("/proc/{}", server.pid)).exists()
}

/// A row from the wall times of repeated single requests.
fn single_row(
    label: String,
    series: &str,
    group: &str,
    side: Side,
    times: &[Duration],
    bytes: u64,
    tool: &str,
) -> Row {
    let mut us: Vec<u64> = times.iter().map(|t| t.as_micros() as u64).collect();
    let total: f64 = times.iter().map(Duration::as_secs_f64).sum();
    let m = Measured {
        samples: times.len() as u64,
        errors: 0,
        latency: summarize_us(&mut us),
        req_s: times.len() as f64 / total.max(1e-9),
        bytes_s: bytes as f64 * times.len() as f64 / total.max(1e-9),
        tool: tool.to_string(),
        mode: "single",
    };
    Row::from_measured(label, series, group, side, None, &m)
}

/// One timed request: (time to the last byte, time to the first byte).
async fn timed(server: &Server, body: &str) -> Result<(Duration, Duration), String> {
    let mut client = Connection::new(server.addr);
    let h = client
        .request("POST", "/get", &[], body.as_bytes(), &mut |_| {})
        .await
        .map_err(|e| format!("POST /get (list): {e}"))?;
    if h.status != 200 {
        return Err(format!("POST /get (list): HTTP {}", h.status));
    }
    Ok((h.total, h.first_byte))
}
