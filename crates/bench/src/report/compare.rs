//! `apijet bench --compare OLD/results.json`: this run against an earlier one, row by row.
//!
//! Rows are matched by engine, scenario and label (`apijet c=64 peak`, `N=100k`, …). For each
//! pair the table shows throughput (req/s, or rows/s where the row has it), median and p99
//! latency and the ratio against the baseline, old → new with the change in per cent.
//!
//! The noise is measured, not assumed: the baselines (hand-written endpoint, pgbench, the raw
//! clients, the engines' own command-line tools) run the same code in both runs, so how much
//! *they* moved between the runs is how much this machine varies from run to run. Per scenario
//! and engine, the throughput noise is the largest change of a baseline row's rate and the
//! latency noise the largest change of a baseline row's median, each at least
//! [`MIN_RATE_NOISE`] / [`MIN_LATENCY_NOISE`]. An apijet row is flagged when its rate or its
//! ratio drops, or its p99 grows, by more than that.

use super::{Report, Row, ScenarioReport, Side};
use serde::Serialize;

/// Throughput changes below this are never flagged (5 %).
pub const MIN_RATE_NOISE: f64 = 0.05;
/// Latency changes below this are never flagged (10 %).
pub const MIN_LATENCY_NOISE: f64 = 0.10;

/// One matched row.
#[derive(Clone, Debug, Serialize)]
pub struct RowChange {
    pub label: String,
    pub side: Side,
    /// `req/s` or `rows/s`.
    pub unit: &'static str,
    pub rate_old: f64,
    pub rate_new: f64,
    pub median_old: f64,
    pub median_new: f64,
    pub p99_old: f64,
    pub p99_new: f64,
    pub ratio_old: Option<f64>,
    pub ratio_new: Option<f64>,
    /// Why the row is flagged; empty when it is not.
    pub flags: Vec<String>,
}

/// One scenario on one engine.
#[derive(Clone, Debug, Serialize)]
pub struct ScenarioChange {
    pub id: String,
    pub engine: String,
    /// Measured throughput and latency noise (fractions).
    pub rate_noise: f64,
    pub latency_noise: f64,
    /// Where the noise figure came from.
    pub noise_from: String,
    pub rows: Vec<RowChange>,
    /// Labels only in the old or only in the new run.
    pub only_old: Vec<String>,
    pub only_new: Vec<String>,
}

/// The whole comparison.
#[derive(Clone, Debug, Serialize)]
pub struct Comparison {
    pub old_date: String,
    pub old_commit: String,
    pub new_date: String,
    pub new_commit: String,
    pub scenarios: Vec<ScenarioChange>,
    /// One line per flagged row: `scenario engine label: why`.
    pub flagged: Vec<String>,
}

/// Relative change `new / old − 1`, or `None` when `old` is 0.
fn change(old: f64, new: f64) -> Option<f64> {
    (old > 0.0 && old.is_finite() && new.is_finite()).then(|| new / old - 1.0)
}

/// The rate a row is judged by: rows/s where it has them (inserts, big lists), else req/s.
fn rate(r: &Row) -> (f64, &'static str) {
    match r.rows_s {
        Some(v) => (v, "rows/s"),
        None => (r.req_s, "req/s"),
    }
}

/// Compares `new` against `old`.
pub fn compare(old: &Report, new: &Report) -> Comparison {
    let mut scenarios = Vec::new();
    let mut flagged = Vec::new();
    for s in &new.scenarios {
        let Some(o) = old
            .scenarios
            .iter()
            .find(|o| o.id == s.id && o.engine == s.engine)
        else {
            continue;
        };
        let c = compare_scenario(o, s);
        for r in &c.rows {
            if !r.flags.is_empty() {
                flagged.push(format!(
                    "{} on {}, {}: {}",
                    c.id,
                    c.engine,
                    r.label,
                    r.flags.join("; ")
                ));
            }
        }
        scenarios.push(c);
    }
    Comparison {
        old_date: old.date.clone(),
        old_commit: old.machine.apijet_commit.clone(),
        new_date: new.date.clone(),
        new_commit: new.machine.apijet_commit.clone(),
        scenarios,
        flagged,
    }
}

