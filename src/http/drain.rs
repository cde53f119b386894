//! Stopping without failing a request behind a load balancer.
//!
//! SIGTERM (what orchestrators, `systemctl stop` and rolling restarts send) first drains: for
//! `drain_ms` the server goes on answering everything, while `/health` and `/ready` answer 503
//! so that the balancer stops sending it new requests, and every answer closes its connection
//! so that keep-alive clients open a fresh one (which the balancer sends elsewhere). Then the
//! server stops: no new connections, live streams end with `event: reconnect` (the client
//! comes back through the balancer), requests in flight finish.
//!
//! SIGINT (Ctrl-C at a terminal), a second signal, or `drain_ms = 0` skip the wait.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// The draining state of one server.
#[derive(Debug)]
pub struct Drain {
    grace: Duration,
    draining: AtomicBool,
}

/// The signals that stop the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    /// SIGTERM: drain first.
    Term,
    /// SIGINT: stop now.
    Interrupt,
}

impl Drain {
    pub fn new(grace: Duration) -> Drain {
        Drain {
            grace,
            draining: AtomicBool::new(false),
        }
    }

    /// Whether the server is draining (about to stop): the balancer should send nothing new.
    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::Relaxed)
    }

    /// Resolves when the server should stop accepting connections: at SIGINT, or at SIGTERM
    /// followed by the grace period (cut short by another signal), during which
    /// [`Drain::is_draining`] holds.
    pub async fn stop_requested(&self) {
        if stop_signal().await == Stop::Interrupt || self.grace.is_zero() {
            return;
        }
        self.draining.store(true, Ordering::Relaxed);
        eprintln!(
            "apijet: draining for {} ms (/health answers 503; a second signal stops at once)",
            self.grace.as_millis()
        );
        tokio::select! {
            () = tokio::time::sleep(self.grace) => {}
            _ = stop_signal() => {}
        }
    }
}

/// Resolves on SIGTERM or SIGINT, saying which.
async fn stop_signal() -> Stop {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = match signal(SignalKind::terminate()) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("cannot listen for SIGTERM: {e}");
                let _ = tokio::signal::ctrl_c().await;
                return Stop::Interrupt;
            }
        };
        tokio::select! {
            _ = term.recv() => Stop::Term,
            _ = tokio::signal::ctrl_c() => Stop::Interrupt,
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
        Stop::Interrupt
    }
}
