//! The admission and budget ledger: every piece of work done for a visitor is admitted here
//! first, counted against the visitor's client ([`ClientKey`]) and the instance, and held as
//! an [`Admitted`] until the work is done: dropping it (the work ended, its future was dropped
//! because its client left) gives its share back at once.
//!
//! What is counted, per instance and in memory:
//! - per client: reads without a login (`anonymous_reads_per_address`), password checks and
//!   hashes (`logins_per_client`);
//! - per instance: all work under way (`work_per_instance`). Past it, the work is shared
//!   fairly: a client that holds its share (the budget divided among the clients with work
//!   under way) is refused, and a client holding less is still admitted, so one client cannot
//!   crowd out the others by sending more.
//!
//! A refusal is a 429 that names its setting. A client with nothing under way takes no room.
//!
//! The pipeline's `run` stage admits every call, tool call and live read here
//! (`crate::pipeline::run`), the account endpoints their password work; the admitted work of a
//! visitor who is not logged in carries its statement timeout
//! (`anonymous_statement_timeout_ms`).

use crate::client::ClientKey;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// A kind of work done for a visitor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A client's call over HTTP (`/{method}`, `/get/{json}`, `/router`).
    Call(Act),
    /// An agent's MCP tool call (`/mcp`, `apijet mcp`).
    Tool(Act),
    /// The first read of a live subscription.
    FirstRead,
    /// A live subscription read again after a change. Counted as a read, never refused for
    /// the client's reads: it is owed to a subscription already admitted, and a refusal would
    /// reach the subscriber as an error it did not cause.
    Refetch,
    /// A password checked or hashed (`/login`, `/register`, `/put/password`, `/put/balance`).
    Login,
    /// Work the server does itself (an account endpoint's write, a sign-up).
    Server,
}

/// What a call does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Act {
    /// A read: GET, HEAD, GETS, HEADS.
    Read,
    /// A write: POST, PUT, DELETE.
    Write,
    /// `/crud`.
    Crud,
}

impl Kind {
    /// Whether a visitor without a login counts this against `anonymous_reads_per_address`.
    fn is_read(self) -> bool {
        matches!(
            self,
            Kind::Call(Act::Read | Act::Crud)
                | Kind::Tool(Act::Read | Act::Crud)
                | Kind::FirstRead
                | Kind::Refetch
        )
    }

    /// Whether this work is owed to work admitted before (a subscription's refetch; the
    /// server's own write inside a call or login that was admitted): counted, never refused,
    /// or that work would fail halfway for a reason its client did not cause.
    fn is_owed(self) -> bool {
        matches!(self, Kind::Refetch | Kind::Server)
    }

    /// Whether a visitor's statements of this kind stop at `anonymous_statement_timeout_ms`
    /// when it is not logged in.
    fn has_anonymous_timeout(self) -> bool {
        !matches!(self, Kind::Server | Kind::Login)
    }
}

/// Who the work is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Client {
    /// The client's key; none when the server does not know its address.
    pub key: Option<ClientKey>,
    /// The visitor is logged in.
    pub logged_in: bool,
}

/// The budgets, from the settings of the same names.
#[derive(Debug, Clone, Copy)]
pub struct Budgets {
    /// Reads one client may have under way at once without a login (0: no limit).
    pub anonymous_reads_per_address: usize,
    /// Password checks and hashes one client may have under way at once (0: no limit).
    pub logins_per_client: usize,
    /// Work under way per instance before it is shared fairly between clients (0: no limit).
    pub work_per_instance: usize,
    /// The statement timeout of visitors who are not logged in (zero: `statement_timeout_ms`
    /// only).
    pub anonymous_timeout: Duration,
}

/// Why work was not admitted; a 429 whose message names the setting.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Refusal {
    /// The setting whose budget is spent.
    pub setting: &'static str,
    /// What the client is told.
    pub message: String,
}

/// The ledger; see the module documentation.
#[derive(Debug)]
pub struct Ledger {
    budgets: Budgets,
    book: Mutex<Book>,
}

/// What is under way.
#[derive(Debug, Default)]
struct Book {
    /// Hashed with foldhash, seeded per process: SipHash of the key was looked up four times
    /// for every piece of work, and only clients with work under way are kept, which bounds
    /// what colliding keys can cost.
    clients: HashMap<Option<ClientKey>, Held, foldhash::fast::RandomState>,
    total: usize,
}

/// What one client has under way.
#[derive(Debug, Default, Clone, Copy)]
struct Held {
    all: usize,
    anonymous_reads: usize,
    logins: usize,
}

/// One piece of work admitted; dropping it ends it.
#[derive(Debug)]
pub struct Admitted {
    ledger: Arc<Ledger>,
    key: Option<ClientKey>,
    anonymous_read: bool,
    login: bool,
    timeout: Option<Duration>,
}

