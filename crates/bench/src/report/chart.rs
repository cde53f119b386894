//! The chart: hand-written SVG, one panel per scenario and engine (engines side by side), each
//! with throughput bars per level (connections, rows, page size) and, below, latency lines
//! (median solid, p99 dashed) on a log scale. `chart.svg` stands alone (the README embeds it);
//! `results.html` wraps it with the tables. No script, no framework.

use super::{table, Report, Row, ScenarioReport};
use std::fmt::Write as _;
use std::path::Path;

const PANEL_W: f64 = 470.0;
const PANEL_H: f64 = 400.0;
const COLORS: [&str; 8] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
];

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Distinct values in order of first appearance.
fn distinct<'a>(items: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let mut out: Vec<&str> = Vec::new();
    for i in items {
        if !out.contains(&i) {
            out.push(i);
        }
    }
    out
}

/// A short number for an axis: 1.2k, 35k, 1.1M.
fn short(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if v >= 1e4 {
        format!("{:.0}k", v / 1e3)
    } else if v >= 1e3 {
        format!("{:.1}k", v / 1e3)
    } else if v >= 10.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

/// The throughput a row is charted by: rows/s where the panel has them, else req/s.
fn throughput(r: &Row, use_rows: bool) -> f64 {
    if use_rows {
        r.rows_s.unwrap_or(0.0)
    } else {
        r.req_s
    }
}

/// One panel at (x0, y0).
fn panel(svg: &mut String, s: &ScenarioReport, x0: f64, y0: f64) {
    let _ = writeln!(
        svg,
        r##"<g transform="translate({x0},{y0})"><rect width="{w}" height="{h}" fill="#fff" stroke="#ccc"/>
<text x="10" y="18" font-size="13" font-weight="bold">{id} · {engine}</text><text x="10" y="33" font-size="10" fill="#555">{title}</text>"##,
        w = PANEL_W - 10.0,
        h = PANEL_H - 10.0,
        id = esc(&s.id),
        engine = s.engine.name(),
        title = esc(&s.title),
    );
    let rows: Vec<&Row> = s.rows.iter().collect();
    if rows.is_empty() {
        let msg = s.error.as_deref().unwrap_or("no rows");
        let _ = write!(
            svg,
            r##"<text x="10" y="60" font-size="11" fill="#a00">{}</text></g>"##,
            esc(msg)
        );
        return;
    }
    let use_rows = rows.iter().any(|r| r.rows_s.is_some());
    let groups = distinct(rows.iter().map(|r| r.group.as_str()));
    let series = distinct(rows.iter().map(|r| r.series.as_str()));
    let color = |se: &str| COLORS[series.iter().position(|x| *x == se).unwrap_or(0) % COLORS.len()];
    // Bars: throughput per group and series, from peak (closed-loop) and single-request rows;
    // an open-loop row's throughput is just the rate it was asked for.
    let bar_rows: Vec<&Row> = rows.iter().copied().filter(|r| r.mode != "open").collect();
    let bar_series = distinct(bar_rows.iter().map(|r| r.series.as_str()));
    let (bx, by, bw, bh) = (50.0, 64.0, PANEL_W - 70.0, 110.0);
    let values: Vec<f64> = bar_rows
        .iter()
        .map(|r| throughput(r, use_rows))
        .filter(|v| *v > 0.0)
        .collect();
    let max = values.iter().copied().fold(0.0f64, f64::max).max(1e-9);
    let min = values.iter().copied().fold(f64::MAX, f64::min).min(max);
    // Bars spanning more than 20× go on a log scale (a 1,000-row batch next to single rows).
    let log = max / min > 20.0;
    let floor = (min.log10().floor() - 0.3).min(max.log10() - 1.0);
    let height = |v: f64| {
        if v <= 0.0 {
            0.0
        } else if log {
            bh * (v.log10() - floor) / (max.log10() - floor)
        } else {
            bh * v / max
        }
    };
    let _ = writeln!(
        svg,
        r##"<text x="{bx}" y="{y}" font-size="10" fill="#333">{what}{scale}</text><line x1="{bx}" y1="{b}" x2="{r}" y2="{b}" stroke="#999"/>"##,
        y = by - 14.0,
        what = if use_rows { "rows/s" } else { "req/s" },
        scale = if log { ", log scale" } else { "" },
        b = by + bh,
        r = bx + bw,
    );
    let gw = bw / groups.len() as f64;
    let barw = (gw * 0.8 / bar_series.len().max(1) as f64).max(1.0);
    for (gi, g) in groups.iter().enumerate() {
        let gx = bx + gi as f64 * gw + gw * 0.1;
        for (si, se) in bar_series.iter().enumerate() {
            let Some(r) = bar_rows.iter().find(|r| r.group == *g && r.series == *se) else {
                continue;
            };
            let v = throughput(r, use_rows);
            let h = height(v);
            let _ = writeln!(
                svg,
                r##"<rect x="{x:.1}" y="{y:.1}" width="{barw:.1}" height="{h:.1}" fill="{c}"><title>{t}: {v}</title></rect><text x="{tx:.1}" y="{ty:.1}" font-size="8" text-anchor="middle">{v}</text>"##,
                x = gx + si as f64 * barw,
                y = by + bh - h,
                c = color(se),
                t = esc(&r.label),
                v = short(v),
                tx = gx + si as f64 * barw + barw / 2.0,
                ty = by + bh - h - 2.0,
            );
        }
        let _ = writeln!(
            svg,
            r##"<text x="{x:.1}" y="{y}" font-size="9" text-anchor="middle">{g}</text>"##,
            x = bx + gi as f64 * gw + gw / 2.0,
            y = by + bh + 11.0,
            g = esc(g)
        );
    }
    // Latency: median (solid) and p99 (dashed) per series, log scale. Where open-loop steps
    // cover the levels, only they (and single requests) are drawn: closed-loop latency at
    // saturation is queueing in the client, not the server's latency.
    let (lx, ly, lw, lh) = (50.0, 210.0, PANEL_W - 70.0, 100.0);
    let open_groups = distinct(
        rows.iter()
            .filter(|r| r.mode == "open")
            .map(|r| r.group.as_str()),
    );
    let open_only =
        open_groups.len() >= 2 || (open_groups.len() == groups.len() && !open_groups.is_empty());
    let lat: Vec<&Row> = rows
        .iter()
        .copied()
        .filter(|r| r.latency.p99 > 0.0 && (!open_only || r.mode != "closed"))
        .collect();
    let lat_series = distinct(lat.iter().map(|r| r.series.as_str()));
    let (lo, hi) = lat.iter().fold((f64::MAX, 0.0f64), |(lo, hi), r| {
        (lo.min(r.latency.median.max(0.01)), hi.max(r.latency.p99))
    });
    if !lat.is_empty() {
        let (lo, hi) = (
            lo.log10().floor(),
            hi.log10().ceil().max(lo.log10().floor() + 1.0),
        );
        let yof = |v: f64| ly + lh - lh * (v.max(0.01).log10() - lo) / (hi - lo);
        let _ = writeln!(
            svg,
            r##"<text x="{lx}" y="{t}" font-size="10" fill="#333">{what} latency ms, log scale: median solid, p99 dashed</text><line x1="{lx}" y1="{b}" x2="{r}" y2="{b}" stroke="#999"/>"##,
            what = if open_only {
                "open-loop"
            } else if lat.iter().all(|r| r.mode == "single") {
                "per-request"
            } else {
                "closed-loop"
            },
            t = ly - 6.0,
            b = ly + lh,
            r = lx + lw,
        );
        let mut d = lo;
        while d <= hi + 1e-9 {
            let v = 10f64.powf(d);
            let _ = writeln!(
                svg,
                r##"<line x1="{lx}" y1="{y:.1}" x2="{r}" y2="{y:.1}" stroke="#eee"/><text x="{tx}" y="{ty:.1}" font-size="9" text-anchor="end">{v}</text>"##,
                y = yof(v),
                r = lx + lw,
                tx = lx - 3.0,
                ty = yof(v) + 3.0,
                v = short(v)
            );
            d += 1.0;
        }
        for se in &lat_series {
            for (dash, pick) in [("", 0usize), ("4,3", 1usize)] {
                let pts: Vec<String> = groups
                    .iter()
                    .enumerate()
                    .filter_map(|(gi, g)| {
                        let r = lat.iter().find(|r| r.group == *g && r.series == *se)?;
                        let v = if pick == 0 {
                            r.latency.median
                        } else {
                            r.latency.p99
                        };
                        (v > 0.0)
                            .then(|| format!("{:.1},{:.1}", lx + gi as f64 * gw + gw / 2.0, yof(v)))
                    })
                    .collect();
                if pts.is_empty() {
                    continue;
                }
                let _ = writeln!(
                    svg,
                    r##"<polyline points="{p}" fill="none" stroke="{c}" stroke-width="1.5" stroke-dasharray="{dash}"/>"##,
                    p = pts.join(" "),
                    c = color(se),
                );
                for p in &pts {
                    let (x, y) = p.split_once(',').unwrap_or(("0", "0"));
                    let _ = write!(
                        svg,
                        r##"<circle cx="{x}" cy="{y}" r="2" fill="{}"/>"##,
                        color(se)
                    );
                }
            }
        }
        for (gi, g) in groups.iter().enumerate() {
            let _ = writeln!(
                svg,
                r##"<text x="{x:.1}" y="{y}" font-size="9" text-anchor="middle">{g}</text>"##,
                x = lx + gi as f64 * gw + gw / 2.0,
                y = ly + lh + 11.0,
                g = esc(g)
            );
        }
    }
    // Legend.
    for (si, se) in series.iter().enumerate() {
        let (col, row) = (si % 2, si / 2);
        let _ = writeln!(
            svg,
            r##"<rect x="{x}" y="{y}" width="9" height="9" fill="{c}"/><text x="{tx}" y="{ty}" font-size="9">{s}</text>"##,
            x = 12.0 + col as f64 * 225.0,
            y = 338.0 + row as f64 * 12.0,
            c = COLORS[si % COLORS.len()],
            tx = 24.0 + col as f64 * 225.0,
            ty = 346.0 + row as f64 * 12.0,
            s = esc(&se.chars().take(40).collect::<String>()),
        );
    }
    svg.push_str("</g>\n");
}

/// The whole chart: scenarios down, engines across.
pub fn svg(report: &Report) -> String {
    let ids = distinct(report.scenarios.iter().map(|s| s.id.as_str()));
    let engines: Vec<_> = report.engines.iter().map(|(e, _)| *e).collect();
    let w = PANEL_W * engines.len().max(1) as f64 + 10.0;
    let h = PANEL_H * ids.len().max(1) as f64 + 60.0;
    let mut out = format!(
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif">
<rect width="100%" height="100%" fill="#fafafa"/>
<text x="10" y="20" font-size="15" font-weight="bold">apijet bench — {date}, {cpus} CPUs</text>
<text x="10" y="34" font-size="10" fill="#555">load: {loader}</text>
<text x="10" y="47" font-size="10" fill="#555">{engines}</text>
"##,
        date = esc(&report.date),
        cpus = report.machine.cpus,
        loader = esc(&report.loader),
        engines = esc(&report
            .engines
            .iter()
            .map(|(_, v)| v.split(';').next().unwrap_or(v))
            .collect::<Vec<_>>()
            .join(" · ")),
    );
    for (row, id) in ids.iter().enumerate() {
        for (col, e) in engines.iter().enumerate() {
            if let Some(s) = report
                .scenarios
                .iter()
                .find(|s| s.id == *id && s.engine == *e)
            {
                panel(
                    &mut out,
                    s,
                    5.0 + col as f64 * PANEL_W,
                    56.0 + row as f64 * PANEL_H,
                );
            }
        }
    }
    out.push_str("</svg>\n");
    out
}

/// Writes `chart.svg` and `results.html` (the chart and the tables) into `dir`.
pub fn write(report: &Report, dir: &Path) -> Result<(), String> {
    let chart = svg(report);
    let svg_path = dir.join("chart.svg");
    std::fs::write(&svg_path, &chart)
        .map_err(|e| format!("cannot write {}: {e}", svg_path.display()))?;
    let html = format!(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>apijet bench {date}</title>\
         <style>body{{font-family:sans-serif;margin:1em}}pre{{font-size:12px}}</style></head><body>\n\
         <h1>apijet bench</h1>\n{chart}\n<pre>{tables}</pre>\n</body></html>\n",
        date = esc(&report.date),
        tables = esc(&table::report_markdown(report)),
    );
    let html_path = dir.join("results.html");
    std::fs::write(&html_path, html)
        .map_err(|e| format!("cannot write {}: {e}", html_path.display()))
}
