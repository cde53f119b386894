//! Scenario cache, answers kept in memory: hot point lookups (`{"PurchSkuMaster":{"sku_id":…}}`
//! over 1,000 hot keys) and the nested moment page (pages of 20 Moments with their User and
//! Comments), each against apijet with `answer_cache = "on"`, apijet without it and, for the
//! lookups, the hand-written endpoint (which reads the database each time), in the same run;
//! then both reads again while writers PUT Ada's comments at 1 % of the read rate (a write moves
//! the Comment table: the nested pages are read again, the lookups of another table are not).

use super::{empty_report, login, measure_level, ratio, same_answers, verify, warm_up, Ctx, Level};
use crate::handwritten::Lookup;
use crate::report::{Row, ScenarioReport, Side};
use crate::server::{start_toml, ServerConfig};
use apijet_testkit::data::demo::{nested_page, ADA_EVERY, COMMENT_BASE};
use apijet_testkit::data::sku;
use apijet_testkit::engine::Engine;
use apijet_testkit::http::Connection;
use apijet_testkit::Rng;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub const GOAL: &str = "PostgreSQL: hot lookups with the cache ≥ 3× the hand-written endpoint's \
     req/s; the nested page with the cache ≥ 5× apijet without it; 0 errors";

/// Hot keys of the lookups.
const HOT_KEYS: usize = 1000;

/// Pages of the nested read (each a key of its own).
const PAGES: u64 = 10;

/// The metrics token of the servers under test, to read the cache's counters.
const METRICS_TOKEN: &str = "apijet-bench-metrics";

pub async fn run(ctx: &Ctx<'_>) -> ScenarioReport {
    let mut r = empty_report(
        "cache",
        ctx,
        "Answers kept in memory: hot point lookups and the nested page, cache on vs off",
        nested_page(20, 0),
        GOAL,
    );
    // The deployment the README recommends: the change feed's triggers installed, so a kept
    // answer lives until a write moves what it read (without them it expires after
    // answer_cache_ttl_ms). Removed afterwards: the other scenarios' writes pay no trigger.
    let result = match live_triggers(ctx, "--install") {
        Ok(()) => body(ctx, &mut r).await,
        Err(e) => Err(e),
    };
    if let Err(e) = result.and(live_triggers(ctx, "--remove")) {
        r.error = Some(e);
    }
    r
}

