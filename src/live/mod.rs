//! Live answers: any GET, GETS, HEAD or HEADS as a subscription that pushes a new answer when
//! its rows change (`/subscribe`, Server-Sent Events).
//!
//! The parts, around the pipeline rather than in it:
//! - [`registry`]: open subscriptions. Identical ones (same method, request and visitor) share
//!   one result; results of one shape are refetched together.
//!   A subscription is keyed by its read's plan shape (`ReadPlan::shape`) and its slot values.
//! - [`schedule`]: when to refetch. Writes mark the tables they changed (this instance's
//!   through the pipeline's [`Changes`](crate::pipeline::changes::Changes), told from each
//!   write plan once it committed; other instances' through [`notify`] on PostgreSQL); a shape
//!   whose plan depends on a marked table (`ReadPlan::dependencies`) is refetched, never more
//!   than once per `live_interval_ms`; without marks, `live_poll_ms` refetches anyway (MariaDB,
//!   SQLite), and a read the clock or chance decides, every interval.
//! - [`refetch`]: the one seam that turns the subscriptions of one shape into one answer each,
//!   through the pipeline's read of a plan (the plan of the shape kept in the snapshot).
//! - [`stream`]: the event stream of one subscriber: ids, `Last-Event-ID`, heartbeats, JSON
//!   patches, the end of a login, shutdown.
//! - [`subscribe`]: a new subscription, after the HTTP edge (`http/subscribe.rs`) read it.

mod answer;
mod multiplex;
pub mod notify;
mod patch;
mod refetch;
pub mod registry;
mod schedule;
mod stream;
pub mod subscribe;

use crate::config::Config;
use crate::pipeline::changes::EVERY_TABLE;
use crate::pipeline::Pipeline;
use apijet_core::Capabilities;
use registry::Registry;
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{watch, Notify};

/// The settings of live answers.
#[derive(Debug, Clone)]
pub struct LiveSettings {
    /// `/subscribe` is served.
    pub enabled: bool,
    /// The least time between two refetches of one shape.
    pub interval: Duration,
    /// Refetch without a mark after this long (`None`: only on marks).
    pub poll: Option<Duration>,
    /// A comment line this often keeps proxies from closing an idle stream.
    pub heartbeat: Duration,
    /// Most subscriptions open on this instance.
    pub max_open: usize,
    /// Most subscriptions one visitor (a login, else a client address) holds open.
    pub max_per_visitor: usize,
    /// Most reads of refetches running at once.
    pub concurrency: usize,
    /// The statement timeout of the reads of visitors who are not logged in (zero: none).
    pub anonymous_timeout: Duration,
    /// Most bytes of an answer kept as the base of the next patch (`live_patch_bytes`).
    pub patch_bytes: usize,
}

impl LiveSettings {
    /// The settings of `cfg` (whatever the database can do: see `live_poll_ms`).
    pub fn of(cfg: &Config, _engine: Capabilities) -> LiveSettings {
        // An idle subscription costs nothing: it is read again when a table it reads changed
        // (this instance's writes; on PostgreSQL, with the change feed, everyone's). Where
        // other writers cannot be heard (MariaDB, SQLite), the operator who has them sets
        // `live_poll_ms`.
        let poll_ms = cfg.live_poll_ms.unwrap_or(0);
        LiveSettings {
            enabled: cfg.live,
            interval: Duration::from_millis(cfg.live_interval_ms.max(1)),
            poll: (poll_ms > 0).then(|| Duration::from_millis(poll_ms.max(cfg.live_interval_ms))),
            heartbeat: Duration::from_millis(cfg.live_heartbeat_ms.max(100)),
            max_open: cfg.live_max_subscriptions,
            max_per_visitor: cfg.live_max_per_visitor,
            concurrency: cfg.live_concurrency.max(1),
            anonymous_timeout: Duration::from_millis(cfg.anonymous_statement_timeout_ms),
            patch_bytes: cfg.live_patch_bytes,
        }
    }
}

/// Live answers of one instance.
pub struct Live {
    pub settings: LiveSettings,
    /// The reads run through it; its writes tell what they changed.
    pipeline: Arc<Pipeline>,
    registry: Arc<Registry>,
    /// Tables other instances and programs wrote since the scheduler last looked (`*`: every
    /// table).
    marks: Mutex<BTreeSet<String>>,
    /// Tables written by this instance, for the other instances (PostgreSQL).
    outgoing: Mutex<BTreeSet<String>>,
    /// Wakes the scheduler: marks arrived from elsewhere, or a shape was added.
    wake: Notify,
    /// Wakes the notifier: tables to tell the other instances about.
    tell: Notify,
    /// Whether other instances are told (PostgreSQL).
    announce: bool,
    /// Set once on shutdown: every stream ends.
    stop: watch::Sender<bool>,
}

impl Live {
    /// Live answers with `settings` over `pipeline`; nothing runs until [`Live::start`].
    pub fn new(settings: LiveSettings, pipeline: Arc<Pipeline>) -> Live {
        let engine = pipeline.backend.capabilities();
        if settings.enabled {
            pipeline.changes.follow();
        }
        Live {
            announce: settings.enabled && engine.change_feed,
            settings,
            pipeline,
            registry: Arc::new(Registry::default()),
            marks: Mutex::new(BTreeSet::new()),
            outgoing: Mutex::new(BTreeSet::new()),
            wake: Notify::new(),
            tell: Notify::new(),
            stop: watch::channel(false).0,
        }
    }

    /// Starts the scheduler and, on PostgreSQL, the notifier.
    pub fn start(self: &Arc<Self>) {
        if !self.settings.enabled {
            return;
        }
        tokio::spawn(schedule::run(Arc::clone(self)));
        if self.announce {
            tokio::spawn(notify::run(Arc::clone(self)));
        }
    }

    /// Ends every stream (SIGTERM): each says so and closes.
    pub fn shutdown(&self) {
        self.stop.send_replace(true);
    }

    /// Marks tables as changed (also by another instance or program): the shapes that read
    /// them are refetched.
    pub(crate) fn mark<'a>(&self, tables: impl IntoIterator<Item = &'a str>) {
        if let Ok(mut m) = self.marks.lock() {
            for t in tables {
                if !m.contains(t) {
                    m.insert(t.to_string());
                }
            }
        }
        self.wake.notify_one();
    }

    /// Marks every table: the schema or the rules changed, or notifications were lost.
    pub(crate) fn mark_all(&self) {
        self.mark([EVERY_TABLE]);
    }

    /// Every table marked since the last look: by other instances and programs, and by this
    /// instance's writes.
    fn take_marks(&self) -> BTreeSet<String> {
        let mut marks = self
            .marks
            .lock()
            .map(|mut m| std::mem::take(&mut *m))
            .unwrap_or_default();
        marks.extend(self.take_local());
        marks
    }

    fn take_outgoing(&self) -> BTreeSet<String> {
        self.outgoing
            .lock()
            .map(|mut m| std::mem::take(&mut *m))
            .unwrap_or_default()
    }

    /// The tables this instance's writes changed since the last look, told to the other
    /// instances too (PostgreSQL).
    fn take_local(&self) -> BTreeSet<String> {
        let local = self.pipeline.changes.take();
        if self.announce {
            let written: Vec<&String> = local.iter().filter(|t| *t != EVERY_TABLE).collect();
            if !written.is_empty() {
                if let Ok(mut out) = self.outgoing.lock() {
                    out.extend(written.into_iter().cloned());
                }
                self.tell.notify_one();
            }
        }
        local
    }
}
