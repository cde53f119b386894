//! Scenario 4, inserts: single-row `POST /post {"tag":"Comment",…}` as Ada at each client
//! level with the write queue off and on (group commit), a batch POST of `batch_rows` rows
//! (`"tag":"Comment:[]"`), and the raw multi-row INSERT of the same number of rows through one
//! connection as the baseline (what the retired bench/inserts.sh measured). Both sides spread
//! their rows over the same random moments, so both write to the same parts of the `momentId`
//! index.

use super::{empty_report, login, measure_level, ratio, verify, warm_up, Ctx, Level};
use crate::baseline::{run_raw, RawWork};
use crate::report::{Row, ScenarioReport, Side};
use crate::server::ServerConfig;
use apijet_testkit::data::demo::{ADA, COMMENT_BASE, MOMENT_BASE};
use apijet_testkit::Rng;
use std::sync::atomic::AtomicI64;
use std::sync::Arc;

pub const GOAL: &str =
    "single-row POST rows/s: queue on ≫ queue off; batch POST close to the raw multi-row INSERT";

fn single_body(moment: i64, n: u64) -> String {
    format!("{{\"tag\":\"Comment\",\"Comment\":{{\"momentId\":{moment},\"content\":\"bench insert {n}\"}}}}")
}

fn batch_body(rng: &mut Rng, moments: u64, rows: usize) -> String {
    let items: Vec<String> = (0..rows)
        .map(|i| {
            format!(
                "{{\"momentId\":{},\"content\":\"bench batch {i}\"}}",
                MOMENT_BASE + rng.below(moments) as i64
            )
        })
        .collect();
    format!(
        "{{\"tag\":\"Comment:[]\",\"Comment[]\":[{}]}}",
        items.join(",")
    )
}

pub async fn run(ctx: &Ctx<'_>) -> ScenarioReport {
    let mut r = empty_report(
        "insert",
        ctx,
        "Inserts: single-row POSTs (write queue off/on), batch POST, raw multi-row INSERT",
        single_body(MOMENT_BASE, 1),
        GOAL,
    );
    if let Err(e) = body(ctx, &mut r).await {
        r.error = Some(e);
    }
    r
}

