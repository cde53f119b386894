//! When a statement must stop before it ends by itself: its request's deadline passed, or
//! nobody waits for its answer any more.
//!
//! The HTTP side runs each request inside [`watched`] with a [`Watch`] (the client's
//! presence, a statement timeout of its own), and the task of a streamed answer inside its
//! own; the backends read it when a statement starts. How a statement is stopped depends on
//! how it runs:
//!
//! - PostgreSQL and MySQL statements are futures. A deadline drops the future; so does hyper
//!   when the client hangs up, and so does an aborted stream. A future dropped while its
//!   statement runs cancels it in the database (a cancel request, `KILL QUERY` from another
//!   connection) and keeps the connection out of the pool until then, so a late cancel can
//!   never hit the next request's statement.
//! - SQLite statements run as jobs on blocking threads; the future that waits for a job's rows
//!   runs a watchdog beside it, which interrupts the statement (`sqlite3_interrupt`) when
//!   [`Watch::stop`] says so, and so does dropping that future.

use std::cell::Cell;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Tells whether the client that waits for a request's answer is gone.
pub type ClientProbe = Arc<dyn Fn() -> bool + Send + Sync>;

/// What may stop the statements of one request before they end.
#[derive(Clone, Default)]
pub struct Watch {
    /// A statement timeout of this request's own (stricter than the database's), and the
    /// setting that gives it.
    timeout: Option<(Duration, &'static str)>,
    /// Whether the client is gone; none when only a dropped future can tell.
    gone: Option<ClientProbe>,
    /// The client the statements are for, which the database's slots are shared between
    /// (`crate::fair`); none for the server's own work.
    holder: crate::fair::Holder,
}

impl std::fmt::Debug for Watch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watch")
            .field("timeout", &self.timeout)
            .field("gone", &self.gone.is_some())
            .field("holder", &self.holder)
            .finish()
    }
}

/// Why a statement was stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// It ran longer than the timeout `setting` gives (`ms` milliseconds).
    Deadline {
        /// The setting.
        setting: &'static str,
        /// Its value.
        ms: u64,
    },
    /// Nobody waits for its answer.
    ClientGone,
}

impl Stop {
    /// The error a stopped statement answers.
    pub fn error(self) -> crate::ExecError {
        match self {
            Stop::Deadline { setting, ms } => crate::ExecError::Timeout { setting, ms },
            Stop::ClientGone => crate::ExecError::ClientGone,
        }
    }
}

/// How long a cancelled statement is given to end before it is cancelled again. A cancel that
/// reaches the server before the statement starts (between the messages that start it) is
/// ignored there, so a backend sends it again until the connection, asked something trivial,
/// answers: connections answer in order, so that answer means the statement is over.
pub(crate) const CANCEL_WAITS: [Duration; 8] = [
    Duration::from_millis(20),
    Duration::from_millis(50),
    Duration::from_millis(100),
    Duration::from_millis(200),
    Duration::from_millis(400),
    Duration::from_millis(800),
    Duration::from_millis(1600),
    Duration::from_millis(3200),
];

/// A request's watch, with the statement timeout of the work under way in its scope.
struct Scope {
    watch: Watch,
    /// Set in place by [`within_timeout`]: a scope of its own for each piece of work cost
    /// every lookup a second task-local future around its whole read.
    timeout: Cell<Option<(Duration, &'static str)>>,
}

tokio::task_local! {
    static WATCH: Scope;
}

impl Watch {
    /// This watch with the statements' own timeout `timeout` from `setting` (a zero timeout
    /// adds nothing; the stricter of two applies).
    pub fn with_timeout(mut self, timeout: Duration, setting: &'static str) -> Watch {
        if timeout.is_zero() {
            return self;
        }
        if self.timeout.is_none_or(|(t, _)| timeout < t) {
            self.timeout = Some((timeout, setting));
        }
        self
    }