impl Admitted {
    /// The statement timeout of the work's own, stricter than the database's, and the setting
    /// that gives it.
    pub fn timeout(&self) -> Option<(Duration, &'static str)> {
        self.timeout.map(|t| (t, "anonymous_statement_timeout_ms"))
    }
}

impl Ledger {
    /// A ledger of `budgets`, with nothing under way.
    pub fn new(budgets: Budgets) -> Arc<Ledger> {
        Arc::new(Ledger {
            budgets,
            book: Mutex::new(Book::default()),
        })
    }

    fn book(&self) -> MutexGuard<'_, Book> {
        self.book
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Admits one piece of `kind` for `client`, or says which budget is spent.
    pub fn admit(self: &Arc<Self>, client: Client, kind: Kind) -> Result<Admitted, Refusal> {
        let b = &self.budgets;
        let anonymous_read = !client.logged_in && kind.is_read();
        let login = kind == Kind::Login;
        let owed = kind.is_owed();
        let mut book = self.book();
        let clients_busy = book.clients.len();
        let total = book.total;
        let held = book.clients.get(&client.key).copied().unwrap_or_default();
        if anonymous_read
            && !owed
            && b.anonymous_reads_per_address > 0
            && held.anonymous_reads >= b.anonymous_reads_per_address
        {
            return Err(Refusal {
                setting: "anonymous_reads_per_address",
                message: format!(
                    "too many reads under way from this address: {} at once is the most a \
                     visitor who is not logged in may have (setting \
                     anonymous_reads_per_address); wait for one to end, or log in",
                    b.anonymous_reads_per_address
                ),
            });
        }
        if login && b.logins_per_client > 0 && held.logins >= b.logins_per_client {
            return Err(Refusal {
                setting: "logins_per_client",
                message: format!(
                    "too many logins under way from this address: {} at once is the most one \
                     client may have (setting logins_per_client); wait for one to end",
                    b.logins_per_client
                ),
            });
        }
        if !owed && b.work_per_instance > 0 && total >= b.work_per_instance {
            // Clients with work under way, this one included.
            let sharing = clients_busy + usize::from(held.all == 0);
            let share = (b.work_per_instance / sharing.max(1)).max(1);
            if held.all >= share {
                return Err(Refusal {
                    setting: "work_per_instance",
                    message: format!(
                        "this server is busy: {total} pieces of work are under way, more than \
                         work_per_instance ({}) allows before it is shared, and this address \
                         holds its share ({share}); wait for one to end (setting \
                         work_per_instance)",
                        b.work_per_instance
                    ),
                });
            }
        }
        let held = book.clients.entry(client.key).or_default();
        held.all += 1;
        held.anonymous_reads += usize::from(anonymous_read);
        held.logins += usize::from(login);
        book.total += 1;
        let timeout =
            (!client.logged_in && kind.has_anonymous_timeout() && !b.anonymous_timeout.is_zero())
                .then_some(b.anonymous_timeout);
        Ok(Admitted {
            ledger: Arc::clone(self),
            key: client.key,
            anonymous_read,
            login,
            timeout,
        })
    }

