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

/// The largest lateness of a timer ticking every 5 ms until `stop`.
async fn worst_tick_lateness(stop: std::sync::Arc<std::sync::atomic::AtomicBool>) -> Duration {
    let mut worst = Duration::ZERO;
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        let asked = Instant::now();
        tokio::time::sleep(Duration::from_millis(5)).await;
        worst = worst.max(asked.elapsed().saturating_sub(Duration::from_millis(5)));
    }
    worst
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
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let ticker = tokio::spawn(worst_tick_lateness(std::sync::Arc::clone(&stop)));
    let started = Instant::now();
    let (a, b) = tokio::join!(expensive_within(&backend), expensive_within(&backend));
    let took = started.elapsed();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let lateness = ticker.await.expect("ticker");
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
    assert!(took < Duration::from_secs(3), "answered after {took:?}");
    assert!(
        lateness < Duration::from_millis(500),
        "the async workers were held: a 5 ms timer was {lateness:?} late"
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
