//! Scenario 2, point lookup: `{"PurchSkuMaster":{"sku_id":…}}` with random existing keys at
//! each connection level, closed loop for peak req/s, then open loop at a fraction of it for
//! latency. The ceiling is the hand-written endpoint ([`crate::handwritten`]): the same
//! request answered with the same JSON on the same HTTP stack and driver, loaded the same way;
//! the ratio is apijet's peak ÷ its peak at the same level. Below it, the same SELECT driven
//! without HTTP — pgbench with a custom script on PostgreSQL, our raw client (prepared
//! statement) on MariaDB and SQLite.

use super::{empty_report, measure_level, ratio, same_answers, verify, warm_up, Ctx, Level};
use crate::baseline::{run_pgbench, run_raw, Key, RawWork};
use crate::handwritten::Lookup;
use crate::report::{Row, ScenarioReport, Side};
use crate::server::ServerConfig;
use apijet_testkit::data::sku;
use apijet_testkit::engine::Engine;
use apijet_testkit::Rng;
use std::sync::Arc;

pub const GOAL: &str =
    "apijet ≥ 0.9× the hand-written endpoint's req/s; p99 ≤ 3× median (open loop); 0 errors";

pub async fn run(ctx: &Ctx<'_>) -> ScenarioReport {
    let rows = ctx.settings.sku_rows;
    let example = format!(
        "{{\"PurchSkuMaster\":{{\"sku_id\":\"{}\"}}}}",
        sku::sku_id(rows / 2, sku::key_digits(rows))
    );
    let mut r = empty_report(
        "point",
        ctx,
        "Point lookup by an indexed uuid-like key",
        example,
        GOAL,
    );
    if let Err(e) = body(ctx, &mut r).await {
        r.error = Some(e);
    }
    r
}

/// The pgbench script: a random key, the sku_id built from it in SQL as the generator does.
fn pgbench_script(rows: u64) -> String {
    let digits = sku::key_digits(rows);
    let sku = sku::sku_sql_for(Engine::Postgres, digits, "(:k)");
    format!(
        "\\set k random(0, {})\nSELECT * FROM purch_sku_master WHERE sku_id = {sku} LIMIT 1;\n",
        rows - 1
    )
}

