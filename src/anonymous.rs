//! What visitors who are not logged in may cost at once: reads from one client address run at
//! most `anonymous_reads_per_address` at a time (IPv6 addresses count per /64, which one
//! machine usually holds whole), and their statements stop after
//! `anonymous_statement_timeout_ms` (see `apijet_exec::cancel`).
//!
//! Counted per instance, in memory; an address with nothing under way takes no room.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The limits and the reads under way.
#[derive(Debug)]
pub struct AnonymousReads {
    /// Most reads one address may have under way (0: no limit).
    per_address: usize,
    /// The statement timeout of anonymous requests (zero: `statement_timeout_ms` only).
    pub timeout: Duration,
    running: Mutex<HashMap<IpAddr, usize>>,
}

/// One read under way; dropping it ends it.
#[derive(Debug)]
pub struct ReadPermit {
    reads: Arc<AnonymousReads>,
    key: IpAddr,
}

impl AnonymousReads {
    /// Limits of `per_address` reads at once (0: none) and statements of `timeout` (zero: none).
    pub fn new(per_address: usize, timeout: Duration) -> Arc<AnonymousReads> {
        Arc::new(AnonymousReads {
            per_address,
            timeout,
            running: Mutex::new(HashMap::new()),
        })
    }

    /// Admits one more read from `addr`, or says why not (the message names the setting).
    pub fn admit(self: &Arc<Self>, addr: IpAddr) -> Result<Option<ReadPermit>, String> {
        if self.per_address == 0 {
            return Ok(None);
        }
        let key = counted_as(addr);
        let mut running = self
            .running
            .lock()
            .map_err(|_| "the anonymous read counts are unavailable".to_string())?;
        let n = running.entry(key).or_insert(0);
        if *n >= self.per_address {
            return Err(format!(
                "too many reads under way from this address: {} at once is the most a visitor \
                 who is not logged in may have (setting anonymous_reads_per_address); wait for \
                 one to end, or log in",
                self.per_address
            ));
        }
        *n += 1;
        Ok(Some(ReadPermit {
            reads: Arc::clone(self),
            key,
        }))
    }
}

impl Drop for ReadPermit {
    fn drop(&mut self) {
        if let Ok(mut running) = self.reads.running.lock() {
            if let Some(n) = running.get_mut(&self.key) {
                *n -= 1;
                if *n == 0 {
                    running.remove(&self.key);
                }
            }
        }
    }
}

/// The key an address counts under: IPv4 as it is (also when mapped into IPv6), IPv6 by its
/// /64 network.
fn counted_as(addr: IpAddr) -> IpAddr {
    match addr {
        IpAddr::V4(_) => addr,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let bits = u128::from(v6) & !((1u128 << 64) - 1);
                IpAddr::V6(bits.into())
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_are_counted_per_address_and_released_when_they_end() {
        let reads = AnonymousReads::new(2, Duration::ZERO);
        let a: IpAddr = "10.0.0.1".parse().expect("ip");
        let b: IpAddr = "10.0.0.2".parse().expect("ip");
        let first = reads.admit(a).expect("one");
        let second = reads.admit(a).expect("two");
        let refused = reads.admit(a).expect_err("three");
        assert!(refused.contains("anonymous_reads_per_address"), "{refused}");
        assert!(reads.admit(b).is_ok(), "another address has its own count");
        drop(first);
        let third = reads.admit(a).expect("a slot freed");
        drop((second, third));
        assert!(reads.running.lock().expect("lock").is_empty());
    }

    #[test]
    fn ipv6_counts_per_64_and_mapped_ipv4_as_ipv4() {
        let one: IpAddr = "2001:db8:1:2:aaaa::1".parse().expect("ip");
        let two: IpAddr = "2001:db8:1:2:bbbb::9".parse().expect("ip");
        let other: IpAddr = "2001:db8:1:3::1".parse().expect("ip");
        assert_eq!(counted_as(one), counted_as(two));
        assert_ne!(counted_as(one), counted_as(other));
        let mapped: IpAddr = "::ffff:10.0.0.1".parse().expect("ip");
        assert_eq!(
            counted_as(mapped),
            "10.0.0.1".parse::<IpAddr>().expect("ip")
        );
    }

    #[test]
    fn zero_means_no_limit() {
        let reads = AnonymousReads::new(0, Duration::ZERO);
        let a: IpAddr = "10.0.0.1".parse().expect("ip");
        for _ in 0..10 {
            assert!(reads.admit(a).expect("admitted").is_none());
        }
    }
}
