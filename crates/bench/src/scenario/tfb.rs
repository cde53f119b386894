//! Scenario 5, TechEmpower-style on the demo data: a single query (`{"Moment":{"id":…}}`), 20
//! queries in one request (20 aliased objects `"Moment:q0"…`, one lookup each, as TFB's
//! "multiple queries" test asks) and 20 updates in one request (`PUT` of 20 of Ada's comments,
//! `"tag":"Comment:[]"`, ids sorted). Baseline: our raw client doing the same statements
//! (prepared; the updates in one transaction).

use super::{empty_report, login, measure_level, ratio, verify, warm_up, Ctx, Level};
use crate::baseline::{run_raw, Key, RawWork};
use crate::report::{Row, ScenarioReport, Side};
use crate::server::ServerConfig;
use apijet_testkit::data::demo::{ADA, MOMENT_BASE};
use apijet_testkit::Rng;
use std::sync::Arc;

pub const GOAL: &str = "apijet req/s ≥ 0.8× the raw client's (anchor G5)";

const QUERIES: usize = 20;

/// One endpoint: name, path, bodies, headers, and the raw client's equivalent.
type Test = (
    &'static str,
    &'static str,
    Arc<Vec<String>>,
    Vec<(String, String)>,
    RawWork,
);

fn single(id: i64) -> String {
    format!("{{\"Moment\":{{\"id\":{id}}}}}")
}

fn queries(rng: &mut Rng, moments: u64) -> String {
    let objs: Vec<String> = (0..QUERIES)
        .map(|i| {
            format!(
                "\"Moment:q{i}\":{{\"id\":{}}}",
                MOMENT_BASE + rng.below(moments) as i64
            )
        })
        .collect();
    format!("{{{}}}", objs.join(","))
}

fn update_set(rng: &mut Rng, ada_comments: u64, ada_comment: impl Fn(u64) -> i64) -> Vec<i64> {
    let mut ids: Vec<i64> = Vec::with_capacity(QUERIES);
    while ids.len() < QUERIES.min(ada_comments as usize) {
        let id = ada_comment(rng.below(ada_comments));
        if !ids.contains(&id) {
            ids.push(id);
        }
    }
    ids.sort_unstable();
    ids
}

fn updates(ids: &[i64], stamp: u64) -> String {
    let items: Vec<String> = ids
        .iter()
        .map(|id| format!("{{\"id\":{id},\"content\":\"updated {stamp}\"}}"))
        .collect();
    format!(
        "{{\"tag\":\"Comment:[]\",\"Comment[]\":[{}]}}",
        items.join(",")
    )
}

pub async fn run(ctx: &Ctx<'_>) -> ScenarioReport {
    let mut r = empty_report(
        "tfb",
        ctx,
        "TechEmpower-style: single query, 20 queries, 20 updates",
        single(MOMENT_BASE),
        GOAL,
    );
    if let Err(e) = body(ctx, &mut r).await {
        r.error = Some(e);
    }
    r
}