async fn body(ctx: &Ctx<'_>, r: &mut ScenarioReport) -> Result<(), String> {
    let moments = ctx.settings.demo.moments.max(1);
    let mut rng = Rng::new(0x1A5E);
    let singles: Arc<Vec<String>> = Arc::new(
        (0..ctx.settings.keys as u64)
            .map(|n| single_body(MOMENT_BASE + rng.below(moments) as i64, n))
            .collect(),
    );
    let clients = ctx.settings.insert_clients.clone();
    let mut by_mode: Vec<(bool, Vec<Row>)> = Vec::new();
    for queue in [false, true] {
        let name = if queue {
            "insert-queue-on"
        } else {
            "insert-queue-off"
        };
        let server = ctx.server(
            name,
            &ServerConfig {
                max_count: 100,
                write_queue: queue,
                answer_cap: None,
            },
        )?;
        let auth = login(server.addr).await?;
        verify(
            server.addr,
            "/post",
            std::slice::from_ref(&auth),
            &singles,
            2,
            &|v| {
                v.get("Comment")
                    .and_then(|c| c.get("id"))
                    .map(|_| ())
                    .ok_or_else(|| "no Comment.id in the answer".to_string())
            },
        )
        .await?;
        warm_up(
            ctx,
            &server,
            "/post",
            Arc::clone(&singles),
            vec![auth.clone()],
            clients[0],
        )
        .await;
        let mode = if queue { "queue on" } else { "queue off" };
        let mut rows = Vec::new();
        for &c in &clients {
            let (mut lv_rows, notes) = measure_level(
                ctx,
                Level {
                    server: &server,
                    path: "/post",
                    bodies: Arc::clone(&singles),
                    headers: vec![auth.clone()],
                    connections: c,
                    label: format!("POST 1 row, {mode}, c={c}"),
                    group: format!("c={c}"),
                    series: format!("apijet {mode}"),
                    // Open-loop latency at the middle level only: the scenario is about rows/s.
                    latency: clients.len() < 3 || c == clients[clients.len() / 2],
                },
            )
            .await?;
            for row in &mut lv_rows {
                row.rows_s = Some(row.req_s);
            }
            rows.extend(lv_rows);
            for n in notes {
                if !r.notes.contains(&n) {
                    r.notes.push(n);
                }
            }
        }
        if queue {
            // The batch POST, on the server with the queue on (batches bypass it).
            let batch = ctx.settings.batch_rows;
            let bodies: Arc<Vec<String>> = Arc::new(
                (0..8)
                    .map(|_| batch_body(&mut rng, moments, batch))
                    .collect(),
            );
            verify(
                server.addr,
                "/post",
                std::slice::from_ref(&auth),
                &bodies,
                1,
                &|v| {
                    let count = v
                        .get("Comment")
                        .and_then(|c| c.get("count"))
                        .and_then(|c| c.as_u64());
                    (count == Some(batch as u64))
                        .then_some(())
                        .ok_or_else(|| format!("Comment.count is {count:?}, not {batch}"))
                },
            )
            .await?;
            let (mut lv_rows, _) = measure_level(
                ctx,
                Level {
                    server: &server,
                    path: "/post",
                    bodies,
                    headers: vec![auth.clone()],
                    connections: 1,
                    label: format!("POST {batch} rows (batch), c=1"),
                    group: format!("batch {batch}"),
                    series: "apijet batch".into(),
                    latency: false,
                },
            )
            .await?;
            for row in &mut lv_rows {
                row.rows_s = Some(row.req_s * batch as f64);
            }
            rows.extend(lv_rows);
        }
        by_mode.push((queue, rows));
    }
    // Raw single-row INSERTs (autocommit, one row per transaction) at the same levels: what
    // the queue-off path costs without HTTP and APIJSON.
    let next_id = Arc::new(AtomicI64::new(COMMENT_BASE * 10));
    let mut singles_raw = Vec::new();
    for &c in &clients {
        let work = RawWork::Insert {
            rows: 1,
            next_id: Arc::clone(&next_id),
            user_id: ADA,
            moment_id: MOMENT_BASE,
            moments,
        };
        let m = run_raw(ctx.db, &work, c, ctx.settings.duration).await?;
        let mut row = Row::from_measured(
            format!("raw INSERT 1 row, c={c}"),
            "baseline raw 1-row INSERT",
            format!("c={c}"),
            Side::Baseline,
            Some(c),
            &m,
        );
        row.rows_s = Some(m.req_s);
        singles_raw.push(row);
    }
    // The raw multi-row INSERT baseline: one connection, batch_rows rows per statement.
    let batch = ctx.settings.batch_rows;
    let work = RawWork::Insert {
        rows: batch,
        next_id,
        user_id: ADA,
        moment_id: MOMENT_BASE,
        moments,
    };
    let m = run_raw(ctx.db, &work, 1, ctx.settings.duration).await?;
    let mut base = Row::from_measured(
        format!("raw INSERT {batch} rows, 1 connection"),
        "baseline raw multi-row INSERT",
        format!("batch {batch}"),
        Side::Baseline,
        Some(1),
        &m,
    );
    base.rows_s = Some(m.req_s * batch as f64);
    let base_rows_s = base.rows_s.unwrap_or(0.0);
    for (_, rows) in &mut by_mode {
        for row in rows.iter_mut().filter(|x| x.mode == "closed") {
            row.ratio = ratio(row.rows_s.unwrap_or(0.0), base_rows_s);
        }
    }
    // Queue on vs off, level by level.
    let peak = |queue: bool, c: usize| {
        by_mode
            .iter()
            .find(|(q, _)| *q == queue)
            .and_then(|(_, rows)| {
                rows.iter().find(|x| {
                    x.mode == "closed"
                        && x.connections == Some(c)
                        && x.label.starts_with("POST 1 row")
                })
            })
            .map(|x| x.req_s)
            .unwrap_or(0.0)
    };
    let gains: Vec<String> = clients
        .iter()
        .map(|&c| {
            ratio(peak(true, c), peak(false, c))
                .map_or(format!("c={c}: n/a"), |g| format!("c={c}: {g:.1}×"))
        })
        .collect();
    let best_gain = clients
        .iter()
        .filter_map(|&c| ratio(peak(true, c), peak(false, c)))
        .fold(0.0f64, f64::max);
    let raw_vs: Vec<String> = clients
        .iter()
        .map(|&c| {
            let raw = singles_raw
                .iter()
                .find(|x| x.connections == Some(c))
                .map_or(0.0, |x| x.req_s);
            format!(
                "c={c}: off {} / on {}",
                ratio(peak(false, c), raw).map_or("n/a".into(), |q| format!("{q:.2}×")),
                ratio(peak(true, c), raw).map_or("n/a".into(), |q| format!("{q:.2}×"))
            )
        })
        .collect();
    for (_, rows) in by_mode {
        r.rows.extend(rows);
    }
    r.notes.push(format!(
        "single-row POST req/s ÷ raw 1-row INSERT (autocommit) at the same clients: {}",
        raw_vs.join(", ")
    ));
    r.rows.extend(singles_raw);
    r.rows.push(base);
    r.notes.push(format!(
        "ratio = apijet rows/s ÷ the raw multi-row INSERT's rows/s ({base_rows_s:.0}); queue on ÷ queue off, \
         single-row req/s: {}",
        gains.join(", ")
    ));
    r.notes.push(format!(
        "durability: {} (apijet's write queue saves commits, so it matters most with durable commits)",
        ctx.db.durability
    ));
    r.verdicts.push(format!(
        "{}: single-row POSTs with the write queue on reach up to {best_gain:.1}× the rows/s of queue off (anchor G4: ≥ 10× with durable commits)",
        if best_gain >= 10.0 { "met" } else { "missed" }
    ));
    if let Some(b) = r
        .rows
        .iter()
        .find(|x| x.label.contains("(batch)") && x.mode == "closed")
    {
        if let Some(q) = b.ratio {
            r.verdicts.push(format!(
                "{}: batch POST at {q:.2}× the raw multi-row INSERT (anchor G4c: ≥ 0.7×)",
                if q >= 0.7 { "met" } else { "missed" }
            ));
        }
    }
    Ok(())
}
