//! The application: its state, wired once at start-up, and the request entry ([`entry`]).
//!
//! The state holds the [`Pipeline`] (the database, its snapshot, the plan options, the
//! counters, the ledger that admits every piece of work) and the features around it, each with what it needs: the account
//! endpoints, the sessions, live answers. Features depend on the pipeline, never on the state,
//! so every dependency points one way: HTTP edge → state → features → pipeline.

pub mod entry;

use crate::accounts::session::Sessions;
use crate::accounts::Accounts;
use crate::config::Config;
use crate::live::{Live, LiveSettings};
use crate::pipeline::Pipeline;
use std::sync::Arc;
use std::time::Duration;

/// What every request shares; built once at start-up.
pub struct AppState {
    /// The database, its snapshot, the plan options and the counters.
    pub pipeline: Arc<Pipeline>,
    /// Who the visitor of a request is.
    pub sessions: Arc<Sessions>,
    /// The account endpoints: codes, logins, passwords, balances.
    pub accounts: Accounts,
    /// User ids allowed to `POST /reload`.
    pub admins: Vec<i64>,
    /// Requests slower than this are logged with their request.
    slow: Option<Duration>,
    /// Live answers (`/subscribe`).
    pub live: Arc<Live>,
    /// `server_timing`: the calls' stages are timed for the `Server-Timing` header.
    pub server_timing: bool,
}

impl AppState {
    /// Connects, seeds the default SQLite database on first start, loads the snapshot, and
    /// wires the features to the pipeline.
    pub async fn start(cfg: &Config) -> Result<AppState, String> {
        let pipeline = Arc::new(Pipeline::start(cfg).await?);
        let sessions = Arc::new(Sessions::new(cfg)?);
        let live = Arc::new(Live::new(
            LiveSettings::of(cfg, pipeline.backend.capabilities()),
            Arc::clone(&pipeline),
        ));
        Ok(AppState {
            live,
            accounts: Accounts::new(
                cfg,
                Arc::clone(&pipeline),
                Arc::clone(&sessions),
                Arc::clone(&pipeline.ledger),
            ),
            pipeline,
            sessions,
            admins: cfg.admins.clone(),
            slow: (cfg.slow_request_ms > 0).then(|| Duration::from_millis(cfg.slow_request_ms)),
            server_timing: cfg.server_timing,
        })
    }

    /// Re-reads the schema and configuration tables and swaps them in; a failure keeps the old.
    pub async fn reload(&self) -> Result<(), String> {
        self.pipeline.reload().await
    }
}
