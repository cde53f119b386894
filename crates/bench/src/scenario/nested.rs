//! Scenario 3, nested list: a page of Moments, each with its User (`id@`) and up to 5
//! Comments (`Comment[]` by `momentId@`), at several page sizes. The server reports the SQL
//! statements it ran in the `x-apijet-statements` header; the goal is that this count does not
//! grow with the page size (at most one statement per nesting level).
//!
//! Then one server with the answer cap raised ([`BIG_CAP`]) answers ever longer pages, up to
//! every moment at once, each read to its last byte, and its peak RSS is measured per size:
//! nested answers stream, so the peak should stay within [`FLAT_MIB`] of idle at every size.

use super::post_counting;
use super::{empty_report, measure_level, short_n, verify, warm_up, Ctx, Level};
use crate::report::ScenarioReport;
use crate::server::ServerConfig;
use apijet_testkit::data::demo::nested_page;
use apijet_testkit::Rng;
use std::sync::Arc;

pub const GOAL: &str =
    "SQL statements per request independent of the page size (≤ 1 per nesting level: 3)";

/// `max_rows` and `max_answer_bytes` of the server answering whole-table pages.
const BIG_CAP: (u64, u64) = (1_000_000, 1 << 30);

/// How far above idle the peak RSS may go at any size.
const FLAT_MIB: f64 = 64.0;

pub async fn run(ctx: &Ctx<'_>) -> ScenarioReport {
    let mut r = empty_report(
        "nested",
        ctx,
        "Nested list: Moments with their User and Comments",
        nested_page(20, 0),
        GOAL,
    );
    if let Err(e) = body(ctx, &mut r).await {
        r.error = Some(e);
    }
    if r.error.is_none() {
        if let Err(e) = peak_per_size(ctx, &mut r).await {
            r.error = Some(e);
        }
    }
    r
}

