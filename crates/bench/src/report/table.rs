//! The aggregate tables, as Markdown pipe tables: readable on a terminal and pasted unchanged
//! into the README. The fixed columns are JMeter's aggregate report; rows/s, ratio, RSS and
//! statements appear only in tables where some row has them.

use super::{Report, Row, ScenarioReport, Side};

/// Milliseconds with a precision that suits their size.
fn ms(v: f64) -> String {
    if v == 0.0 {
        "0".into()
    } else if v < 10.0 {
        format!("{v:.2}")
    } else if v < 100.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.0}")
    }
}

/// A rate with thousands separators.
fn rate(v: f64) -> String {
    if v < 100.0 {
        return format!("{v:.1}");
    }
    let s = format!("{:.0}", v);
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// One scenario's table.
pub fn scenario_table(s: &ScenarioReport) -> String {
    let has = |f: fn(&Row) -> bool| s.rows.iter().any(f);
    let (rows_s, ratio, rss, stmts) = (
        has(|r| r.rows_s.is_some()),
        has(|r| r.ratio.is_some()),
        has(|r| r.rss_mib.is_some()),
        has(|r| r.statements.is_some()),
    );
    let mut head = vec![
        "label", "samples", "avg ms", "median", "p90", "p95", "p99", "min", "max", "error %",
        "req/s", "KB/s",
    ];
    if rows_s {
        head.push("rows/s");
    }
    if ratio {
        head.push("ratio");
    }
    if rss {
        head.push("peak RSS MiB");
    }
    if stmts {
        head.push("statements");
    }
    let mut out = format!("| {} |\n", head.join(" | "));
    out.push_str(&format!(
        "|{}\n",
        head.iter()
            .enumerate()
            .map(|(i, _)| if i == 0 { "---|" } else { "---:|" })
            .collect::<String>()
    ));
    for r in &s.rows {
        let l = &r.latency;
        let mut cells = vec![
            r.label.clone(),
            r.samples.to_string(),
            ms(l.avg),
            ms(l.median),
            ms(l.p90),
            ms(l.p95),
            ms(l.p99),
            ms(l.min),
            ms(l.max),
            format!("{:.2}", r.error_pct),
            rate(r.req_s),
            // Baselines that do not count bytes (pgbench, the raw clients, CLI readers).
            if r.kb_s == 0.0 && r.side == Side::Baseline {
                "–".into()
            } else {
                rate(r.kb_s)
            },
        ];
        let opt = |v: Option<String>| v.unwrap_or_else(|| "".into());
        if rows_s {
            cells.push(opt(r.rows_s.map(rate)));
        }
        if ratio {
            cells.push(opt(r.ratio.map(|v| format!("{v:.2}×"))));
        }
        if rss {
            cells.push(opt(r.rss_mib.map(|v| format!("{v:.1}"))));
        }
        if stmts {
            cells.push(opt(r.statements.map(|v| v.to_string())));
        }
        out.push_str(&format!("| {} |\n", cells.join(" | ")));
    }
    out
}

/// One scenario with its heading, request, goal, notes and verdicts.
pub fn scenario_section(s: &ScenarioReport, version: &str) -> String {
    let mut out = format!("### {} — {} ({version})\n\n", s.id, s.title);
    if !s.request.is_empty() {
        out.push_str(&format!("Request: `{}`\n\n", s.request));
    }
    out.push_str(&format!("Goal: {}\n\n", s.goal));
    if !s.rows.is_empty() {
        out.push_str(&scenario_table(s));
        out.push('\n');
    }
    for n in &s.notes {
        out.push_str(&format!("- {n}\n"));
    }
    for v in &s.verdicts {
        out.push_str(&format!("- **{v}**\n"));
    }
    if let Some(e) = &s.error {
        out.push_str(&format!("- **error: {e}**\n"));
    }
    out.push('\n');
    out
}

/// One line per scenario and engine: the goal checks, for a README.
pub fn summary_markdown(r: &Report) -> String {
    let mut out = String::from("| scenario | engine | result against the goal |\n|---|---|---|\n");
    for s in &r.scenarios {
        let mut lines: Vec<String> = s.verdicts.iter().map(|v| v.replace('|', "\\|")).collect();
        if let Some(e) = &s.error {
            lines.push(format!("error: {}", e.replace('|', "\\|")));
        }
        out.push_str(&format!(
            "| {} | {} | {} |\n",
            s.id,
            s.engine.name(),
            lines.join("<br>")
        ));
    }
    out
}

/// The whole run as Markdown.
pub fn report_markdown(r: &Report) -> String {
    let m = &r.machine;
    let mut out = format!(
        "## apijet bench, {}\n\n{} CPUs ({}), {:.1} GiB RAM, {}; repository HEAD {} at run time; load generator: {}; \
         load average {} at the start, {} at the end\n\n`{}`\n\n",
        r.date,
        m.cpus,
        m.cpu_model,
        m.memory_gib,
        m.os,
        m.apijet_commit,
        r.loader,
        r.loadavg_start,
        r.loadavg_end,
        r.command
    );
    for (e, v) in &r.engines {
        out.push_str(&format!("- {}: {v}\n", e.name()));
    }
    out.push('\n');
    out.push_str(&summary_markdown(r));
    out.push('\n');
    for s in &r.scenarios {
        let version = r
            .engines
            .iter()
            .find(|(e, _)| *e == s.engine)
            .map(|(_, v)| v.split(';').next().unwrap_or(v))
            .unwrap_or("");
        out.push_str(&scenario_section(s, version));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_and_ms_format() {
        assert_eq!(rate(1234567.4), "1,234,567");
        assert_eq!(rate(999.0), "999");
        assert_eq!(rate(12.34), "12.3");
        assert_eq!(ms(0.1234), "0.12");
        assert_eq!(ms(12.34), "12.3");
        assert_eq!(ms(1234.0), "1234");
    }
}
