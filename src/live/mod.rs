//! Live answers: any GET, GETS, HEAD or HEADS as a subscription that pushes a new answer when
//! its rows change (`/subscribe`, Server-Sent Events).
//!
//! The parts, around the pipeline rather than in it:
//! - [`registry`]: open subscriptions. Identical ones (same method, request and visitor) share
//!   one result; results of one shape are refetched together.
//!   A subscription is keyed by its read's plan shape (`ReadPlan::shape`) and its slot values.
//! - [`schedule`]: when to refetch. Live answers follow the generations of the pipeline's
//!   [`Changes`](crate::pipeline::changes::Changes): each write moves those of the tables it
//!   changed once it committed (another instance's too, heard on the backend's change feed,
//!   `crate::pipeline::feed`); a shape whose plan depends on a moved table
//!   (`ReadPlan::dependencies`) is refetched, never more than once per `live_interval_ms`;
//!   where other programs' writes cannot be heard (no `apijet live-triggers` installed),
//!   `live_poll_ms` refetches anyway, and a read the clock or chance decides, every interval.
//! - [`refetch`]: the one seam that turns the subscriptions of one shape into one answer each,
//!   through the pipeline's stages (the plan of the shape kept in the snapshot, run as a
//!   refetch).
//! - [`stream`]: the event stream of one subscriber: ids, `Last-Event-ID`, heartbeats, JSON
//!   patches, the end of a login, shutdown.
//! - [`subscribe`]: a new subscription, after the HTTP edge (`http/subscribe.rs`) read it.

mod answer;
mod multiplex;
mod patch;
mod refetch;
pub mod registry;
mod schedule;
mod stream;
pub mod subscribe;

use crate::config::Config;
use crate::pipeline::Pipeline;
use apijet_core::Capabilities;
use registry::Registry;
use std::sync::Arc;
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
    /// Most bytes of an answer kept as the base of the next patch (`live_patch_bytes`).
    pub patch_bytes: usize,
}

impl LiveSettings {
    /// The settings of `cfg` (whatever the database can do: see `live_poll_ms`).
    pub fn of(cfg: &Config, _engine: Capabilities) -> LiveSettings {
        // An idle subscription costs nothing: it is read again when a table it reads changed
        // (this instance's writes; with the change feed's triggers installed, everyone's). Where
        // other writers cannot be heard (no triggers), the operator who has them sets
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
    /// Wakes the scheduler: a shape was added, or a refetch ended.
    wake: Notify,
    /// Set once on shutdown: every stream ends.
    stop: watch::Sender<bool>,
}

impl Live {
    /// Live answers with `settings` over `pipeline`; nothing runs until [`Live::start`].
    pub fn new(settings: LiveSettings, pipeline: Arc<Pipeline>) -> Live {
        Live {
            settings,
            pipeline,
            registry: Arc::new(Registry::default()),
            wake: Notify::new(),
            stop: watch::channel(false).0,
        }
    }

    /// Starts the scheduler and, where the backend has a change feed, the exchange with the
    /// other instances.
    pub fn start(self: &Arc<Self>) {
        // The answers kept in memory follow the other instances' writes too.
        if self.settings.enabled || self.pipeline.answers.is_some() {
            tokio::spawn(crate::pipeline::feed::run(
                Arc::clone(&self.pipeline),
                self.stop.subscribe(),
            ));
        }
        if self.settings.enabled {
            tokio::spawn(schedule::run(Arc::clone(self)));
        }
    }

    /// Ends every stream (SIGTERM): each says so and closes.
    pub fn shutdown(&self) {
        self.stop.send_replace(true);
    }
}