/// Peak RSS of one server answering a page of 1%, 10% and 100% of the moments.
async fn peak_per_size(ctx: &Ctx<'_>, r: &mut ScenarioReport) -> Result<(), String> {
    let moments = ctx.settings.demo.moments;
    let mut sizes: Vec<u64> = [moments / 100, moments / 10, moments]
        .into_iter()
        .filter(|&n| n > 0)
        .collect();
    sizes.dedup();
    let server = ctx.server(
        "nested-big",
        &ServerConfig {
            max_count: moments,
            write_queue: true,
            answer_cap: Some(BIG_CAP),
        },
    )?;
    std::thread::sleep(std::time::Duration::from_millis(300));
    let idle_kib = server.rss_kib().unwrap_or(0);
    let mut above = Vec::new();
    for &n in &sizes {
        server.reset_peak();
        let sampler = server.sample_rss();
        let (items, bytes) = post_counting(
            server.addr,
            &nested_page(n, 0),
            b"{\"Moment\":",
            b"{\"[]\":[",
            "nested page",
        )
        .await?;
        let peak_kib = sampler.stop().max(server.peak_rss_kib().unwrap_or(0));
        if items != n {
            return Err(format!("a page of {n} moments answered {items} items"));
        }
        let (peak, over) = (
            peak_kib as f64 / 1024.0,
            peak_kib.saturating_sub(idle_kib) as f64 / 1024.0,
        );
        println!(
            "[bench] {}: nested page of {} moments ({:.1} MB of JSON): peak RSS {peak:.1} MiB, \
             {over:.1} MiB above idle",
            ctx.engine(),
            short_n(n),
            bytes as f64 / 1e6
        );
        r.notes.push(format!(
            "peak RSS for a page of {} moments with their users and comments ({:.1} MB of \
             JSON, answer cap max_rows={}, max_answer_bytes={}): {peak:.1} MiB, {over:.1} MiB \
             above idle",
            short_n(n),
            bytes as f64 / 1e6,
            BIG_CAP.0,
            BIG_CAP.1
        ));
        above.push((n, over));
    }
    let worst = above.iter().map(|a| a.1).fold(0.0f64, f64::max);
    r.verdicts.push(format!(
        "{}: peak RSS at most {worst:.1} MiB above idle ({:.1} MiB) for pages of {} moments \
         (goal: within {FLAT_MIB} MiB at every size)",
        if worst <= FLAT_MIB { "met" } else { "missed" },
        idle_kib as f64 / 1024.0,
        above
            .iter()
            .map(|a| short_n(a.0))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    Ok(())
}

async fn body(ctx: &Ctx<'_>, r: &mut ScenarioReport) -> Result<(), String> {
    let server = ctx.server(
        "nested",
        &ServerConfig {
            max_count: 100,
            write_queue: true,
            answer_cap: None,
        },
    )?;
    let c = ctx.settings.nested_connections;
    let mut counts = Vec::new();
    let mut rng = Rng::new(0x2E57);
    let moments = ctx.settings.demo.moments;
    for (i, &size) in ctx.settings.nested_pages.iter().enumerate() {
        // Random pages among the first 100 (deep OFFSETs would measure the database's
        // skipping, not the nesting).
        let pages = (moments / size.max(1)).clamp(1, 100);
        let bodies: Arc<Vec<String>> = Arc::new(
            (0..ctx.settings.keys.min(1000))
                .map(|_| nested_page(size, rng.below(pages)))
                .collect(),
        );
        let want = size as usize;
        let statements = verify(server.addr, "/get", &[], &bodies, 3, &|v| {
            let items = v
                .get("[]")
                .and_then(|a| a.as_array())
                .ok_or("no [] array")?;
            if items.len() != want {
                return Err(format!("{} items instead of {want}", items.len()));
            }
            let first = &items[0];
            if first.get("Moment").is_none() || first.get("User").is_none() {
                return Err("an item lacks its Moment or User".into());
            }
            Ok(())
        })
        .await?;
        counts.push((size, statements));
        if i == 0 {
            warm_up(ctx, &server, "/get", Arc::clone(&bodies), vec![], c).await;
        }
        let (mut rows, notes) = measure_level(
            ctx,
            Level {
                server: &server,
                path: "/get",
                bodies,
                headers: vec![],
                connections: c,
                label: format!("apijet {size} moments c={c}"),
                group: format!("page={size}"),
                series: "apijet".into(),
                latency: true,
            },
        )
        .await?;
        for row in &mut rows {
            row.statements = statements;
            row.rows_s = Some(row.req_s * size as f64);
        }
        r.rows.extend(rows);
        for n in notes {
            if !r.notes.contains(&n) {
                r.notes.push(n);
            }
        }
    }
    let shown: Vec<String> = counts
        .iter()
        .map(|(s, n)| {
            format!(
                "{s} moments → {}",
                n.map_or("no header".to_string(), |n| n.to_string())
            )
        })
        .collect();
    println!(
        "[bench] {}: nested statements per request: {}",
        ctx.engine(),
        shown.join(", ")
    );
    r.notes.push(format!(
        "x-apijet-statements per request: {}; rows/s counts moments; each moment brings its user and ≤ 5 comments; \
         no baseline (the goal is a count)",
        shown.join(", ")
    ));
    let values: Vec<u64> = counts.iter().filter_map(|(_, n)| *n).collect();
    if values.len() == counts.len() && !values.is_empty() {
        let same = values.iter().all(|v| *v == values[0]);
        r.verdicts.push(format!(
            "{}: {} statements per request at every page size (goal: constant, ≤ 3)",
            if same && values[0] <= 3 {
                "met"
            } else {
                "missed"
            },
            if same {
                values[0].to_string()
            } else {
                format!("{values:?}")
            }
        ));
    } else {
        r.verdicts
            .push("missed: the server sent no x-apijet-statements header".into());
    }
    Ok(())
}
