//! Scenario 3, nested list: a page of Moments, each with its User (`id@`) and up to 5
//! Comments (`Comment[]` by `momentId@`), at several page sizes. The server reports the SQL
//! statements it ran in the `x-apijet-statements` header; the goal is that this count does not
//! grow with the page size (at most one statement per nesting level).

use super::{empty_report, measure_level, verify, warm_up, Ctx, Level};
use crate::report::ScenarioReport;
use crate::rng::Rng;
use crate::server::ServerConfig;
use std::sync::Arc;

pub const GOAL: &str =
    "SQL statements per request independent of the page size (≤ 1 per nesting level: 3)";

/// The request for page `page` of `size` moments.
pub fn request(size: u64, page: u64) -> String {
    format!(
        "{{\"[]\":{{\"count\":{size},\"page\":{page},\
         \"Moment\":{{\"@order\":\"id-\",\"@column\":\"id,userId,date,content\"}},\
         \"User\":{{\"id@\":\"/Moment/userId\",\"@column\":\"id,name\"}},\
         \"Comment[]\":{{\"count\":5,\"Comment\":{{\"momentId@\":\"[]/Moment/id\",\"@column\":\"id,userId,content\"}}}}}}}}"
    )
}

pub async fn run(ctx: &Ctx<'_>) -> ScenarioReport {
    let mut r = empty_report(
        "nested",
        ctx,
        "Nested list: Moments with their User and Comments",
        request(20, 0),
        GOAL,
    );
    if let Err(e) = body(ctx, &mut r).await {
        r.error = Some(e);
    }
    r
}

async fn body(ctx: &Ctx<'_>, r: &mut ScenarioReport) -> Result<(), String> {
    let server = ctx.server(
        "nested",
        &ServerConfig {
            max_count: 100,
            write_queue: true,
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
                .map(|_| request(size, rng.below(pages)))
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