async fn body(ctx: &Ctx<'_>, r: &mut ScenarioReport) -> Result<(), String> {
    let demo = ctx.settings.demo;
    let moments = demo.moments.max(1);
    let n = ctx.settings.keys;
    let c = ctx.settings.tfb_connections;
    let mut rng = Rng::new(0x7FB);
    let ids: Vec<i64> = (0..n)
        .map(|_| MOMENT_BASE + rng.below(moments) as i64)
        .collect();
    let singles: Arc<Vec<String>> = Arc::new(ids.iter().map(|&i| single(i)).collect());
    let multi: Arc<Vec<String>> = Arc::new(
        (0..n.min(2000))
            .map(|_| queries(&mut rng, moments))
            .collect(),
    );
    let sets: Vec<Vec<i64>> = (0..n.min(2000))
        .map(|_| update_set(&mut rng, demo.ada_comments(), |j| demo.ada_comment(j)))
        .collect();
    let puts: Arc<Vec<String>> = Arc::new(
        sets.iter()
            .enumerate()
            .map(|(i, s)| updates(s, i as u64))
            .collect(),
    );
    let server = ctx.server(
        "tfb",
        &ServerConfig {
            max_count: 100,
            write_queue: true,
            answer_cap: None,
        },
    )?;
    let auth = login(server.addr).await?;
    let single_statements = verify(server.addr, "/get", &[], &singles, 3, &|v| {
        v.get("Moment")
            .and_then(|m| m.get("id"))
            .map(|_| ())
            .ok_or("no Moment".into())
    })
    .await?;
    let multi_statements = verify(server.addr, "/get", &[], &multi, 2, &|v| {
        (0..QUERIES)
            .all(|i| {
                v.get(format!("Moment:q{i}"))
                    .is_some_and(|m| m.get("id").is_some())
            })
            .then_some(())
            .ok_or_else(|| "not every Moment:qN came back".to_string())
    })
    .await?;
    let put_statements = verify(
        server.addr,
        "/put",
        std::slice::from_ref(&auth),
        &puts,
        2,
        &|_| Ok(()),
    )
    .await?;
    warm_up(ctx, &server, "/get", Arc::clone(&singles), vec![], c).await;
    let statements = [single_statements, multi_statements, put_statements];
    let tests: [Test; 3] = [
        (
            "single query",
            "/get",
            singles,
            vec![],
            RawWork::Lookup {
                table: "Moment".into(),
                column: "id".into(),
                keys: Arc::new(ids.iter().map(|&i| Key::Int(i)).collect()),
                per_tx: 1,
            },
        ),
        (
            "20 queries",
            "/get",
            multi,
            vec![],
            RawWork::Lookup {
                table: "Moment".into(),
                column: "id".into(),
                keys: Arc::new(ids.iter().map(|&i| Key::Int(i)).collect()),
                per_tx: QUERIES,
            },
        ),
        (
            "20 updates",
            "/put",
            puts,
            vec![auth.clone()],
            RawWork::Update {
                sets: Arc::new(sets),
                user_id: ADA,
            },
        ),
    ];
    let mut verdicts = Vec::new();
    for ((name, path, bodies, headers, raw), stmts) in tests.into_iter().zip(statements) {
        let (mut rows, notes) = measure_level(
            ctx,
            Level {
                server: &server,
                path,
                bodies,
                headers,
                connections: c,
                label: format!("apijet {name} c={c}"),
                group: name.to_string(),
                series: "apijet".into(),
                latency: true,
            },
        )
        .await?;
        let m = run_raw(ctx.db, &raw, c, ctx.settings.duration).await?;
        let base = Row::from_measured(
            format!("baseline {name}"),
            "baseline raw client",
            name,
            Side::Baseline,
            Some(c),
            &m,
        );
        for row in &mut rows {
            row.statements = stmts;
        }
        for row in rows.iter_mut().filter(|x| x.mode == "closed") {
            row.ratio = ratio(row.req_s, base.req_s);
            if let Some(q) = row.ratio {
                verdicts.push(format!(
                    "{}: {name} at {q:.2}× the raw client (goal ≥ 0.8×)",
                    if q >= 0.8 { "met" } else { "missed" }
                ));
            }
        }
        r.rows.extend(rows);
        r.rows.push(base);
        for n in notes {
            if !r.notes.contains(&n) {
                r.notes.push(n);
            }
        }
    }
    r.notes.push(format!(
        "ratio = apijet req/s ÷ the raw client's req/s at the same level; {} random moments of {moments}; \
         20 queries = 20 aliased objects (20 statements; the APIJSON idiom \"id{{}}\":[…] would be one); \
         20 updates = one PUT of 20 of Ada's comments, in one transaction, as the raw client does",
        n
    ));
    r.verdicts.extend(verdicts);
    Ok(())
}