fn compare_scenario(old: &ScenarioReport, new: &ScenarioReport) -> ScenarioChange {
    let pairs: Vec<(&Row, &Row)> = new
        .rows
        .iter()
        .filter_map(|n| Some((old.rows.iter().find(|o| o.label == n.label)?, n)))
        .collect();
    let baselines: Vec<&(&Row, &Row)> = pairs
        .iter()
        .filter(|(_, n)| n.side == Side::Baseline)
        .collect();
    let max_abs = |f: &dyn Fn(&Row) -> f64| {
        baselines
            .iter()
            .filter_map(|(o, n)| change(f(o), f(n)))
            .map(f64::abs)
            .fold(0.0f64, f64::max)
    };
    let rate_noise = max_abs(&|r| rate(r).0).max(MIN_RATE_NOISE);
    let latency_noise = max_abs(&|r| r.latency.median).max(MIN_LATENCY_NOISE);
    let noise_from = if baselines.is_empty() {
        "no baseline rows in both runs: the floors".to_string()
    } else {
        format!(
            "largest change of {} baseline row(s) between the runs",
            baselines.len()
        )
    };
    // A list's ratio is apijet's time over the baseline's, so there a larger ratio is the drop.
    let time_ratio = new.id == "list";
    let rows = pairs
        .iter()
        .map(|(o, n)| {
            let (rate_old, unit) = rate(o);
            let (rate_new, _) = rate(n);
            let mut flags = Vec::new();
            if n.side == Side::Apijet {
                if let Some(d) = change(rate_old, rate_new).filter(|d| -d > rate_noise) {
                    flags.push(format!(
                        "{unit} {:+.0}% (noise ±{:.0}%)",
                        d * 100.0,
                        rate_noise * 100.0
                    ));
                }
                if let (Some(a), Some(b)) = (o.ratio, n.ratio) {
                    let worse = |d: f64| if time_ratio { d } else { -d };
                    if let Some(d) = change(a, b).filter(|d| worse(*d) > rate_noise) {
                        flags.push(format!("ratio {a:.2} → {b:.2} ({:+.0}%)", d * 100.0));
                    }
                }
                if let Some(d) = change(o.latency.p99, n.latency.p99).filter(|d| *d > latency_noise)
                {
                    flags.push(format!(
                        "p99 {:+.0}% (noise ±{:.0}%)",
                        d * 100.0,
                        latency_noise * 100.0
                    ));
                }
            }
            RowChange {
                label: n.label.clone(),
                side: n.side,
                unit,
                rate_old,
                rate_new,
                median_old: o.latency.median,
                median_new: n.latency.median,
                p99_old: o.latency.p99,
                p99_new: n.latency.p99,
                ratio_old: o.ratio,
                ratio_new: n.ratio,
                flags,
            }
        })
        .collect();
    let only_old = old
        .rows
        .iter()
        .filter(|o| !new.rows.iter().any(|n| n.label == o.label))
        .map(|o| o.label.clone())
        .collect();
    let only_new = new
        .rows
        .iter()
        .filter(|n| !old.rows.iter().any(|o| o.label == n.label))
        .map(|n| n.label.clone())
        .collect();
    ScenarioChange {
        id: new.id.clone(),
        engine: new.engine.name().to_string(),
        rate_noise,
        latency_noise,
        noise_from,
        rows,
        only_old,
        only_new,
    }
}

fn pct(old: f64, new: f64) -> String {
    match change(old, new) {
        Some(d) => format!("{:+.1}%", d * 100.0),
        None => "–".into(),
    }
}

