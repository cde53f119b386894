//! SQLite statements off the async workers.
//!
//! A SQLite call blocks its thread until the statement ends, and a statement of few but
//! expensive steps (a function building a megabyte per row) runs for seconds between two looks
//! at a step counter. So no statement runs on an async worker: each runs as a job on a blocking
//! thread, at most `pool_size` at once, and the async side only waits for its rows.
//!
//! - Rows are copied out of SQLite on the job's thread into batches of raw values
//!   ([`Fed`]) and handed over a channel of [`CHANNEL`] batches; the async side turns them into
//!   cells for its sink and flushes the sink to the client between rows. A slow client fills
//!   the channel and pauses the job, so memory stays a few batches whatever the row count.
//! - A watchdog thread ([`Watchdog`]) looks at every running statement each [`PROBE_EVERY`]
//!   and stops it ([`Stopper`], SQLite's `sqlite3_interrupt`) when its request's deadline
//!   passed or its client is gone; dropping the waiting future (a client that left an HTTP/2
//!   stream, a sink that stopped reading) stops it too. The deadline counts from the request
//!   for a thread, so a queue of expensive statements answers 408 in time instead of running
//!   late. One clock for all, rather than a timer per statement: a point lookup pays a push and
//!   a removal.
//! - A connection goes back to the pool from the job's thread when its statement is over; a
//!   transaction's connection travels with each of its statements and back, and a transaction
//!   whose owner left is rolled back there.

use super::sqlite_budget::StepBudget;
use super::sqlite_cells::{cell, Decl};
use crate::cancel::{Stop, Watch};
use crate::cell::{recycle, Cell};
use crate::fair::{FairSlots, Holder, Slot};
use crate::sink::RowSink;
use crate::ExecError;
use rusqlite::types::ValueRef;
use rusqlite::{Connection, InterruptHandle};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, OwnedMutexGuard};

/// Batches in flight from a job to its waiting future.
const CHANNEL: usize = 2;

/// A batch is handed over at this many bytes of text and blobs…
const BATCH_BYTES: usize = 64 * 1024;

/// …or this many cells, whichever comes first.
const BATCH_CELLS: usize = 4096;

/// How often a statement's client is asked whether it is still there.
const PROBE_EVERY: Duration = Duration::from_millis(20);

/// A connection, the handle that interrupts its statement from another thread, and the
/// step budget of its inline reads.
pub(super) struct Conn {
    pub(super) db: Connection,
    interrupt: Arc<InterruptHandle>,
    pub(super) budget: StepBudget,
}

impl Conn {
    pub(super) fn new(db: Connection) -> Conn {
        let interrupt = Arc::new(db.get_interrupt_handle());
        let budget = StepBudget::install(&db);
        Conn {
            db,
            interrupt,
            budget,
        }
    }
}

/// A transaction's connection, with the process's write lock (SQLite has one writer at a
/// time: writers of this process queue for it here, without holding a thread).
pub(super) struct TxConn {
    pub(super) conn: Conn,
    _writer: OwnedMutexGuard<()>,
}

impl TxConn {
    pub(super) fn new(conn: Conn, writer: OwnedMutexGuard<()>) -> TxConn {
        TxConn {
            conn,
            _writer: writer,
        }
    }

    /// Rolls the transaction back (on this thread, holding the write lock until it is done)
    /// and hands the connection back to `pool`: never with a transaction open.
    pub(super) fn roll_back_into(self, pool: &dyn Connections) {
        let _ = self.conn.db.execute_batch("ROLLBACK");
        if self.conn.db.is_autocommit() {
            pool.put(self.conn);
        }
    }
}

/// Where the connections come from and go back to.
pub(super) trait Connections: Send + Sync + 'static {
    /// An idle connection, or a new one.
    fn take(&self) -> Result<Conn, ExecError>;
    /// A connection whose statement is over.
    fn put(&self, conn: Conn);
}

