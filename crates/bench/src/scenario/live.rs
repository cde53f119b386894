//! Scenario 6, live answers: N subscribers (1,000 / 10,000 / 20,000), each following the
//! nested Moment/User/Comment request of a different moment over `/subscribe`, and a writer
//! that changes every subscribed moment once a second (one UPDATE, outside apijet: PostgreSQL
//! hears of it through the `apijet live-triggers`, MariaDB and SQLite look again every
//! `live_interval_ms`). Per level: apijet's CPU, the database's CPU (SQLite: inside apijet),
//! the subscribers' CPU, and the delay from the writer's commit to each answer's arrival
//! (median, p99), beside Hasura's published figures.
//!
//! One process holds at most [`FDS_PER_PROCESS`] connections here (the container's hard limit
//! on open files is 20,000; on SQLite an apijet connection takes two), so a level beyond it
//! runs on several apijet instances and several subscriber processes; the report says how
//! many.

use super::{empty_report, Ctx};
use crate::live_client::{request, TICK_PREFIX};
use crate::report::{Row, ScenarioReport, Side};
use crate::server::{start_toml, Server, ServerConfig};
use crate::stats::summarize_us;
use apijet_testkit::data::demo::MOMENT_BASE;
use apijet_testkit::engine::DbConn;
use apijet_testkit::Engine;
use std::collections::HashMap;
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::io::AsyncBufReadExt;

pub const GOAL: &str =
    "10,000 live subscriptions, every answer changing each second, p99 from commit to event < 1 s \
     on 2 cores, database included (Hasura: 10,000 at 73 % of 2 CPUs, refetch ≤ 1/s)";

/// Hasura's published figures (hasura/graphql-engine, architecture/live-queries.md): live
/// queries, CPUs, CPU use.
const HASURA: [(u64, u32, f64); 3] = [(5_000, 1, 60.0), (10_000, 2, 73.0), (20_000, 4, 90.0)];

/// Connections one process holds at most (apijet or subscribers), below the 20,000 open files
/// a process may have here.
const FDS_PER_PROCESS: usize = 15_000;

/// Connections one apijet instance holds at most: on SQLite each client connection takes two
/// descriptors (the socket and the probe that notices a client that left, see
/// `server::client_probe`).
fn per_instance(engine: Engine) -> usize {
    match engine {
        Engine::Sqlite => FDS_PER_PROCESS / 2,
        Engine::Postgres | Engine::Mariadb => FDS_PER_PROCESS,
    }
}

/// The token of the servers' `/metrics`, read at the end of a level.
const METRICS_TOKEN: &str = "apijet-bench-live";

/// What the servers' `/metrics` say about their refetches.
#[derive(Default)]
struct Refetches {
    rounds: f64,
    reads: f64,
    seconds: f64,
}

async fn refetches(servers: &[Server]) -> Refetches {
    let mut total = Refetches::default();
    for s in servers {
        let Ok(text) = super::metrics_text(s.addr, METRICS_TOKEN).await else {
            continue;
        };
        let value = |name: &str| -> f64 {
            text.lines()
                .find_map(|l| l.strip_prefix(&format!("{name} ")))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0.0)
        };
        total.rounds += value("apijet_live_refetches_total");
        total.reads += value("apijet_live_reads_total");
        total.seconds += value("apijet_live_refetch_seconds_sum");
    }
    total
}

pub async fn run(ctx: &Ctx<'_>) -> ScenarioReport {
    let mut r = empty_report(
        "live",
        ctx,
        "Live answers: subscribers of the nested Moment/User/Comment request, every moment \
         changing each second",
        request(MOMENT_BASE),
        GOAL,
    );
    if let Err(e) = body(ctx, &mut r).await {
        r.error = Some(e);
    }
    r
}

/// CPU seconds (user + system, children included) of a process.
fn cpu_seconds(pid: u32, ticks_per_s: f64) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    // The fields after the command, which may hold spaces, in parentheses.
    let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
        return 0.0;
    };
    let f: Vec<f64> = rest
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0.0))
        .collect();
    // utime, stime, cutime, cstime are fields 14–17 of the line: 12–15 after the command.
    f.get(11..15).map_or(0.0, |v| v.iter().sum::<f64>()) / ticks_per_s
}