fn num(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

/// The comparison as Markdown: one table per scenario and engine, then the flagged rows.
pub fn markdown(c: &Comparison) -> String {
    let mut out = format!(
        "# apijet bench --compare\n\nold: {} ({}) → new: {} ({})\n\n",
        c.old_date, c.old_commit, c.new_date, c.new_commit
    );
    for s in &c.scenarios {
        out.push_str(&format!(
            "## {} on {}\n\nnoise: rate ±{:.0}%, latency ±{:.0}% ({})\n\n",
            s.id,
            s.engine,
            s.rate_noise * 100.0,
            s.latency_noise * 100.0,
            s.noise_from
        ));
        out.push_str(
            "| label | side | rate old → new | Δ rate | median ms old → new | Δ median | p99 ms old → new | Δ p99 | ratio old → new | flag |\n\
             |---|---|---|---|---|---|---|---|---|---|\n",
        );
        for r in &s.rows {
            let ratio = match (r.ratio_old, r.ratio_new) {
                (None, None) => String::new(),
                (a, b) => format!(
                    "{} → {}",
                    a.map_or("–".into(), |v| format!("{v:.2}")),
                    b.map_or("–".into(), |v| format!("{v:.2}"))
                ),
            };
            out.push_str(&format!(
                "| {} | {} | {} → {} {} | {} | {} → {} | {} | {} → {} | {} | {} | {} |\n",
                r.label,
                match r.side {
                    Side::Apijet => "apijet",
                    Side::Baseline => "baseline",
                },
                num(r.rate_old),
                num(r.rate_new),
                r.unit,
                pct(r.rate_old, r.rate_new),
                num(r.median_old),
                num(r.median_new),
                pct(r.median_old, r.median_new),
                num(r.p99_old),
                num(r.p99_new),
                pct(r.p99_old, r.p99_new),
                ratio,
                if r.flags.is_empty() {
                    String::new()
                } else {
                    format!("**DROP** {}", r.flags.join("; "))
                }
            ));
        }
        if !s.only_old.is_empty() {
            out.push_str(&format!(
                "\nonly in the old run: {}\n",
                s.only_old.join(", ")
            ));
        }
        if !s.only_new.is_empty() {
            out.push_str(&format!(
                "\nonly in the new run: {}\n",
                s.only_new.join(", ")
            ));
        }
        out.push('\n');
    }
    if c.flagged.is_empty() {
        out.push_str("No drop beyond the measured noise.\n");
    } else {
        out.push_str(&format!(
            "{} drop(s) beyond the measured noise:\n\n",
            c.flagged.len()
        ));
        for f in &c.flagged {
            out.push_str(&format!("- {f}\n"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Machine;
    use crate::stats::Latency;
    use apijet_testkit::engine::Engine;

    fn row(label: &str, side: Side, req_s: f64, median: f64, ratio: Option<f64>) -> Row {
        Row {
            label: label.into(),
            series: String::new(),
            group: String::new(),
            side,
            mode: "closed".into(),
            tool: String::new(),
            connections: Some(4),
            rate: None,
            samples: 100,
            latency: Latency {
                median,
                p99: median * 2.0,
                ..Latency::default()
            },
            error_pct: 0.0,
            req_s,
            kb_s: 0.0,
            rows_s: None,
            ratio,
            rss_mib: None,
            statements: None,
        }
    }

    fn report(rows: Vec<Row>) -> Report {
        report_of("point", rows)
    }

    fn report_of(id: &str, rows: Vec<Row>) -> Report {
        Report {
            date: "d".into(),
            command: String::new(),
            machine: Machine {
                cpus: 2,
                cpu_model: String::new(),
                memory_gib: 1.0,
                os: String::new(),
                apijet_commit: "c".into(),
            },
            loader: String::new(),
            quick: true,
            loadavg_start: String::new(),
            loadavg_end: String::new(),
            engines: vec![],
            scenarios: vec![ScenarioReport {
                id: id.into(),
                engine: Engine::Sqlite,
                title: String::new(),
                request: String::new(),
                goal: String::new(),
                rows,
                notes: vec![],
                verdicts: vec![],
                error: None,
            }],
        }
    }

    #[test]
    fn a_drop_beyond_the_baselines_movement_is_flagged() {
        let old = report(vec![
            row("apijet c=4 peak", Side::Apijet, 10_000.0, 1.0, Some(0.9)),
            row("hand-written c=4 peak", Side::Baseline, 11_000.0, 1.0, None),
        ]);
        // The baseline moved 10 %: the machine's noise. apijet lost 40 %.
        let new = report(vec![
            row("apijet c=4 peak", Side::Apijet, 6_000.0, 1.0, Some(0.6)),
            row("hand-written c=4 peak", Side::Baseline, 9_900.0, 1.0, None),
            row("apijet c=8 peak", Side::Apijet, 6_000.0, 1.0, None),
        ]);
        let c = compare(&old, &new);
        let s = &c.scenarios[0];
        assert!((s.rate_noise - 0.10).abs() < 1e-9);
        assert_eq!(s.only_new, vec!["apijet c=8 peak".to_string()]);
        assert_eq!(c.flagged.len(), 1, "{:?}", c.flagged);
        assert!(c.flagged[0].contains("req/s -40%"));
        assert!(markdown(&c).contains("**DROP**"));
    }

    #[test]
    fn a_drop_within_the_noise_is_not_flagged() {
        let old = report(vec![
            row("apijet c=4 peak", Side::Apijet, 10_000.0, 1.0, Some(0.9)),
            row("hand-written c=4 peak", Side::Baseline, 11_000.0, 1.0, None),
        ]);
        let new = report(vec![
            row("apijet c=4 peak", Side::Apijet, 8_000.0, 1.0, Some(0.9)),
            row("hand-written c=4 peak", Side::Baseline, 8_800.0, 1.0, None),
        ]);
        let c = compare(&old, &new);
        assert!(c.flagged.is_empty(), "{:?}", c.flagged);
        assert!(markdown(&c).contains("No drop beyond the measured noise."));
    }

    #[test]
    fn a_list_whose_time_ratio_falls_is_not_a_drop_and_one_that_grows_is() {
        let rows = |ratio: f64| {
            vec![
                row("apijet N=1M", Side::Apijet, 1_000_000.0, 1.0, Some(ratio)),
                row("baseline N=1M", Side::Baseline, 1_000_000.0, 1.0, None),
            ]
        };
        let faster = compare(&report_of("list", rows(1.8)), &report_of("list", rows(0.9)));
        assert!(faster.flagged.is_empty(), "{:?}", faster.flagged);
        let slower = compare(&report_of("list", rows(0.9)), &report_of("list", rows(1.8)));
        assert_eq!(slower.flagged.len(), 1, "{:?}", slower.flagged);
        assert!(slower.flagged[0].contains("ratio 0.90 → 1.80"));
    }
}