/// Where the async side stops the statement a job runs. The job arms it with its connection's
/// handle while its statement runs and disarms it before the connection serves anything else,
/// under the same lock, so a late stop can never interrupt another job's statement.
#[derive(Default)]
pub(super) struct Stopper(Mutex<Stopping>);

#[derive(Default)]
struct Stopping {
    running: Option<Arc<InterruptHandle>>,
    why: Option<Stop>,
}

impl Stopper {
    fn lock(&self) -> std::sync::MutexGuard<'_, Stopping> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The statement starts on the connection of `handle`; `Err` when it was stopped already.
    fn arm(&self, handle: &Arc<InterruptHandle>) -> Result<(), Stop> {
        let mut s = self.lock();
        match s.why {
            Some(why) => Err(why),
            None => {
                s.running = Some(Arc::clone(handle));
                Ok(())
            }
        }
    }

    /// The statement is over (reset): nothing of this job runs on the connection any more.
    fn disarm(&self) -> Option<Stop> {
        let mut s = self.lock();
        s.running = None;
        s.why
    }

    /// Stops the statement (at once when it runs, before it starts otherwise); the first
    /// reason given is the one answered.
    fn stop(&self, why: Stop) {
        let mut s = self.lock();
        s.why.get_or_insert(why);
        if let Some(handle) = &s.running {
            handle.interrupt();
        }
    }
}

/// A value of a row as SQLite gave it, text and blobs as ranges of the batch's bytes.
#[derive(Clone, Copy)]
pub(super) enum Raw {
    Null,
    Int(i64),
    Real(f64),
    Text(usize, usize),
    Blob(usize, usize),
}

/// What a job hands to the future that waits for it: rows (with the statement's output
/// columns before the first), and at last how it ended.
pub(super) struct Fed {
    output: Option<Arc<Output>>,
    cells: Vec<Raw>,
    bytes: Vec<u8>,
    end: Option<Ended>,
}

/// How a job ended, with a transaction's connection to hand back.
type Ended = (Result<u64, ExecError>, Option<Box<TxConn>>);

impl Fed {
    pub(super) fn new() -> Fed {
        Fed {
            output: None,
            cells: Vec::new(),
            bytes: Vec::new(),
            end: None,
        }
    }

    pub(super) fn push(&mut self, v: ValueRef<'_>) {
        let raw = match v {
            ValueRef::Null => Raw::Null,
            ValueRef::Integer(i) => Raw::Int(i),
            ValueRef::Real(f) => Raw::Real(f),
            ValueRef::Text(t) => {
                let at = self.bytes.len();
                self.bytes.extend_from_slice(t);
                Raw::Text(at, self.bytes.len())
            }
            ValueRef::Blob(b) => {
                let at = self.bytes.len();
                self.bytes.extend_from_slice(b);
                Raw::Blob(at, self.bytes.len())
            }
        };
        self.cells.push(raw);
    }

    fn full(&self) -> bool {
        self.bytes.len() >= BATCH_BYTES || self.cells.len() >= BATCH_CELLS
    }

    /// The values of its rows, row after row.
    pub(super) fn raws(&self) -> &[Raw] {
        &self.cells
    }

    pub(super) fn value(&self, raw: Raw) -> ValueRef<'_> {
        match raw {
            Raw::Null => ValueRef::Null,
            Raw::Int(i) => ValueRef::Integer(i),
            Raw::Real(f) => ValueRef::Real(f),
            Raw::Text(a, b) => ValueRef::Text(&self.bytes[a..b]),
            Raw::Blob(a, b) => ValueRef::Blob(&self.bytes[a..b]),
        }
    }
}

/// The output columns of one statement: names, and how their declared types answer text.
pub(super) struct Output {
    pub(super) names: Vec<String>,
    pub(super) kinds: Vec<Decl>,
}

