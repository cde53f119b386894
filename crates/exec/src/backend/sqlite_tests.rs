//! The SQLite backend's statements off the async workers: rows, deadlines, dropped waits,
//! transactions and bounded functions.

use super::SqliteBackend;
use crate::cancel::{watched, Watch};
use crate::sink::CollectSink;
use crate::ExecError;
use apijet_core::Value;
use apijet_sql::Statement;
use std::time::{Duration, Instant};

/// A fresh database file with table `t` of `rows` rows (`id`, `v` = "row <id>").
async fn backend(name: &str, rows: usize, threads: usize) -> (SqliteBackend, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("apijet-sqlite-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("t.db");
    let mut backend = SqliteBackend::open(path.to_str().expect("utf-8 path"), true)
        .expect("open")
        .with_threads(threads);
    backend.set_max_value_bytes(16 << 20);
    backend
        .execute_script(&[
            "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)".into(),
            format!(
                "WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < {rows}) \
                 INSERT INTO t SELECT i, 'row ' || i FROM s"
            ),
        ])
        .await
        .expect("fill");
    (backend, dir)
}

fn statement(sql: &str, binds: Vec<Value>) -> Statement {
    Statement {
        sql: sql.into(),
        binds,
        bounded: false,
    }
}

/// Four of the issue's `H` per row: few VM steps, each building megabytes.
const EXPENSIVE: &str = "SELECT id FROM t WHERE length(lpad(v, 4000000, v)) + \
    length(lpad(v, 4000000, v)) + length(lpad(v, 4000000, v)) + length(lpad(v, 4000000, v)) < 0";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_read_hands_every_row_over_once_and_a_point_read_its_row() {
    let rows = 20_000;
    let (backend, dir) = backend("rows", rows, 2).await;
    let all = statement("SELECT id, v FROM t ORDER BY v DESC", vec![]);
    let mut sink = CollectSink::new(&[]);
    let n = backend.fetch(&all, &mut sink).await.expect("fetch");
    assert_eq!(n, rows as u64);
    let mut ids: Vec<i64> = sink.rows.iter().filter_map(|r| r["id"].as_i64()).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), rows, "every row exactly once");
    let one = statement("SELECT v FROM t WHERE id = ?1", vec![Value::Int(7)]);
    let mut sink = CollectSink::new(&[]);
    backend.fetch(&one, &mut sink).await.expect("fetch one");
    assert_eq!(sink.rows.len(), 1);
    assert_eq!(sink.rows[0]["v"], "row 7");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The CPU time the calling thread has run so far, in nanoseconds (Linux
/// `/proc/thread-self/schedstat`).
fn thread_cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .expect("/proc/thread-self/schedstat")
}

/// The CPU time the whole process has run so far (Linux `/proc/self/stat`, 100 ticks a second).
fn process_cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .expect("a stat line")
        .1
        .split_whitespace()
        .collect();
    let ticks: u64 =
        fields[11].parse::<u64>().expect("utime") + fields[12].parse::<u64>().expect("stime");
    Duration::from_millis(ticks * 10)
}

/// `fut`, adding to `spent` the CPU time the threads that poll it spend inside its polls: what
/// it costs the async side, however loaded the machine is.
async fn metered<F: std::future::Future>(
    fut: F,
    spent: &std::sync::atomic::AtomicU64,
) -> F::Output {
    let mut fut = std::pin::pin!(fut);
    std::future::poll_fn(|cx| {
        let before = thread_cpu_ns();
        let polled = fut.as_mut().poll(cx);
        spent.fetch_add(
            thread_cpu_ns().saturating_sub(before),
            std::sync::atomic::Ordering::Relaxed,
        );
        polled
    })
    .await
}

/// The expensive read, under a timeout of 300 ms.
async fn expensive_within(backend: &SqliteBackend) -> Result<u64, ExecError> {
    let watch = Watch::default().with_timeout(Duration::from_millis(300), "a_timeout_ms");
    let mut sink = CollectSink::new(&[]);
    watched(
        watch,
        backend.fetch(&statement(EXPENSIVE, vec![]), &mut sink),
    )
    .await
}

