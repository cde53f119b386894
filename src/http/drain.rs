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
    /// Listening since the server was made, before it answers anything: a signal sent as
    /// soon as it answers is heard, never met by the default action (the process killed) nor
    /// lost between two waits.
    signals: tokio::sync::Mutex<Signals>,
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
    /// Starts listening for the signals; within a Tokio runtime.
    pub fn new(grace: Duration) -> Drain {
        Drain {
            grace,
            draining: AtomicBool::new(false),
            signals: tokio::sync::Mutex::new(Signals::listen()),
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
        let mut signals = self.signals.lock().await;
        if signals.next().await == Stop::Interrupt || self.grace.is_zero() {
            return;
        }
        self.draining.store(true, Ordering::Relaxed);
        eprintln!(
            "apijet: draining for {} ms (/health answers 503; a second signal stops at once)",
            self.grace.as_millis()
        );
        tokio::select! {
            () = tokio::time::sleep(self.grace) => {}
            _ = signals.next() => {}
        }
    }
}

/// SIGTERM and SIGINT, as they arrive.
#[derive(Debug)]
struct Signals {
    #[cfg(unix)]
    streams: Option<(tokio::signal::unix::Signal, tokio::signal::unix::Signal)>,
}

impl Signals {
    fn listen() -> Signals {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            let streams = match (
                signal(SignalKind::terminate()),
                signal(SignalKind::interrupt()),
            ) {
                (Ok(term), Ok(int)) => Some((term, int)),
                (Err(e), _) | (_, Err(e)) => {
                    tracing::warn!("cannot listen for SIGTERM and SIGINT: {e}");
                    None
                }
            };
            Signals { streams }
        }
        #[cfg(not(unix))]
        Signals {}
    }

    /// The next SIGTERM or SIGINT, saying which.
    async fn next(&mut self) -> Stop {
        #[cfg(unix)]
        if let Some((term, int)) = &mut self.streams {
            return tokio::select! {
                _ = term.recv() => Stop::Term,
                _ = int.recv() => Stop::Interrupt,
            };
        }
        let _ = tokio::signal::ctrl_c().await;
        Stop::Interrupt
    }
}