    /// This watch, also stopping when `gone` says the client left.
    pub fn with_client(mut self, gone: ClientProbe) -> Watch {
        self.gone = Some(match self.gone.take() {
            None => gone,
            Some(before) => Arc::new(move || before() || gone()),
        });
        self
    }

    /// This watch, for the statements of the client `key` (`crate::fair`).
    pub fn for_client(mut self, key: u128) -> Watch {
        self.holder = Some(key);
        self
    }

    /// The client the statements are for.
    pub fn holder(&self) -> crate::fair::Holder {
        self.holder
    }

    /// The statement timeout of this request, with its setting.
    pub fn timeout(&self) -> Option<(Duration, &'static str)> {
        self.timeout
    }

    /// Whether a statement started at `started` must stop now.
    pub fn stop(&self, started: Instant) -> Option<Stop> {
        if let Some((timeout, setting)) = self.timeout {
            if started.elapsed() >= timeout {
                return Some(Stop::Deadline {
                    setting,
                    ms: timeout.as_millis() as u64,
                });
            }
        }
        match &self.gone {
            Some(gone) if gone() => Some(Stop::ClientGone),
            _ => None,
        }
    }

    /// Whether the client can be asked if it is still there (else only a dropped future tells).
    pub fn has_client_probe(&self) -> bool {
        self.gone.is_some()
    }