/// The rows a job reads, handed over in batches. The job holds a thread slot while it works;
/// while it waits for a slow consumer it gives the slot up, so readers that read slowly cannot
/// keep the statements of others from running.
pub(super) struct Feed {
    // Boxed: a channel allocates its slots up front, and a batch is a few hundred bytes.
    tx: mpsc::Sender<Box<Fed>>,
    /// The batch being filled (none until the first column or row).
    fed: Option<Box<Fed>>,
    /// The output columns were handed over.
    told: bool,
    slot: Option<Slot>,
    slots: Arc<FairSlots>,
    holder: Holder,
    runtime: tokio::runtime::Handle,
}

impl Feed {
    /// The statement's output columns, before its first row.
    pub(super) fn columns(&mut self, output: &Arc<Output>) {
        if !self.told {
            self.fed_mut().output = Some(Arc::clone(output));
            self.told = true;
        }
    }

    /// One row (all its columns), handed over when the batch is full. `Err` when nobody
    /// waits for the rows any more.
    pub(super) fn row(&mut self, row: &rusqlite::Row<'_>, width: usize) -> Result<(), ExecError> {
        for i in 0..width {
            let v = row.get_ref(i).map_err(super::sqlite_errors::db_error)?;
            self.fed_mut().push(v);
        }
        if let Some(fed) = self.fed.take_if(|fed| fed.full()) {
            self.hand_over(fed, false)
                .map_err(|_| ExecError::ClientGone)?;
        }
        Ok(())
    }

    fn fed_mut(&mut self) -> &mut Fed {
        self.fed.get_or_insert_with(|| Box::new(Fed::new()))
    }

    /// Sends `fed`, waiting without a thread slot while the channel is full; gives it back
    /// when nobody receives any more.
    fn hand_over(&mut self, fed: Box<Fed>, last: bool) -> Result<(), Box<Fed>> {
        match self.tx.try_send(fed) {
            Ok(()) => Ok(()),
            Err(mpsc::error::TrySendError::Closed(fed)) => Err(fed),
            Err(mpsc::error::TrySendError::Full(fed)) => {
                self.slot = None;
                let sent = self.tx.blocking_send(fed).map_err(|e| e.0);
                if sent.is_ok() && !last {
                    self.slot = Some(self.runtime.block_on(self.slots.acquire(self.holder)));
                }
                sent
            }
        }
    }
}

/// Threads that run statements, at most `threads` at once, shared fairly between clients
/// (`crate::fair`), and their watchdog.
pub(super) struct Jobs {
    slots: Arc<FairSlots>,
    watchdog: Arc<Watchdog>,
}

impl Jobs {
    pub(super) fn new(threads: usize) -> Jobs {
        Jobs {
            slots: FairSlots::new(threads),
            watchdog: Watchdog::start(),
        }
    }