async fn body(ctx: &Ctx<'_>, r: &mut ScenarioReport) -> Result<(), String> {
    let rows = ctx.settings.sku_rows;
    let digits = sku::key_digits(rows);
    let mut rng = Rng::new(0x5C0);
    let keys: Vec<String> = (0..ctx.settings.keys)
        .map(|_| sku::sku_id(rng.below(rows), digits))
        .collect();
    let bodies: Arc<Vec<String>> = Arc::new(
        keys.iter()
            .map(|k| format!("{{\"PurchSkuMaster\":{{\"sku_id\":\"{k}\"}}}}"))
            .collect(),
    );
    let server = ctx.server(
        "point",
        &ServerConfig {
            max_count: 100,
            write_queue: true,
            answer_cap: None,
        },
    )?;
    let statements = verify(server.addr, "/get", &[], &bodies, 5, &|v| {
        v.get("PurchSkuMaster")
            .and_then(|o| o.get("sku_id"))
            .map(|_| ())
            .ok_or_else(|| "no PurchSkuMaster row in the answer".to_string())
    })
    .await?;
    let levels = ctx.settings.point_connections.clone();
    warm_up(ctx, &server, "/get", Arc::clone(&bodies), vec![], levels[0]).await;
    let mut apijet_rows = Vec::new();
    for &c in &levels {
        let (rows_, notes) = measure_level(
            ctx,
            Level {
                server: &server,
                path: "/get",
                bodies: Arc::clone(&bodies),
                headers: vec![],
                connections: c,
                label: format!("apijet c={c}"),
                group: format!("c={c}"),
                series: "apijet".into(),
                latency: true,
            },
        )
        .await?;
        apijet_rows.extend(rows_.into_iter().map(|mut x| {
            x.statements = statements;
            x
        }));
        for n in notes {
            if !r.notes.contains(&n) {
                r.notes.push(n);
            }
        }
    }
    drop(server);
    let hand_rows = handwritten(ctx, &bodies, &levels).await?;
    // Baseline at the same levels.
    let mut base_rows = Vec::new();
    let raw = RawWork::Lookup {
        table: "purch_sku_master".into(),
        column: "sku_id".into(),
        keys: Arc::new(keys.into_iter().map(Key::Text).collect()),
        per_tx: 1,
    };
    let mut measured: Vec<usize> = Vec::new();
    for &c in &levels {
        // SQLite's in-process baseline runs at most 4 threads: one run covers the levels above.
        let effective = match ctx.db.engine.embedded() {
            true => c.min(4),
            false => c,
        };
        if measured.contains(&effective) {
            continue;
        }
        measured.push(effective);
        let (m, series) = match (ctx.db.engine, ctx.tools.pgbench.as_ref()) {
            (Engine::Postgres, Some(pgb)) => (
                run_pgbench(
                    pgb,
                    ctx.db,
                    &pgbench_script(rows),
                    c,
                    ctx.settings.duration,
                    &ctx.work,
                )
                .await?,
                "baseline pgbench",
            ),
            _ => (
                run_raw(ctx.db, &raw, c, ctx.settings.duration).await?,
                "baseline raw client",
            ),
        };
        base_rows.push(Row::from_measured(
            if effective == c {
                format!("baseline c={c}")
            } else {
                format!("baseline {effective} threads (for c ≥ {c})")
            },
            series,
            format!("c={c}"),
            Side::Baseline,
            Some(c),
            &m,
        ));
    }
    let best = base_rows.iter().map(|b| b.req_s).fold(0.0f64, f64::max);
    for row in apijet_rows.iter_mut().filter(|x| x.mode == "closed") {
        let ceiling = hand_rows
            .iter()
            .find(|h| h.connections == row.connections)
            .map_or(0.0, |h| h.req_s);
        row.ratio = ratio(row.req_s, ceiling);
    }
    // Interleave per level: apijet peak, apijet open, baseline.
    for &c in &levels {
        r.rows.extend(
            apijet_rows
                .iter()
                .filter(|x| x.connections == Some(c))
                .cloned(),
        );
        r.rows.extend(
            hand_rows
                .iter()
                .chain(&base_rows)
                .filter(|x| x.connections == Some(c))
                .cloned(),
        );
    }
    r.notes.push(format!(
        "ratio = apijet peak req/s ÷ the hand-written endpoint's peak req/s at the same level \
         (axum + {}, SELECT * … LIMIT 1, the same JSON answer; checked equal before the run); \
         {} random existing keys of {rows} rows",
        match ctx.db.engine {
            Engine::Postgres => "tokio-postgres/deadpool",
            Engine::Mariadb => "mysql_async",
            Engine::Sqlite => "rusqlite, one connection per worker thread",
        },
        ctx.settings.keys
    ));
    match (ctx.db.engine, &ctx.tools.pgbench) {
        (Engine::Postgres, Some(_)) => r.notes.push(
            "pgbench script: \\set k random(0, rows-1); SELECT * … WHERE sku_id = <the generator's expression of :k> LIMIT 1".into(),
        ),
        (Engine::Postgres | Engine::Mariadb | Engine::Sqlite, _) => {}
    }
    if ctx.db.engine.embedded() {
        r.notes
            .push("SQLite baseline: in-process, at most 4 threads (more only contend)".into());
    }
    let best_apijet = apijet_rows
        .iter()
        .filter(|x| x.mode == "closed")
        .map(|x| x.req_s)
        .fold(0.0f64, f64::max);
    let best_hand = hand_rows.iter().map(|x| x.req_s).fold(0.0f64, f64::max);
    if let Some(q) = ratio(best_apijet, best_hand) {
        r.verdicts.push(format!(
            "{}: best apijet req/s is {q:.2}× the hand-written endpoint's best (goal ≥ 0.9×)",
            if q >= 0.9 { "met" } else { "missed" }
        ));
    }
    if let Some(q) = ratio(best_apijet, best) {
        r.notes.push(format!(
            "best apijet req/s is {q:.2}× the best raw (no HTTP) baseline ({best:.0} req/s)"
        ));
    }
    let open: Vec<&Row> = apijet_rows.iter().filter(|x| x.mode == "open").collect();
    if !open.is_empty() {
        let worst = open
            .iter()
            .map(|x| {
                (
                    x.latency.p99 / x.latency.median.max(1e-9),
                    x.connections.unwrap_or(0),
                )
            })
            .fold((0.0f64, 0usize), |a, b| if b.0 > a.0 { b } else { a });
        r.verdicts.push(format!(
            "{}: worst open-loop p99/median = {:.1} (c={}; goal ≤ 3)",
            if worst.0 <= 3.0 { "met" } else { "missed" },
            worst.0,
            worst.1
        ));
    }
    let errors: f64 = apijet_rows
        .iter()
        .map(|x| x.error_pct * x.samples as f64 / 100.0)
        .sum();
    r.verdicts.push(format!(
        "{}: {errors:.0} apijet errors",
        if errors == 0.0 { "met" } else { "missed" }
    ));
    Ok(())
}

/// The hand-written endpoint at every level, closed loop; rows on the baseline side.
async fn handwritten(
    ctx: &Ctx<'_>,
    bodies: &Arc<Vec<String>>,
    levels: &[usize],
) -> Result<Vec<Row>, String> {
    let lookup = Lookup {
        key: "PurchSkuMaster".into(),
        table: "purch_sku_master".into(),
        column: "sku_id".into(),
    };
    eprintln!(
        "[bench] {}: starting the hand-written endpoint",
        ctx.engine()
    );
    let hand = crate::server::start_handwritten(
        &ctx.db.url,
        &lookup,
        &ctx.work.join("point-handwritten"),
    )?;
    // The ceiling must answer what apijet answers: compare a few against a fresh apijet.
    let apijet = ctx.server(
        "point-check",
        &ServerConfig {
            max_count: 100,
            write_queue: true,
            answer_cap: None,
        },
    )?;
    same_answers(
        apijet.addr,
        hand.addr,
        "/get",
        &bodies[..bodies.len().min(5)],
    )
    .await?;
    drop(apijet);
    warm_up(ctx, &hand, "/get", Arc::clone(bodies), vec![], levels[0]).await;
    let mut rows = Vec::new();
    for &c in levels {
        let (measured, _) = measure_level(
            ctx,
            Level {
                server: &hand,
                path: "/get",
                bodies: Arc::clone(bodies),
                headers: vec![],
                connections: c,
                label: format!("hand-written c={c}"),
                group: format!("c={c}"),
                series: "hand-written endpoint".into(),
                latency: false,
            },
        )
        .await?;
        rows.extend(measured.into_iter().map(|mut x| {
            x.side = Side::Baseline;
            x
        }));
    }
    Ok(rows)
}