fn ticks_per_second() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(100.0)
}

/// The database server's processes: the one listening on `port` and its children.
fn database_pids(port: u16) -> Vec<u32> {
    let mut inodes = Vec::new();
    for file in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(file) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            let (Some(local), Some(state), Some(inode)) = (f.get(1), f.get(3), f.get(9)) else {
                continue;
            };
            let listening = *state == "0A";
            let on_port = local
                .rsplit_once(':')
                .and_then(|(_, p)| u16::from_str_radix(p, 16).ok())
                == Some(port);
            if listening && on_port {
                inodes.push(format!("socket:[{inode}]"));
            }
        }
    }
    let mut parents: HashMap<u32, u32> = HashMap::new();
    let mut server = None;
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    for p in procs.flatten() {
        let Some(pid) = p.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if let Ok(stat) = std::fs::read_to_string(p.path().join("stat")) {
            if let Some(ppid) = stat
                .rsplit_once(')')
                .and_then(|(_, r)| r.split_whitespace().nth(1))
                .and_then(|x| x.parse().ok())
            {
                parents.insert(pid, ppid);
            }
        }
        if server.is_none() {
            if let Ok(fds) = std::fs::read_dir(p.path().join("fd")) {
                let owns = fds.flatten().any(|fd| {
                    std::fs::read_link(fd.path())
                        .map(|l| inodes.iter().any(|i| l.to_string_lossy() == *i))
                        .unwrap_or(false)
                });
                if owns {
                    server = Some(pid);
                }
            }
        }
    }
    let Some(root) = server else {
        return Vec::new();
    };
    let mut out = vec![root];
    let mut i = 0;
    while i < out.len() {
        let parent = out[i];
        out.extend(
            parents
                .iter()
                .filter(|(_, pp)| **pp == parent)
                .map(|(p, _)| *p),
        );
        i += 1;
    }
    out
}

/// A subscriber process and its output file.
struct Subscribers {
    child: tokio::process::Child,
    out: std::path::PathBuf,
}

fn server_toml(n: usize, engine: Engine) -> String {
    let base = ServerConfig {
        max_count: 100,
        write_queue: true,
        answer_cap: None,
    }
    .toml();
    // Every subscriber comes from 127.0.0.1: the per-visitor limit is the level's size.
    let poll = match engine {
        // The writer is another program: PostgreSQL hears of it through the triggers.
        Engine::Postgres => "",
        Engine::Mariadb | Engine::Sqlite => "live_poll_ms = 1000\n",
    };
    format!(
        "{base}max_connections = {}\nlive_interval_ms = 1000\n{poll}live_max_subscriptions = {n}\n\
         live_max_per_visitor = {n}\nidle_timeout_ms = 600000\nmetrics_token = \"{METRICS_TOKEN}\"\n",
        n + 64
    )
}

async fn body(ctx: &Ctx<'_>, r: &mut ScenarioReport) -> Result<(), String> {
    let engine = ctx.db.engine;
    let settings = ctx.settings;
    let ticks_s = ticks_per_second();
    match engine {
        // Writes by other programs reach PostgreSQL's subscriptions through triggers.
        Engine::Postgres => {
            let status = tokio::process::Command::new(ctx.apijet)
                .args(["live-triggers", "--install", "--db", &ctx.db.url])
                .stdout(Stdio::null())
                .status()
                .await
                .map_err(|e| format!("cannot run apijet live-triggers: {e}"))?;
            if !status.success() {
                return Err("apijet live-triggers --install failed".into());
            }
        }
        Engine::Mariadb | Engine::Sqlite => {}
    }
    r.notes.push(format!(
        "each subscriber holds one HTTP/1.1 connection and follows its own moment; the writer \
         runs `UPDATE Moment SET content = 'live T' WHERE id` in the subscribed range once a \
         second for {} s ({}); delays are from the writer's COMMIT to each answer's arrival; CPU \
         is % of one core over the writing window",
        settings.live_seconds,
        match engine {
            Engine::Postgres => "apijet hears of it through the live triggers' NOTIFY",
            Engine::Mariadb | Engine::Sqlite =>
                "apijet looks again every live_interval_ms = 1000 (live_poll_ms)",
        }
    ));
    let mut conn = DbConn::connect(engine, &ctx.db.url).await?;
    for &n in &settings.live_levels {
        let n = n as usize;
        if n as u64 > settings.demo.moments {
            r.notes.push(format!(
                "level {n} skipped: only {} moments",
                settings.demo.moments
            ));
            continue;
        }
        let level = level(ctx, &mut conn, n, ticks_s).await?;
        r.rows.push(level.row);
        r.notes.push(level.note);
        r.verdicts.push(level.verdict);
    }
    Ok(())
}