    /// Runs `work` on a blocking thread, on the connection `on` names, feeding its rows to
    /// `sink`. With a `watch` the statement is stopped as it says, and when this future is
    /// dropped; without, it runs to its end (`COMMIT`). Returns its result and the
    /// transaction's connection (none when the transaction was lost with its statement).
    pub(super) async fn run<S, W>(
        &self,
        pool: Arc<dyn Connections>,
        on: On,
        watch: Option<&Watch>,
        sink: &mut S,
        work: W,
    ) -> Ended
    where
        S: RowSink,
        W: FnOnce(&Connection, &mut Feed) -> Result<u64, ExecError> + Send + 'static,
    {
        let started = Instant::now();
        let stopper = Arc::new(Stopper::default());
        let waiting = watch.map(|_| Waiting(Arc::clone(&stopper)));
        let _watched = watch
            .filter(|w| w.is_active())
            .map(|w| self.watchdog.watch(&stopper, w, started));
        let holder = crate::cancel::current().holder();
        let deadline = watch
            .and_then(Watch::timeout)
            .map(|(t, setting)| (tokio::time::Instant::from_std(started + t), t, setting));
        let job = async {
            let slot = match (self.slots.try_acquire(holder), deadline) {
                (Some(slot), _) => slot,
                (None, None) => self.slots.acquire(holder).await,
                // Waiting for a thread counts against the deadline.
                (None, Some((at, t, setting))) => {
                    match tokio::time::timeout_at(at, self.slots.acquire(holder)).await {
                        Ok(slot) => slot,
                        Err(_) => {
                            let ms = t.as_millis() as u64;
                            return Err(Stop::Deadline { setting, ms }.error());
                        }
                    }
                }
            };
            let (rows_tx, rows_rx) = mpsc::channel(CHANNEL);
            let job = Job {
                pool,
                on,
                stopper: Arc::clone(&stopper),
                feed: Feed {
                    tx: rows_tx,
                    fed: None,
                    told: false,
                    slot: Some(slot),
                    slots: Arc::clone(&self.slots),
                    holder,
                    runtime: tokio::runtime::Handle::current(),
                },
            };
            tokio::task::spawn_blocking(move || job.run(work));
            Ok::<_, ExecError>(receive(rows_rx, sink).await)
        };
        let ended = job.await.unwrap_or_else(|e| (Err(e), None));
        drop(waiting);
        ended
    }
}

/// A future waiting for a job. However it ends (the job's answer, a sink that stopped
/// reading, its request dropped by a client that left an HTTP/2 stream), the statement is
/// stopped if it still runs: a job that ended is disarmed, and the stop does nothing.
struct Waiting(Arc<Stopper>);

impl Drop for Waiting {
    fn drop(&mut self) {
        self.0.stop(Stop::ClientGone);
    }
}

/// The clock of the running statements: a thread that, while any runs, looks at each every
/// [`PROBE_EVERY`] and stops those whose deadline passed or whose client left.
pub(super) struct Watchdog {
    watched: Mutex<Vec<Watched>>,
    next: AtomicU64,
}

struct Watched {
    id: u64,
    stopper: Arc<Stopper>,
    watch: Watch,
    started: Instant,
}

/// A statement under the watchdog; dropped, it is no longer looked at.
pub(super) struct UnderWatch<'a> {
    dog: &'a Watchdog,
    id: u64,
}

impl Watchdog {
    fn start() -> Arc<Watchdog> {
        let dog = Arc::new(Watchdog {
            watched: Mutex::new(Vec::new()),
            next: AtomicU64::new(0),
        });
        let weak = Arc::downgrade(&dog);
        let spawned = std::thread::Builder::new()
            .name("apijet-sqlite-watchdog".into())
            .spawn(move || Watchdog::run(&weak));
        if let Err(e) = spawned {
            // Statements still stop when their future is dropped; deadlines need the thread.
            tracing::error!("cannot start the SQLite watchdog: {e}");
        }
        dog
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Watched>> {
        self.watched
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Ticks every [`PROBE_EVERY`] (a statement registered needs no wake-up: a point lookup
    /// is over long before the next tick), and ends with the backend.
    fn run(weak: &Weak<Watchdog>) {
        while let Some(dog) = weak.upgrade() {
            for w in dog.lock().iter() {
                if let Some(stop) = w.watch.stop(w.started) {
                    w.stopper.stop(stop);
                }
            }
            drop(dog);
            std::thread::sleep(PROBE_EVERY);
        }
    }

    /// Watches the statement of `stopper` under `watch`, started at `started`.
    fn watch(&self, stopper: &Arc<Stopper>, watch: &Watch, started: Instant) -> UnderWatch<'_> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.lock().push(Watched {
            id,
            stopper: Arc::clone(stopper),
            watch: watch.clone(),
            started,
        });
        UnderWatch { dog: self, id }
    }
}

impl Drop for UnderWatch<'_> {
    fn drop(&mut self) {
        let mut watched = self.dog.lock();
        if let Some(i) = watched.iter().position(|w| w.id == self.id) {
            watched.swap_remove(i);
        }
    }
}

