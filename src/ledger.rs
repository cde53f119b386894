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

use crate::client::ClientKey;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// A kind of work done for a visitor. Live answers' reads and the MCP endpoint are admitted
/// under their own kinds once their call sites go through the ledger.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(dead_code)]
pub enum Kind {
    /// A read: GET, HEAD, GETS, HEADS.
    Read,
    /// A write: POST, PUT, DELETE.
    Write,
    /// A part of `/crud`.
    CrudPart,
    /// A password checked or hashed (`/login`, `/register`, `/put/password`, `/put/balance`).
    Login,
    /// The first read of a live subscription.
    FirstRead,
    /// A live subscription's read again after a change.
    Refetch,
    /// A call of the MCP endpoint.
    Mcp,
}

impl Kind {
    /// Whether a visitor without a login counts this against `anonymous_reads_per_address`.
    fn is_read(self) -> bool {
        matches!(
            self,
            Kind::Read | Kind::CrudPart | Kind::FirstRead | Kind::Mcp
        )
    }
}

/// Who the work is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
    clients: HashMap<Option<ClientKey>, Held>,
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
}

impl Ledger {
    /// A ledger of `budgets`, with nothing under way.
    pub fn new(budgets: Budgets) -> Arc<Ledger> {
        Arc::new(Ledger {
            budgets,
            book: Mutex::new(Book::default()),
        })
    }

    /// The budgets.
    pub fn budgets(&self) -> &Budgets {
        &self.budgets
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
        let mut book = self.book();
        let clients_busy = book.clients.len();
        let total = book.total;
        let held = book.clients.get(&client.key).copied().unwrap_or_default();
        if anonymous_read
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
        if b.work_per_instance > 0 && total >= b.work_per_instance {
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
        Ok(Admitted {
            ledger: Arc::clone(self),
            key: client.key,
            anonymous_read,
            login,
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
        let first = ledger.admit(a, Kind::Read).expect("one");
        let second = ledger.admit(a, Kind::FirstRead).expect("two");
        let refused = ledger.admit(a, Kind::CrudPart).expect_err("three");
        assert_eq!(refused.setting, "anonymous_reads_per_address");
        assert!(refused.message.contains("anonymous_reads_per_address"));
        assert!(ledger.admit(client("10.0.0.2", false), Kind::Read).is_ok());
        assert!(
            ledger.admit(client("10.0.0.1", true), Kind::Read).is_ok(),
            "a login reads beyond it"
        );
        assert!(ledger.admit(a, Kind::Write).is_ok(), "writes are not reads");
        drop(first);
        let third = ledger.admit(a, Kind::Read).expect("a slot freed");
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
            .map(|_| ledger.admit(heavy, Kind::Read).expect("under the budget"))
            .collect();
        let refused = ledger.admit(heavy, Kind::Read).expect_err("its share");
        assert_eq!(refused.setting, "work_per_instance");
        // A newcomer's share is half the budget: it gets in while the heavy client waits.
        let light = client("10.0.0.2", true);
        let first = ledger.admit(light, Kind::Read).expect("a newcomer");
        let second = ledger.admit(light, Kind::Read).expect("within its share");
        assert!(ledger.admit(light, Kind::Read).is_err(), "past its share");
        drop((first, second, held));
        assert_eq!(ledger.under_way(), 0);
    }

    #[test]
    fn zero_means_no_limit() {
        let ledger = Ledger::new(budgets(0, 0, 0));
        let a = client("10.0.0.1", false);
        let held: Vec<_> = (0..100)
            .map(|_| ledger.admit(a, Kind::Read).expect("admitted"))
            .collect();
        assert_eq!(held.len(), 100);
    }
}