    /// Whether anything can stop a statement early (else a statement needs no watching).
    pub fn is_active(&self) -> bool {
        self.timeout.is_some() || self.gone.is_some()
    }
}

/// The watch of the running request (nothing stops its statements when there is none).
pub fn current() -> Watch {
    WATCH
        .try_with(|scope| match scope.timeout.get() {
            Some((timeout, setting)) => scope.watch.clone().with_timeout(timeout, setting),
            None => scope.watch.clone(),
        })
        .unwrap_or_default()
}

/// Runs `fut` with `watch` as its request's watch.
pub async fn watched<F: Future>(watch: Watch, fut: F) -> F::Output {
    let scope = Scope {
        watch,
        timeout: Cell::new(None),
    };
    WATCH.scope(scope, fut).await
}

/// Runs `fut` with the current watch and also the statement timeout `timeout` (`None` or
/// zero: none), as [`watched`] with `current().with_timeout(..)` would: set in place in the
/// request's scope while no other work there set one (and unset when `fut` ends or is
/// dropped), else in a scope of its own.
pub async fn within_timeout<F: Future>(
    timeout: Option<(Duration, &'static str)>,
    fut: F,
) -> F::Output {
    let Some((limit, setting)) = timeout.filter(|(t, _)| !t.is_zero()) else {
        return fut.await;
    };
    let in_place = WATCH
        .try_with(|scope| {
            let free = scope.timeout.get().is_none();
            if free {
                scope.timeout.set(Some((limit, setting)));
            }
            free
        })
        .unwrap_or(false);
    if in_place {
        let _unset = Unset;
        fut.await
    } else {
        watched(current().with_timeout(limit, setting), fut).await
    }
}

/// Unsets the timeout [`within_timeout`] set in place in its scope (its future is dropped
/// inside that scope, whether it ended or not).
struct Unset;

impl Drop for Unset {
    fn drop(&mut self) {
        let _ = WATCH.try_with(|scope| scope.timeout.set(None));
    }
}

/// Runs `fut` and stops it at the watch's deadline, measured from now: the future is dropped
/// there (which cancels its statement) and the deadline's error is answered.
pub(crate) async fn within_deadline<T, F>(watch: &Watch, fut: F) -> Result<T, crate::ExecError>
where
    F: Future<Output = Result<T, crate::ExecError>>,
{
    match watch.timeout {
        None => fut.await,
        Some((timeout, setting)) => match tokio::time::timeout(timeout, fut).await {
            Ok(r) => r,
            Err(_) => Err(crate::ExecError::Timeout {
                setting,
                ms: timeout.as_millis() as u64,
            }),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    #[test]
    fn the_stricter_timeout_wins_and_zero_adds_nothing() {
        let w = Watch::default()
            .with_timeout(Duration::from_secs(30), "statement_timeout_ms")
            .with_timeout(Duration::ZERO, "none")
            .with_timeout(Duration::from_secs(5), "anonymous_statement_timeout_ms")
            .with_timeout(Duration::from_secs(10), "other");
        assert_eq!(
            w.timeout(),
            Some((Duration::from_secs(5), "anonymous_statement_timeout_ms"))
        );
        assert!(w.is_active());
        assert!(!Watch::default().is_active());
    }

    #[test]
    fn a_watch_stops_at_its_deadline_or_when_the_client_leaves() {
        let left = Arc::new(AtomicBool::new(false));
        let probe = Arc::clone(&left);
        let w = Watch::default()
            .with_timeout(Duration::from_millis(50), "t")
            .with_client(Arc::new(move || probe.load(Ordering::Relaxed)));
        let now = Instant::now();
        assert_eq!(w.stop(now), None);
        left.store(true, Ordering::Relaxed);
        assert_eq!(w.stop(now), Some(Stop::ClientGone));
        let long_ago = now - Duration::from_millis(60);
        assert_eq!(
            w.stop(long_ago),
            Some(Stop::Deadline {
                setting: "t",
                ms: 50
            })
        );
    }

    #[tokio::test]
    async fn the_watch_is_the_requests_and_a_late_future_is_dropped() {
        assert!(!current().is_active());
        let w = Watch::default().with_timeout(Duration::from_millis(20), "t");
        let seen = watched(w, async { current().timeout() }).await;
        assert_eq!(seen, Some((Duration::from_millis(20), "t")));
        let w = Watch::default().with_timeout(Duration::from_millis(20), "t");
        let r: Result<(), _> = within_deadline(&w, async {
            tokio::time::sleep(Duration::from_secs(5)).await;
            Ok(())
        })
        .await;
        assert!(matches!(
            r,
            Err(crate::ExecError::Timeout {
                setting: "t",
                ms: 20
            })
        ));
    }

    /// A piece of work's timeout is what its scope's watch says while it runs, and only then:
    /// set in place or in a scope of its own, nested, after it ended or was dropped midway,
    /// and outside any request.
    #[tokio::test]
    async fn a_works_timeout_holds_while_it_runs_and_no_longer() {
        let ms = Duration::from_millis;
        let outer = Watch::default()
            .with_timeout(ms(900), "outer")
            .for_client(7);
        let seen = watched(outer, async {
            let inside = within_timeout(Some((ms(300), "work")), async {
                let nested =
                    within_timeout(Some((ms(100), "nested")), async { current().timeout() }).await;
                let looser =
                    within_timeout(Some((ms(600), "looser")), async { current().timeout() }).await;
                (current().timeout(), nested, looser, current().holder())
            })
            .await;
            let after = current().timeout();
            // Dropped before it ends: its timeout goes with it.
            let dropped = tokio::time::timeout(
                ms(10),
                within_timeout(Some((ms(200), "dropped")), std::future::pending::<()>()),
            )
            .await;
            let zero = within_timeout(Some((Duration::ZERO, "zero")), async {
                current().timeout()
            })
            .await;
            (inside, after, dropped.is_err(), current().timeout(), zero)
        })
        .await;
        assert_eq!(
            seen,
            (
                (
                    Some((ms(300), "work")),
                    Some((ms(100), "nested")),
                    Some((ms(300), "work")),
                    Some(7)
                ),
                Some((ms(900), "outer")),
                true,
                Some((ms(900), "outer")),
                Some((ms(900), "outer")),
            )
        );
        let alone = within_timeout(Some((ms(50), "alone")), async { current().timeout() }).await;
        assert_eq!(alone, Some((ms(50), "alone")));
        assert_eq!(current().timeout(), None);
    }
}