    /// Work under way (for tests).
    #[cfg(test)]
    fn under_way(&self) -> usize {
        self.book().total
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        let mut book = self.ledger.book();
        book.total = book.total.saturating_sub(1);
        if let Some(held) = book.clients.get_mut(&self.key) {
            held.all = held.all.saturating_sub(1);
            held.anonymous_reads -= usize::from(self.anonymous_read).min(held.anonymous_reads);
            held.logins -= usize::from(self.login).min(held.logins);
            if held.all == 0 {
                book.clients.remove(&self.key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const READ: Kind = Kind::Call(Act::Read);

    fn budgets(anonymous: usize, logins: usize, work: usize) -> Budgets {
        Budgets {
            anonymous_reads_per_address: anonymous,
            logins_per_client: logins,
            work_per_instance: work,
            anonymous_timeout: Duration::ZERO,
        }
    }

    fn client(addr: &str, logged_in: bool) -> Client {
        Client {
            key: Some(ClientKey::of(addr.parse().expect("address"))),
            logged_in,
        }
    }

    #[test]
    fn anonymous_reads_are_counted_per_client_and_released_when_they_end() {
        let ledger = Ledger::new(budgets(2, 0, 0));
        let a = client("10.0.0.1", false);
        let first = ledger.admit(a, READ).expect("one");
        let second = ledger.admit(a, Kind::FirstRead).expect("two");
        let refused = ledger.admit(a, Kind::Tool(Act::Read)).expect_err("three");
        assert_eq!(refused.setting, "anonymous_reads_per_address");
        assert!(refused.message.contains("anonymous_reads_per_address"));
        assert!(ledger.admit(client("10.0.0.2", false), READ).is_ok());
        assert!(
            ledger.admit(client("10.0.0.1", true), READ).is_ok(),
            "a login reads beyond it"
        );
        assert!(
            ledger.admit(a, Kind::Call(Act::Write)).is_ok(),
            "writes are not reads"
        );
        let owed = ledger
            .admit(a, Kind::Refetch)
            .expect("a refetch is owed to its subscription");
        drop(first);
        assert!(ledger.admit(a, READ).is_err(), "a refetch counts as a read");
        drop(owed);
        let third = ledger.admit(a, READ).expect("a slot freed");
        drop((second, third));
        assert_eq!(ledger.under_way(), 0);
        assert!(
            ledger.book().clients.is_empty(),
            "nothing under way takes no room"
        );
    }

    #[test]
    fn one_client_cannot_queue_more_logins_than_its_budget() {
        let ledger = Ledger::new(budgets(0, 2, 0));
        let a = client("2001:db8::1", true);
        let same_64 = client("2001:db8::ffff", false);
        let held = [
            ledger.admit(a, Kind::Login).expect("one"),
            ledger.admit(same_64, Kind::Login).expect("two"),
        ];
        let refused = ledger.admit(a, Kind::Login).expect_err("three");
        assert_eq!(refused.setting, "logins_per_client");
        assert!(ledger
            .admit(client("2001:db8:0:1::1", false), Kind::Login)
            .is_ok());
        drop(held);
        assert!(ledger.admit(a, Kind::Login).is_ok());
    }

    #[test]
    fn past_the_instance_budget_a_client_holding_its_share_is_refused_and_others_are_not() {
        let ledger = Ledger::new(budgets(0, 0, 4));
        let heavy = client("10.0.0.1", true);
        let held: Vec<_> = (0..4)
            .map(|_| ledger.admit(heavy, READ).expect("under the budget"))
            .collect();
        let refused = ledger.admit(heavy, READ).expect_err("its share");
        assert_eq!(refused.setting, "work_per_instance");
        // A newcomer's share is half the budget: it gets in while the heavy client waits.
        let light = client("10.0.0.2", true);
        let first = ledger.admit(light, READ).expect("a newcomer");
        let second = ledger.admit(light, READ).expect("within its share");
        assert!(ledger.admit(light, READ).is_err(), "past its share");
        drop((first, second, held));
        assert_eq!(ledger.under_way(), 0);
    }

    #[test]
    fn the_servers_own_write_inside_admitted_work_is_counted_but_never_refused() {
        let ledger = Ledger::new(budgets(0, 0, 2));
        let a = client("10.0.0.1", true);
        let held = [
            ledger.admit(a, READ).expect("one"),
            ledger.admit(a, READ).expect("two"),
        ];
        assert!(ledger.admit(a, READ).is_err(), "the instance is full");
        let own = ledger
            .admit(
                Client {
                    key: None,
                    logged_in: false,
                },
                Kind::Server,
            )
            .expect("a sign-up's or login's own write is owed to the call that asked for it");
        assert_eq!(ledger.under_way(), 3, "and it is counted");
        drop((own, held));
        assert_eq!(ledger.under_way(), 0);
    }

    #[test]
    fn zero_means_no_limit() {
        let ledger = Ledger::new(budgets(0, 0, 0));
        let a = client("10.0.0.1", false);
        let held: Vec<_> = (0..100)
            .map(|_| ledger.admit(a, READ).expect("admitted"))
            .collect();
        assert_eq!(held.len(), 100);
    }

    #[test]
    fn an_agents_tool_call_shares_the_anonymous_budget_of_http_calls_and_carries_its_timeout() {
        let ledger = Ledger::new(Budgets {
            anonymous_timeout: Duration::from_millis(250),
            ..budgets(1, 0, 0)
        });
        let a = client("192.0.2.1", false);
        let held = ledger.admit(a, READ).expect("the first read is admitted");
        assert!(ledger.admit(a, Kind::Tool(Act::Read)).is_err());
        drop(held);
        let held = ledger
            .admit(a, Kind::Tool(Act::Read))
            .expect("admitted once the call's read ended");
        assert!(ledger.admit(a, READ).is_err());
        assert!(ledger.admit(a, Kind::Server).is_ok());
        drop(held);
        for kind in [
            READ,
            Kind::Call(Act::Write),
            Kind::Tool(Act::Crud),
            Kind::FirstRead,
            Kind::Refetch,
        ] {
            let admitted = ledger.admit(a, kind).expect("admitted");
            assert_eq!(
                admitted.timeout().map(|(t, _)| t),
                Some(Duration::from_millis(250)),
                "{kind:?}: anonymous work has the statement timeout"
            );
        }
        for kind in [Kind::Server, Kind::Login] {
            let admitted = ledger.admit(a, kind).expect("admitted");
            assert_eq!(admitted.timeout(), None, "{kind:?} has none");
        }
        let logged_in = ledger
            .admit(client("192.0.2.1", true), READ)
            .expect("admitted");
        assert_eq!(logged_in.timeout(), None, "a login's work has none");
    }
}