/// `apijet live-triggers ACTION` on the scenario's database.
fn live_triggers(ctx: &Ctx<'_>, action: &str) -> Result<(), String> {
    let out = std::process::Command::new(ctx.apijet)
        .args(["live-triggers", action, "--db", &ctx.db.url])
        .output()
        .map_err(|e| format!("apijet live-triggers: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "apijet live-triggers {action}: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(())
}

fn config() -> ServerConfig {
    ServerConfig {
        max_count: 100,
        write_queue: false,
        answer_cap: None,
    }
}

/// One measured read: its label, path and bodies.
struct Read {
    name: &'static str,
    bodies: Arc<Vec<String>>,
}

async fn body(ctx: &Ctx<'_>, r: &mut ScenarioReport) -> Result<(), String> {
    let rows = ctx.settings.sku_rows;
    let digits = sku::key_digits(rows);
    let mut rng = Rng::new(0xCAC4E);
    let lookups: Vec<String> = (0..HOT_KEYS)
        .map(|_| {
            format!(
                "{{\"PurchSkuMaster\":{{\"sku_id\":\"{}\"}}}}",
                sku::sku_id(rng.below(rows), digits)
            )
        })
        .collect();
    let reads = [
        Read {
            name: "hot lookups",
            bodies: Arc::new(lookups),
        },
        Read {
            name: "nested page",
            bodies: Arc::new((0..PAGES).map(|p| nested_page(20, p)).collect()),
        },
    ];
    let c = *ctx
        .settings
        .point_connections
        .iter()
        .find(|&&c| c >= 16)
        .unwrap_or(&ctx.settings.point_connections[0]);
    let mut peaks: Vec<(String, f64)> = Vec::new();
    for on in [false, true] {
        let side = if on { "cache on" } else { "cache off" };
        let toml = format!(
            "{}metrics_token = \"{METRICS_TOKEN}\"\nanswer_cache = \"{}\"\n",
            config().toml(),
            if on { "on" } else { "off" }
        );
        let name = if on { "cache-on" } else { "cache-off" };
        eprintln!("[bench] {}: starting apijet ({name})", ctx.engine());
        let server = start_toml(ctx.apijet, &ctx.db.url, &toml, &ctx.work.join(name))?;
        let auth = login(server.addr).await?;
        for read in &reads {
            verify(server.addr, "/get", &[], &read.bodies, 3, &|v| {
                v.as_object()
                    .filter(|o| o.len() > 4)
                    .map(|_| ())
                    .ok_or_else(|| "an empty answer".to_string())
            })
            .await?;
        }
        for writes in [false, true] {
            for read in &reads {
                warm_up(ctx, &server, "/get", Arc::clone(&read.bodies), vec![], c).await;
                let label = format!(
                    "{}, apijet {side}{}",
                    read.name,
                    if writes { ", 1 % writes" } else { "" }
                );
                let rate = peaks
                    .iter()
                    .find(|(l, _)| *l == format!("{}, apijet {side}", read.name))
                    .map_or(0.0, |p| p.1);
                let writer = writes.then(|| Writer::start(server.addr, &auth, rate * 0.01));
                let (measured, notes) = measure_level(
                    ctx,
                    Level {
                        server: &server,
                        path: "/get",
                        bodies: Arc::clone(&read.bodies),
                        headers: vec![],
                        connections: c,
                        label: label.clone(),
                        group: read.name.into(),
                        series: format!(
                            "apijet {side}{}",
                            if writes { ", 1 % writes" } else { "" }
                        ),
                        latency: false,
                    },
                )
                .await?;
                if let Some(w) = writer {
                    let (done, failed) = w.stop().await;
                    if failed > 0 {
                        return Err(format!("{failed} of the writer's PUTs failed ({label})"));
                    }
                    r.notes.push(format!(
                        "{label}: {done} PUTs of Comment during the step (1 % of {rate:.0} \
                         req/s)"
                    ));
                }
                for row in &measured {
                    peaks.push((label.clone(), row.req_s));
                }
                r.rows.extend(measured);
                for n in notes {
                    if !r.notes.contains(&n) {
                        r.notes.push(n);
                    }
                }
            }
        }
        if on {
            r.notes.push(format!(
                "cache counters after the run: {}",
                cache_counters(server.addr).await?
            ));
        }
    }
    let hand = handwritten(ctx, &reads[0].bodies, c).await?;
    let hand_peak = hand.req_s;
    r.rows.push(hand);
    let peak = |label: &str| peaks.iter().find(|(l, _)| l == label).map_or(0.0, |p| p.1);
    let goal = ctx.db.engine == Engine::Postgres;
    let lookups = ratio(peak("hot lookups, apijet cache on"), hand_peak);
    let nested = ratio(
        peak("nested page, apijet cache on"),
        peak("nested page, apijet cache off"),
    );
    let verdict = |q: f64, min: f64| match (goal, q >= min) {
        (false, _) => "measured (the goal is PostgreSQL's)",
        (true, true) => "met",
        (true, false) => "missed",
    };
    if let Some(q) = lookups {
        r.verdicts.push(format!(
            "{}: hot lookups with the cache are {q:.2}× the hand-written endpoint (goal ≥ 3×)",
            verdict(q, 3.0)
        ));
    }
    if let Some(q) = nested {
        r.verdicts.push(format!(
            "{}: the nested page with the cache is {q:.2}× apijet without it (goal ≥ 5×)",
            verdict(q, 5.0)
        ));
    }
    for (what, on, off) in [
        (
            "hot lookups with 1 % writes",
            "hot lookups, apijet cache on, 1 % writes",
            "hot lookups, apijet cache off, 1 % writes",
        ),
        (
            "the nested page with 1 % writes",
            "nested page, apijet cache on, 1 % writes",
            "nested page, apijet cache off, 1 % writes",
        ),
    ] {
        if let Some(q) = ratio(peak(on), peak(off)) {
            r.notes
                .push(format!("{what}: the cache makes apijet {q:.2}× faster"));
        }
    }
    let errors: f64 = r
        .rows
        .iter()
        .filter(|x| x.side == Side::Apijet)
        .map(|x| x.error_pct * x.samples as f64 / 100.0)
        .sum();
    r.verdicts.push(format!(
        "{}: {errors:.0} apijet errors",
        if errors == 0.0 { "met" } else { "missed" }
    ));
    r.notes.push(format!(
        "{HOT_KEYS} hot keys of {rows} rows; {PAGES} pages of 20 moments; c={c}, closed loop; \
         the writers PUT Ada's comments (their content as it is) at 1 % of the step's read \
         rate without writes"
    ));
    Ok(())
}

/// The cache's counters from `/metrics`.
async fn cache_counters(addr: SocketAddr) -> Result<String, String> {
    let text = super::metrics_text(addr, METRICS_TOKEN).await?;
    Ok(text
        .lines()
        .filter(|l| l.starts_with("apijet_answer_cache_"))
        .map(|l| l.trim_start_matches("apijet_answer_cache_"))
        .collect::<Vec<_>>()
        .join(", "))
}

/// The hand-written endpoint on the hot lookups.
async fn handwritten(ctx: &Ctx<'_>, bodies: &Arc<Vec<String>>, c: usize) -> Result<Row, String> {
    let lookup = Lookup {
        key: "PurchSkuMaster".into(),
        table: "purch_sku_master".into(),
        column: "sku_id".into(),
    };
    let hand = crate::server::start_handwritten(
        &ctx.db.url,
        &lookup,
        &ctx.work.join("cache-handwritten"),
    )?;
    let apijet = ctx.server("cache-check", &config())?;
    same_answers(apijet.addr, hand.addr, "/get", &bodies[..5]).await?;
    drop(apijet);
    warm_up(ctx, &hand, "/get", Arc::clone(bodies), vec![], c).await;
    let (measured, _) = measure_level(
        ctx,
        Level {
            server: &hand,
            path: "/get",
            bodies: Arc::clone(bodies),
            headers: vec![],
            connections: c,
            label: "hot lookups, hand-written".into(),
            group: "hot lookups".into(),
            series: "hand-written endpoint".into(),
            latency: false,
        },
    )
    .await?;
    let mut row = measured
        .into_iter()
        .next()
        .ok_or("the hand-written endpoint measured nothing")?;
    row.side = Side::Baseline;
    Ok(row)
}

/// PUTs of Ada's comments at a fixed rate, from tasks of their own: as many connections as a
/// PUT's time under load needs to keep the rate (each PUT writes its comment's own content
/// again, so the data stays as generated; a write moves the generation all the same).
struct Writer {
    stop: Arc<AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<(u64, u64)>>,
}

impl Writer {
    fn start(addr: SocketAddr, auth: &(String, String), rate: f64) -> Writer {
        let stop = Arc::new(AtomicBool::new(false));
        let rate = rate.max(1.0);
        let writers = ((rate / 25.0).ceil() as usize).clamp(1, 16);
        let every = Duration::from_secs_f64(writers as f64 / rate);
        let tasks = (0..writers)
            .map(|w| {
                let auth = auth.clone();
                let flag = Arc::clone(&stop);
                tokio::spawn(async move {
                    let (mut done, mut failed) = (0u64, 0u64);
                    let mut client = Connection::new(addr);
                    let mut tick = tokio::time::interval(every);
                    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                    let mut n = w as u64;
                    while !flag.load(Ordering::Relaxed) {
                        tick.tick().await;
                        // Ada's comments: every ADA_EVERY-th generated one.
                        let g = ADA_EVERY * (1 + n % 1000);
                        n += writers as u64;
                        let body = format!(
                            "{{\"tag\":\"Comment\",\"Comment\":{{\"id\":{},\"content\":\"comment number {g}\"}}}}",
                            COMMENT_BASE + g as i64
                        );
                        let headers = [(auth.0.as_str(), auth.1.as_str())];
                        match client.post("/put", &headers, body.as_bytes()).await {
                            Ok((_, answer)) if apijet_testkit::body_code(&answer) == Some(200) => {
                                done += 1
                            }
                            _ => failed += 1,
                        }
                    }
                    (done, failed)
                })
            })
            .collect();
        Writer { stop, tasks }
    }

    async fn stop(self) -> (u64, u64) {
        self.stop.store(true, Ordering::Relaxed);
        let mut total = (0, 0);
        for t in self.tasks {
            let (d, f) = t.await.unwrap_or((0, 1));
            total = (total.0 + d, total.1 + f);
        }
        total
    }
}