/// Rows in `t`.
async fn count(backend: &SqliteBackend) -> i64 {
    let mut sink = CollectSink::new(&[]);
    backend
        .fetch(&statement("SELECT count(*) AS n FROM t", vec![]), &mut sink)
        .await
        .expect("count");
    sink.rows[0]["n"].as_i64().expect("n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statements_of_few_expensive_steps_stop_at_their_deadline_and_leave_the_workers_free() {
    let (backend, dir) = backend("deadline", 300, 4).await;
    // Measured in CPU time, which other work on the machine does not stretch: the polls of the
    // statements' futures (the async side) against the whole process (their threads).
    let polled = std::sync::atomic::AtomicU64::new(0);
    let (started, cpu_before) = (Instant::now(), process_cpu());
    let (a, b) = tokio::join!(
        metered(expensive_within(&backend), &polled),
        metered(expensive_within(&backend), &polled)
    );
    let (took, cpu) = (started.elapsed(), process_cpu().saturating_sub(cpu_before));
    let polled = Duration::from_nanos(polled.into_inner());
    for r in [a, b] {
        assert!(
            matches!(
                r,
                Err(ExecError::Timeout {
                    setting: "a_timeout_ms",
                    ms: 300
                })
            ),
            "{r:?}"
        );
    }
    // Generous: the point is that both answered near their deadline, not after the scan.
    assert!(took < Duration::from_secs(10), "answered after {took:?}");
    eprintln!(
        "two expensive statements: {took:?}, {cpu:?} of CPU, {polled:?} of it in their polls"
    );
    // A statement run where its future is polled would spend its whole CPU time there.
    assert!(
        polled < Duration::from_millis(20) + cpu / 10,
        "the async side spent {polled:?} of CPU in the statements' polls, of {cpu:?} in all: \
         the statements ran on it"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_wait_stops_its_statement_and_frees_its_thread() {
    // One thread: the point read below runs only once the dropped statement has stopped.
    let (backend, dir) = backend("dropped", 300, 1).await;
    let expensive = statement(EXPENSIVE, vec![]);
    let mut sink = CollectSink::new(&[]);
    let left = tokio::time::timeout(
        Duration::from_millis(100),
        backend.fetch(&expensive, &mut sink),
    )
    .await;
    assert!(left.is_err(), "the expensive read was still running");
    let started = Instant::now();
    let one = statement("SELECT v FROM t WHERE id = ?1", vec![Value::Int(3)]);
    let mut sink = CollectSink::new(&[]);
    backend.fetch(&one, &mut sink).await.expect("point read");
    assert_eq!(sink.rows[0]["v"], "row 3");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "the dropped statement held the thread for {:?}",
        started.elapsed()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn growing_functions_answer_whole_values_or_refuse_naming_the_limit() {
    let (mut backend, dir) = backend("functions", 3, 2).await;
    let mut sink = CollectSink::new(&[]);
    let whole = statement(
        "SELECT length(lpad('a', 2000000, 'xy')) AS l, length(rpad('a', 3, '')) AS e, \
         lpad('abc', 2, '-') AS cut, rpad('é', 4, 'ab') AS r, length(repeat('ab', 600000)) AS rep",
        vec![],
    );
    backend
        .fetch(&whole, &mut sink)
        .await
        .expect("within the limit");
    let row = &sink.rows[0];
    assert_eq!(row["l"], 2_000_000, "never cut at a limit of its own");
    assert!(
        row.get("e").is_none(),
        "an empty fill answers NULL, as MySQL"
    );
    assert_eq!(row["cut"], "ab");
    assert_eq!(row["r"], "éaba");
    assert_eq!(row["rep"], 1_200_000);
    backend.set_max_value_bytes(1 << 20);
    for call in [
        "lpad('a', 2000000, 'b')",
        "rpad('a', 600000, 'éé')",
        "repeat('ab', 600000)",
        "space(2000000)",
    ] {
        let mut sink = CollectSink::new(&[]);
        let r = backend
            .fetch(
                &statement(&format!("SELECT {call} AS x"), vec![]),
                &mut sink,
            )
            .await;
        let name = &call[..call.find('(').expect("call")];
        match r {
            Err(ExecError::Plan(apijet_plan::PlanError::Limit(msg))) => {
                assert!(
                    msg.contains(name) && msg.contains("max_answer_bytes"),
                    "{msg}"
                );
            }
            other => panic!("{call}: {other:?}"),
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transactions_see_their_writes_commit_and_roll_back_when_dropped() {
    let (backend, dir) = backend("tx", 3, 2).await;
    let insert = |id: i64| statement("INSERT INTO t VALUES (?1, 'new')", vec![Value::Int(id)]);
    let mut tx = backend.begin().await.expect("begin");
    assert_eq!(tx.execute(&insert(100)).await.expect("insert"), 1);
    let mut sink = CollectSink::new(&[]);
    tx.fetch(&statement("SELECT count(*) AS n FROM t", vec![]), &mut sink)
        .await
        .expect("read in the transaction");
    assert_eq!(sink.rows[0]["n"], 4);
    tx.commit().await.expect("commit");
    assert_eq!(count(&backend).await, 4);
    let mut tx = backend.begin().await.expect("begin");
    tx.execute(&insert(101)).await.expect("insert");
    drop(tx);
    // The next writer waits for the rollback of the dropped one.
    let tx = backend.begin().await.expect("begin after a drop");
    tx.rollback().await.expect("rollback");
    assert_eq!(
        count(&backend).await,
        4,
        "the dropped transaction rolled back"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `stmt` as a plan that proves its cost bounded marks it.
fn bounded(mut stmt: Statement) -> Statement {
    stmt.bounded = true;
    stmt
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bounded_point_read_runs_inline_and_an_unbounded_one_as_a_job() {
    let (backend, dir) = backend("inline", 3_000, 2).await;
    let one = statement("SELECT id, v FROM t WHERE id = ?1", vec![Value::Int(7)]);
    let mut sink = CollectSink::new(&[]);
    assert_eq!(
        backend
            .fetch(&bounded(one.clone()), &mut sink)
            .await
            .expect("read"),
        1
    );
    assert_eq!(sink.rows.len(), 1);
    assert_eq!(
        (&sink.rows[0]["id"], &sink.rows[0]["v"]),
        (&7.into(), &"row 7".into())
    );
    let missing = statement("SELECT id, v FROM t WHERE id = ?1", vec![Value::Int(-1)]);
    let mut sink = CollectSink::new(&[]);
    assert_eq!(
        backend
            .fetch(&bounded(missing), &mut sink)
            .await
            .expect("read"),
        0
    );
    assert!(sink.rows.is_empty());
    let reads = backend.inline_reads();
    assert_eq!((reads.ran(), reads.moved()), (2, 0), "both ran inline");
    // The same statement unmarked runs as a job, and answers the same.
    let mut sink = CollectSink::new(&[]);
    backend.fetch(&one, &mut sink).await.expect("read");
    assert_eq!(sink.rows[0]["v"], "row 7");
    assert_eq!(
        backend.inline_reads().ran(),
        2,
        "an unbounded read never runs inline"
    );
    // A bounded read that fails answers the error a job's would.
    let wrong = bounded(statement(
        "SELECT nope FROM t WHERE id = ?1",
        vec![Value::Int(1)],
    ));
    let mut sink = CollectSink::new(&[]);
    let e = backend
        .fetch(&wrong, &mut sink)
        .await
        .expect_err("no such column");
    assert!(
        matches!(
            &e,
            ExecError::Db {
                kind: crate::DbErrorKind::Syntax,
                ..
            }
        ),
        "{e:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bounded_read_past_its_steps_or_its_one_row_moves_to_a_job_and_answers_every_row_once() {
    let rows = 20_000;
    let (backend, dir) = backend("moved", rows, 2).await;
    // A proof that was wrong: a scan marked bounded. The step budget stops it inline, and it
    // runs again as a job, from the start.
    let backend = backend.with_inline_steps(200);
    let scan = bounded(statement(
        "SELECT id, v FROM t WHERE v = ?1",
        vec![Value::Text("row 19999".into())],
    ));
    let mut sink = CollectSink::new(&[]);
    assert_eq!(backend.fetch(&scan, &mut sink).await.expect("read"), 1);
    assert_eq!(sink.rows.len(), 1);
    assert_eq!(sink.rows[0]["id"], 19_999);
    assert_eq!(backend.inline_reads().moved(), 1);
    // A second row moves it too, within any step budget.
    let backend = backend.with_inline_steps(u32::MAX);
    let all = bounded(statement("SELECT id, v FROM t", vec![]));
    let mut sink = CollectSink::new(&[]);
    assert_eq!(
        backend.fetch(&all, &mut sink).await.expect("read"),
        rows as u64
    );
    let mut ids: Vec<i64> = sink.rows.iter().filter_map(|r| r["id"].as_i64()).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), rows, "every row exactly once");
    assert_eq!(backend.inline_reads().moved(), 2);
    // The connection's budget is disarmed after each: a long job is never interrupted by it.
    let backend = backend.with_inline_steps(0);
    let mut sink = CollectSink::new(&[]);
    let long = statement("SELECT id FROM t ORDER BY v DESC", vec![]);
    assert_eq!(
        backend.fetch(&long, &mut sink).await.expect("read"),
        rows as u64
    );
    let _ = std::fs::remove_dir_all(&dir);
}