/// Feeds the rows a job hands over to `sink`, until the job says how it ended.
async fn receive<S: RowSink>(mut rx: mpsc::Receiver<Box<Fed>>, sink: &mut S) -> Ended {
    let mut output: Option<Arc<Output>> = None;
    let mut spare: Vec<Cell<'static>> = Vec::new();
    loop {
        let Some(mut fed) = rx.recv().await else {
            let e = ExecError::Connect("a SQLite thread ended without an answer".into());
            return (Err(e), None);
        };
        if let Some(o) = fed.output.take() {
            sink.columns(o.names.iter().map(String::as_str));
            output = Some(o);
        }
        if let Some(o) = output.as_ref().filter(|o| !o.kinds.is_empty()) {
            for row in fed.cells.chunks(o.kinds.len()) {
                let mut cells: Vec<Cell<'_>> = recycle(spare);
                for (raw, decl) in row.iter().zip(&o.kinds) {
                    cells.push(cell(fed.value(*raw), *decl));
                }
                if let Err(e) = sink.row(&cells) {
                    return (Err(e.into()), None);
                }
                spare = recycle(cells);
                if sink.wants_flush() {
                    if let Err(e) = sink.flush().await {
                        return (Err(e.into()), None);
                    }
                }
            }
        }
        if let Some(end) = fed.end.take() {
            return end;
        }
    }
}

/// A connection a job uses: the pool's, or a transaction's.
enum Lent {
    Pooled(Conn),
    Tx(Box<TxConn>),
}

impl Lent {
    fn conn(&self) -> &Conn {
        match self {
            Lent::Pooled(c) => c,
            Lent::Tx(t) => &t.conn,
        }
    }
}

/// The connection a job runs on.
pub(super) enum On {
    /// One of the pool's, back to the pool when the job ends.
    Pool,
    /// A transaction's, handed back with the job's end.
    Tx(Box<TxConn>),
    /// One of the pool's that becomes a transaction's, with the process's write lock.
    Begin(OwnedMutexGuard<()>),
}

/// One statement's work, as it travels to its thread.
struct Job {
    pool: Arc<dyn Connections>,
    on: On,
    stopper: Arc<Stopper>,
    feed: Feed,
}

impl Job {
    fn run<W>(mut self, work: W)
    where
        W: FnOnce(&Connection, &mut Feed) -> Result<u64, ExecError>,
    {
        let lent = match std::mem::replace(&mut self.on, On::Pool) {
            On::Tx(tx) => Ok(Lent::Tx(tx)),
            On::Pool => self.pool.take().map(Lent::Pooled),
            On::Begin(writer) => self
                .pool
                .take()
                .map(|conn| Lent::Tx(Box::new(TxConn::new(conn, writer)))),
        };
        let (result, back) = match lent {
            Err(e) => (Err(e), None),
            Ok(lent) => {
                let result = match self.stopper.arm(&lent.conn().interrupt) {
                    Err(stop) => Err(stop.error()),
                    Ok(()) => {
                        let result = work(&lent.conn().db, &mut self.feed);
                        match (result, self.stopper.disarm()) {
                            (Err(_), Some(stop)) => Err(stop.error()),
                            (result, _) => result,
                        }
                    }
                };
                match lent {
                    Lent::Pooled(conn) => {
                        self.pool.put(conn);
                        (result, None)
                    }
                    Lent::Tx(tx) => (result, Some(tx)),
                }
            }
        };
        let mut fed = self.feed.fed.take().unwrap_or_else(|| Box::new(Fed::new()));
        fed.end = Some((result, back));
        if let Err(mut fed) = self.feed.hand_over(fed, true) {
            // Nobody waits for the transaction any more: it ends here.
            if let Some((_, Some(tx))) = fed.end.take() {
                tx.roll_back_into(&*self.pool);
            }
        }
    }
}
