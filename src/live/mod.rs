//! Live answers: any GET, GETS, HEAD or HEADS as a subscription that pushes a new answer when
//! its rows change (`/subscribe`, Server-Sent Events).
//!
//! The parts, around the pipeline rather than in it:
//! - [`registry`]: open subscriptions. Identical ones (same method, request and visitor) share
//!   one result; results of one shape are refetched together.
//! - [`schedule`]: when to refetch. Writes mark the tables they changed (this instance's
//!   writes through [`Live::committed`], other instances' through [`notify`] on PostgreSQL);
//!   a shape whose reads depend on a marked table is refetched, never more than once per
//!   `live_interval_ms`; without marks, `live_poll_ms` refetches anyway (MariaDB, SQLite).
//! - [`refetch`]: the one seam that turns the subscriptions of one shape into one answer each.
//! - [`stream`]: the event stream of one subscriber: ids, `Last-Event-ID`, heartbeats, JSON
//!   patches, the end of a login, shutdown.
//! - [`routes`]: the HTTP handlers.

mod answer;
mod multiplex;
pub mod notify;
mod patch;
mod refetch;
mod registry;
pub mod routes;
mod schedule;
mod stream;

use crate::config::Config;
use apijet_core::Engine;
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
}

impl LiveSettings {
    /// The settings of `cfg` for a database of `engine`.
    pub fn of(cfg: &Config, engine: Engine) -> LiveSettings {
        // PostgreSQL hears of other instances' writes (NOTIFY) and, with the triggers, of
        // everyone's; MariaDB and SQLite have no such channel, so they look again.
        let poll_ms = cfg.live_poll_ms.unwrap_or(match engine {
            Engine::Postgres => 0,
            Engine::MySql | Engine::Sqlite => cfg.live_interval_ms,
        });
        LiveSettings {
            enabled: cfg.live,
            interval: Duration::from_millis(cfg.live_interval_ms.max(1)),
            poll: (poll_ms > 0).then(|| Duration::from_millis(poll_ms.max(cfg.live_interval_ms))),
            heartbeat: Duration::from_millis(cfg.live_heartbeat_ms.max(100)),
            max_open: cfg.live_max_subscriptions,
            max_per_visitor: cfg.live_max_per_visitor,
            concurrency: cfg.live_concurrency.max(1),
        }
    }
}

/// Live answers of one instance.
pub struct Live {
    pub settings: LiveSettings,
    registry: Arc<Registry>,
    /// Tables written since the scheduler last looked (`*`: every table).
    marks: Mutex<BTreeSet<String>>,
    /// Tables written by this instance, for the other instances (PostgreSQL).
    outgoing: Mutex<BTreeSet<String>>,
    /// Wakes the scheduler: marks arrived, or a shape was added.
    wake: Notify,
    /// Wakes the notifier: tables to tell the other instances about.
    tell: Notify,
    /// Whether other instances are told (PostgreSQL).
    announce: bool,
    /// Set once on shutdown: every stream ends.
    stop: watch::Sender<bool>,
}

/// Every table: what a change of the schema, a reload or a lost notification marks.
const EVERY_TABLE: &str = "*";

impl Live {
    /// Live answers with `settings`; nothing runs until [`Live::start`].
    pub fn new(settings: LiveSettings, engine: Engine) -> Live {
        Live {
            announce: settings.enabled && engine == Engine::Postgres,
            settings,
            registry: Arc::new(Registry::default()),
            marks: Mutex::new(BTreeSet::new()),
            outgoing: Mutex::new(BTreeSet::new()),
            wake: Notify::new(),
            tell: Notify::new(),
            stop: watch::channel(false).0,
        }
    }

    /// Starts the scheduler and, on PostgreSQL, the notifier.
    pub fn start(state: &Arc<crate::app::AppState>) {
        let live = &state.live;
        if !live.settings.enabled {
            return;
        }
        tokio::spawn(schedule::run(Arc::clone(state)));
        if live.announce {
            tokio::spawn(notify::run(Arc::clone(state)));
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

    fn take_marks(&self) -> BTreeSet<String> {
        self.marks
            .lock()
            .map(|mut m| std::mem::take(&mut *m))
            .unwrap_or_default()
    }

    fn take_outgoing(&self) -> BTreeSet<String> {
        self.outgoing
            .lock()
            .map(|mut m| std::mem::take(&mut *m))
            .unwrap_or_default()
    }
}

impl apijet_exec::write::WriteWatch for Live {
    fn committed(&self, tables: &[String]) {
        if !self.settings.enabled || tables.is_empty() {
            return;
        }
        self.mark(tables.iter().map(String::as_str));
        if self.announce {
            if let Ok(mut out) = self.outgoing.lock() {
                out.extend(tables.iter().cloned());
            }
            self.tell.notify_one();
        }
    }
}