struct Level {
    row: Row,
    note: String,
    verdict: String,
}

async fn level(ctx: &Ctx<'_>, conn: &mut DbConn, n: usize, ticks_s: f64) -> Result<Level, String> {
    let engine = ctx.db.engine;
    let instances = n.div_ceil(per_instance(engine)).max(1);
    eprintln!(
        "[bench] {}: live, {n} subscribers on {instances} apijet instance(s)",
        engine.name()
    );
    let mut servers = Vec::new();
    for i in 0..instances {
        let work = ctx.work.join(format!("live-{n}-{i}"));
        servers.push(start_toml(
            ctx.apijet,
            &ctx.db.url,
            &server_toml(n.div_ceil(instances), engine),
            &work,
        )?);
    }
    let moment = |i: usize| MOMENT_BASE + i as i64;
    let kit = crate::server::this_binary()?;
    // Each instance's subscribers, in processes of at most FDS_PER_PROCESS.
    let mut subs: Vec<Subscribers> = Vec::new();
    let per_instance = n.div_ceil(instances);
    for (i, server) in servers.iter().enumerate() {
        let start = i * per_instance;
        let end = ((i + 1) * per_instance).min(n);
        let mut at = start;
        while at < end {
            let count = (end - at).min(FDS_PER_PROCESS);
            let out = ctx.work.join(format!("live-{n}-subs-{at}.txt"));
            let child = tokio::process::Command::new(&kit)
                .arg("--live-client")
                .arg(server.addr.to_string())
                .arg("--live-first")
                .arg(moment(at).to_string())
                .arg("--live-count")
                .arg(count.to_string())
                .arg("--live-out")
                .arg(&out)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .kill_on_drop(true)
                .spawn()
                .map_err(|e| format!("cannot start the subscribers: {e}"))?;
            subs.push(Subscribers { child, out });
            at += count;
        }
    }
    // Every subscriber has its first answer.
    let started = Instant::now();
    for s in &mut subs {
        let stdout = s.child.stdout.take().ok_or("no stdout")?;
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        let line = tokio::time::timeout(Duration::from_secs(600), lines.next_line())
            .await
            .map_err(|_| format!("{n} subscribers were not all answered within 600 s"))?
            .map_err(|e| e.to_string())?
            .unwrap_or_default();
        if !line.starts_with("ready") {
            return Err(format!("the subscribers failed: {line}"));
        }
    }
    let subscribed = started.elapsed();
    eprintln!(
        "[bench] {}: {n} subscribed in {:.1} s",
        engine.name(),
        subscribed.as_secs_f64()
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let apijet_pids: Vec<u32> = servers.iter().map(|s| s.pid).collect();
    // Now that apijet's connections have their server processes.
    let db_pids = match engine {
        Engine::Sqlite => Vec::new(),
        _ => database_pids(ctx.db.port),
    };
    let sub_pids: Vec<u32> = subs.iter().filter_map(|s| s.child.id()).collect();
    let cpu = |pids: &[u32]| pids.iter().map(|&p| cpu_seconds(p, ticks_s)).sum::<f64>();
    let (a0, d0, s0) = (cpu(&apijet_pids), cpu(&db_pids), cpu(&sub_pids));
    let before = refetches(&servers).await;
    let window = Instant::now();
    let lo = moment(0);
    let hi = moment(n - 1);
    let table = engine.ident("Moment");
    let mut commits: HashMap<u32, u64> = HashMap::new();
    let seconds = ctx.settings.live_seconds;
    let mut next = tokio::time::Instant::now();
    for tick in 1..=seconds as u32 {
        tokio::time::sleep_until(next).await;
        next += Duration::from_secs(1);
        conn.batch(&format!(
            "UPDATE {table} SET content = '{TICK_PREFIX}{tick}' WHERE id >= {lo} AND id <= {hi}"
        ))
        .await?;
        commits.insert(tick, now_ms());
    }
    tokio::time::sleep_until(next).await;
    let elapsed = window.elapsed().as_secs_f64();
    let (a1, d1, s1) = (cpu(&apijet_pids), cpu(&db_pids), cpu(&sub_pids));
    // The last answers' way out.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = refetches(&servers).await;
    let rounds = after.rounds - before.rounds;
    let refetched = format!(
        "{rounds:.0} refetches of the shape ran {:.0} reads, {:.0} ms each on average",
        after.reads - before.reads,
        if rounds > 0.0 {
            1000.0 * (after.seconds - before.seconds) / rounds
        } else {
            0.0
        }
    );
    let mut delays_us: Vec<u64> = Vec::new();
    let mut events = 0u64;
    for mut s in subs {
        drop(s.child.stdin.take());
        let _ = tokio::time::timeout(Duration::from_secs(60), s.child.wait()).await;
        let text = std::fs::read_to_string(&s.out).unwrap_or_default();
        for line in text.lines() {
            let mut f = line.split_whitespace();
            let (Some(tick), Some(ms)) = (
                f.next().and_then(|x| x.parse::<u32>().ok()),
                f.next().and_then(|x| x.parse::<u64>().ok()),
            ) else {
                continue;
            };
            if let Some(c) = commits.get(&tick) {
                delays_us.push(ms.saturating_sub(*c) * 1000);
                events += 1;
            }
        }
    }
    drop(servers);
    let expected = (n as u64) * seconds;
    let latency = summarize_us(&mut delays_us);
    let pct = |d: f64| 100.0 * d / elapsed;
    let (apijet_cpu, db_cpu, sub_cpu) = (pct(a1 - a0), pct(d1 - d0), pct(s1 - s0));
    let db_text = if engine.embedded() {
        "in apijet (embedded)".to_string()
    } else if db_pids.is_empty() {
        format!("unknown (no process listens on port {})", ctx.db.port)
    } else {
        format!("{db_cpu:.0} %")
    };
    let row = Row {
        label: format!("live {n}"),
        series: "apijet, commit → event".into(),
        group: format!("N={}", super::short_n(n as u64)),
        side: Side::Apijet,
        mode: "live".into(),
        tool: format!(
            "{} subscriber process(es), one HTTP/1.1 connection per subscription",
            n.div_ceil(FDS_PER_PROCESS).max(instances)
        ),
        connections: Some(n),
        rate: Some(n as f64),
        samples: events,
        latency,
        // An answer a subscriber did not get because a newer one replaced it first is no
        // error (a slow consumer gets the newest only); the note counts them.
        error_pct: 0.0,
        req_s: events as f64 / elapsed,
        kb_s: 0.0,
        rows_s: None,
        ratio: None,
        rss_mib: None,
        statements: None,
    };
    let hasura = HASURA
        .iter()
        .map(|(q, c, p)| format!("{q} at {p:.0} % of {c} CPU(s)"))
        .collect::<Vec<_>>()
        .join(", ");
    let note = format!(
        "{n} subscribers ({instances} apijet instance(s)): subscribed in {:.1} s; over {elapsed:.1} \
         s of writes apijet used {apijet_cpu:.0} % of a core, the database {db_text}, the \
         subscribers {sub_cpu:.0} %; {events} of {expected} answers arrived; {refetched}; \
         commit → event median {:.0} ms, p99 {:.0} ms, max {:.0} ms (Hasura, published: \
         {hasura})",
        subscribed.as_secs_f64(),
        latency.median,
        latency.p99,
        latency.max
    );
    let met = latency.p99 < 1000.0 && events * 100 >= expected * 99;
    let verdict = format!(
        "{}: {n} live subscriptions, p99 commit → event {:.0} ms (goal < 1000 ms), {:.1} % of \
         answers delivered, apijet {apijet_cpu:.0} % + database {db_text} of 2 cores",
        if met { "met" } else { "missed" },
        latency.p99,
        100.0 * events as f64 / expected.max(1) as f64
    );
    Ok(Level { row, note, verdict })
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
