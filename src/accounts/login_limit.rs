//! Failed-attempt limiting for the account endpoints: per account and per client
//! ([`ClientKey`]: an address, IPv6 by /64), in memory, per instance.
//!
//! Each [`Subject`] counts its failures in a fixed window of `lockout`; at the limit, further
//! attempts are refused before the database is asked (and before any password is hashed),
//! until the window ends. A successful login clears its account's count. Accounts are named by
//! their canonical [`Phone`], never by the client's spelling, so `" 13000082003"` and
//! `"13000082003"` share one count. The table is bounded: when it is full, expired windows go
//! first, then the oldest, so memory stays flat whatever a client sends.

use crate::client::ClientKey;
use apijet_auth::Phone;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The limiter's settings.
#[derive(Debug, Clone, Copy)]
pub struct LoginLimits {
    /// Failures one account may have in a window (`login_failures_per_phone`).
    pub per_phone: u32,
    /// Failures one client address may have in a window.
    pub per_address: u32,
    /// The window, and so the longest wait.
    pub lockout: Duration,
    /// Most subjects remembered at once.
    pub entries: usize,
}

/// What a failure counts against.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Subject {
    /// The account with this phone: wrong passwords at `/login` and `/put/password`, wrong
    /// codes of every type, logins to a phone that is not registered.
    Phone(Phone),
    /// An account whose stored phone is not in the canonical spelling (a foreign database),
    /// by id: wrong old passwords at `/put/password`.
    Account(i64),
    /// Wrong pay passwords of account `id` (`/put/balance`, `/put/password` for `_payPassword`).
    PayPassword(i64),
    /// Codes asked for this phone (`/post/verify`): every request counts.
    CodeRequests(Phone),
    /// Everything that failed from one client (its address, IPv6 by /64), whatever the
    /// account.
    Address(ClientKey),
}

#[derive(Debug, Clone, Copy)]
struct Window {
    started: Instant,
    failures: u32,
}

/// Counts failed attempts; see the module documentation.
pub struct LoginLimiter {
    limits: LoginLimits,
    windows: Mutex<HashMap<Subject, Window>>,
}

impl LoginLimiter {
    /// An empty limiter.
    pub fn new(limits: LoginLimits) -> LoginLimiter {
        LoginLimiter {
            limits,
            windows: Mutex::new(HashMap::new()),
        }
    }

    fn limit_of(&self, subject: &Subject) -> u32 {
        match subject {
            Subject::Address(_) => self.limits.per_address,
            _ => self.limits.per_phone,
        }
    }

    /// `Some(wait)` when any of `subjects` has used up its failures for now.
    pub fn check(&self, subjects: &[Subject], now: Instant) -> Option<Duration> {
        let windows = self.windows.lock().unwrap_or_else(|e| e.into_inner());
        subjects
            .iter()
            .filter_map(|s| {
                let w = windows.get(s)?;
                let end = w.started + self.limits.lockout;
                (now < end && w.failures >= self.limit_of(s)).then(|| end - now)
            })
            .max()
    }

    /// Counts a failed attempt against each of `subjects`.
    pub fn failed(&self, subjects: &[Subject], now: Instant) {
        let mut windows = self.windows.lock().unwrap_or_else(|e| e.into_inner());
        for s in subjects {
            if !windows.contains_key(s) && windows.len() >= self.limits.entries.max(1) {
                self.make_room(&mut windows, now);
            }
            let w = windows.entry(s.clone()).or_insert(Window {
                started: now,
                failures: 0,
            });
            if now >= w.started + self.limits.lockout {
                *w = Window {
                    started: now,
                    failures: 0,
                };
            }
            w.failures = w.failures.saturating_add(1);
        }
    }

    /// A successful login clears its account's count (the address keeps its own).
    pub fn succeeded(&self, phone: &Phone) {
        let mut windows = self.windows.lock().unwrap_or_else(|e| e.into_inner());
        windows.remove(&Subject::Phone(phone.clone()));
    }

    fn make_room(&self, windows: &mut HashMap<Subject, Window>, now: Instant) {
        let lockout = self.limits.lockout;
        windows.retain(|_, w| now < w.started + lockout);
        if windows.len() >= self.limits.entries.max(1) {
            if let Some(oldest) = windows
                .iter()
                .min_by_key(|(_, w)| w.started)
                .map(|(k, _)| k.clone())
            {
                windows.remove(&oldest);
            }
        }
    }

    /// How many subjects are remembered (for tests).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.windows.lock().map_or(0, |w| w.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limiter(entries: usize) -> LoginLimiter {
        LoginLimiter::new(LoginLimits {
            per_phone: 3,
            per_address: 5,
            lockout: Duration::from_secs(60),
            entries,
        })
    }

    fn phone(text: &str) -> Subject {
        Subject::Phone(Phone::parse(text, "phone").expect("phone"))
    }

    #[test]
    fn an_account_is_locked_after_its_failures_until_the_window_ends() {
        let l = limiter(100);
        let t = Instant::now();
        let p = phone("13000082001");
        for _ in 0..3 {
            assert_eq!(l.check(std::slice::from_ref(&p), t), None);
            l.failed(std::slice::from_ref(&p), t);
        }
        let wait = l.check(std::slice::from_ref(&p), t + Duration::from_secs(10));
        assert_eq!(wait, Some(Duration::from_secs(50)));
        assert_eq!(
            l.check(&[phone("13000082002")], t),
            None,
            "other accounts are not locked"
        );
        assert_eq!(l.check(&[p], t + Duration::from_secs(60)), None);
    }

    #[test]
    fn every_spelling_of_a_phone_shares_one_count() {
        let l = limiter(100);
        let t = Instant::now();
        for spelling in [" \t13000082003\n ", "13000082003", "\r13000082003"] {
            l.failed(&[phone(spelling)], t);
        }
        assert!(l.check(&[phone("13000082003")], t).is_some());
    }

    #[test]
    fn an_address_is_locked_across_accounts() {
        let l = limiter(100);
        let t = Instant::now();
        let a = Subject::Address(ClientKey::of("10.0.0.1".parse().expect("address")));
        for i in 0..5 {
            l.failed(&[Subject::Account(i), a.clone()], t);
        }
        assert!(l.check(&[Subject::Account(9), a], t).is_some());
        assert_eq!(l.check(&[Subject::Account(9)], t), None);
    }

    #[test]
    fn success_clears_the_account() {
        let l = limiter(100);
        let t = Instant::now();
        let p = Phone::parse("13000082001", "phone").expect("phone");
        let s = [Subject::Phone(p.clone())];
        l.failed(&s, t);
        l.failed(&s, t);
        l.succeeded(&p);
        l.failed(&s, t);
        l.failed(&s, t);
        assert_eq!(l.check(&s, t), None);
    }

    #[test]
    fn the_table_stays_bounded() {
        let l = limiter(50);
        let t = Instant::now();
        for i in 0..10_000 {
            l.failed(&[Subject::Account(i)], t + Duration::from_millis(i as u64));
        }
        assert!(l.len() <= 50, "{}", l.len());
    }
}
