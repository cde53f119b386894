//! Failed-login limiting: per phone and per client address, in memory, per instance.
//!
//! Each key (a phone, an address) counts its failures in a fixed window of `lockout`; at the
//! limit, further attempts are refused before the database is asked, until the window ends.
//! A success clears the phone's count. The table is bounded: when it is full, expired windows
//! go first, then the oldest, so memory stays flat whatever a client sends.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The limiter's settings.
#[derive(Debug, Clone, Copy)]
pub struct LoginLimits {
    /// Failures one phone may have in a window.
    pub per_phone: u32,
    /// Failures one client address may have in a window.
    pub per_address: u32,
    /// The window, and so the longest wait.
    pub lockout: Duration,
    /// Most phones and addresses remembered at once.
    pub entries: usize,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    Phone(String),
    Address(IpAddr),
}

#[derive(Debug, Clone, Copy)]
struct Window {
    started: Instant,
    failures: u32,
}

/// Counts failed logins; see the module documentation.
pub struct LoginLimiter {
    limits: LoginLimits,
    windows: Mutex<HashMap<Key, Window>>,
}

/// Phones longer than this are not phones; they are counted by their first bytes only, so a
/// key never holds much memory.
const MAX_PHONE_KEY: usize = 32;

impl LoginLimiter {
    /// An empty limiter.
    pub fn new(limits: LoginLimits) -> LoginLimiter {
        LoginLimiter {
            limits,
            windows: Mutex::new(HashMap::new()),
        }
    }

    fn keys(phone: &str, address: Option<IpAddr>) -> impl Iterator<Item = Key> {
        let cut = phone
            .char_indices()
            .nth(MAX_PHONE_KEY)
            .map_or(phone, |(i, _)| &phone[..i]);
        [Some(Key::Phone(cut.to_string())), address.map(Key::Address)]
            .into_iter()
            .flatten()
    }

    fn limit_of(&self, key: &Key) -> u32 {
        match key {
            Key::Phone(_) => self.limits.per_phone,
            Key::Address(_) => self.limits.per_address,
        }
    }

    /// `Some(wait)` when `phone` or `address` has used up its failures for now.
    pub fn check(&self, phone: &str, address: Option<IpAddr>, now: Instant) -> Option<Duration> {
        let windows = self.windows.lock().unwrap_or_else(|e| e.into_inner());
        Self::keys(phone, address)
            .filter_map(|key| {
                let w = windows.get(&key)?;
                let end = w.started + self.limits.lockout;
                (now < end && w.failures >= self.limit_of(&key)).then(|| end - now)
            })
            .max()
    }

    /// Counts a failed attempt against `phone` and `address`.
    pub fn failed(&self, phone: &str, address: Option<IpAddr>, now: Instant) {
        let mut windows = self.windows.lock().unwrap_or_else(|e| e.into_inner());
        for key in Self::keys(phone, address) {
            if !windows.contains_key(&key) && windows.len() >= self.limits.entries.max(1) {
                self.make_room(&mut windows, now);
            }
            let w = windows.entry(key).or_insert(Window {
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

    /// A successful login clears its phone's count (the address keeps its own).
    pub fn succeeded(&self, phone: &str) {
        let mut windows = self.windows.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(key) = Self::keys(phone, None).next() {
            windows.remove(&key);
        }
    }

    fn make_room(&self, windows: &mut HashMap<Key, Window>, now: Instant) {
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

    /// How many keys are remembered (for tests).
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

    #[test]
    fn a_phone_is_locked_after_its_failures_until_the_window_ends() {
        let l = limiter(100);
        let t = Instant::now();
        for _ in 0..3 {
            assert_eq!(l.check("130", None, t), None);
            l.failed("130", None, t);
        }
        let wait = l.check("130", None, t + Duration::from_secs(10));
        assert_eq!(wait, Some(Duration::from_secs(50)));
        assert_eq!(l.check("131", None, t), None, "other phones are not locked");
        assert_eq!(l.check("130", None, t + Duration::from_secs(60)), None);
    }

    #[test]
    fn an_address_is_locked_across_phones() {
        let l = limiter(100);
        let t = Instant::now();
        let a: IpAddr = "10.0.0.1".parse().expect("address");
        for i in 0..5 {
            l.failed(&format!("1{i}"), Some(a), t);
        }
        assert!(l.check("19", Some(a), t).is_some());
        assert_eq!(l.check("19", None, t), None);
    }

    #[test]
    fn success_clears_the_phone() {
        let l = limiter(100);
        let t = Instant::now();
        l.failed("130", None, t);
        l.failed("130", None, t);
        l.succeeded("130");
        l.failed("130", None, t);
        l.failed("130", None, t);
        assert_eq!(l.check("130", None, t), None);
    }

    #[test]
    fn the_table_stays_bounded() {
        let l = limiter(50);
        let t = Instant::now();
        for i in 0..10_000 {
            l.failed(&format!("p{i}"), None, t + Duration::from_millis(i));
        }
        assert!(l.len() <= 50, "{}", l.len());
        // Long phones cost no more than short ones.
        l.failed(&"9".repeat(100_000), None, t);
        assert!(l.len() <= 50);
    }
}
