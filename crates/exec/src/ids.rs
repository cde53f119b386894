//! Ids for inserted rows when the client gives none (protocol §10.1).
//!
//! The reference uses the current time in milliseconds, bumped by one on collision. That is
//! unique within one process but not across the many stateless instances apijet is meant to
//! run as. Here an id is `ms × 2048 + r`, where `r` is this instance's residue: ids stay
//! increasing per instance and clock-ordered overall, and every id stays below 2^53 (exact in
//! JavaScript) until the year 2109. Auto-increment columns are not used, so a multi-row insert
//! knows all its ids without reading them back, on every engine alike.
//!
//! With `instance_id` set (0–2047, a different one per instance sharing a database) the residue
//! is that id, and two instances can never produce the same id: their ids differ modulo 2048.
//! Without it the residue is random and two instances collide with probability 1/2048 per pair,
//! which is fine for one instance and a gamble for many.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// How many instances can have an id of their own: `instance_id` is below this.
pub const INSTANCES: u16 = 2048;
const SPREAD: i64 = INSTANCES as i64;

/// Hands out row ids.
#[derive(Debug)]
pub struct IdGenerator {
    last: AtomicI64,
    residue: i64,
}

impl IdGenerator {
    /// A generator with a random residue (for a single instance).
    pub fn new() -> IdGenerator {
        let mut b = [0u8; 8];
        let seed = getrandom_u64(&mut b);
        IdGenerator::with_residue((seed % SPREAD as u64) as i64)
    }

    /// A generator for instance `id` (below [`INSTANCES`]): its ids never equal those of
    /// another instance id.
    pub fn for_instance(id: u16) -> Result<IdGenerator, String> {
        if id >= INSTANCES {
            return Err(format!(
                "instance_id {id} is out of range: use 0 to {}",
                INSTANCES - 1
            ));
        }
        Ok(IdGenerator::with_residue(i64::from(id)))
    }

    fn with_residue(residue: i64) -> IdGenerator {
        IdGenerator {
            last: AtomicI64::new(0),
            residue,
        }
    }

    /// The next id: greater than every id this generator gave before.
    pub fn next(&self) -> i64 {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        let mut last = self.last.load(Ordering::Relaxed);
        loop {
            let candidate = (now * SPREAD + self.residue).max(last + SPREAD);
            match self.last.compare_exchange_weak(
                last,
                candidate,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return candidate,
                Err(seen) => last = seen,
            }
        }
    }
}

impl Default for IdGenerator {
    fn default() -> Self {
        IdGenerator::new()
    }
}

fn getrandom_u64(buf: &mut [u8; 8]) -> u64 {
    // The residue only spreads instances apart; the clock is an acceptable fallback.
    if std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, buf))
        .is_ok()
    {
        return u64::from_le_bytes(*buf);
    }
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos() as u64)
        ^ u64::from(std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn ids_increase_and_stay_exact_in_javascript() {
        let g = IdGenerator::new();
        let ids: Vec<i64> = (0..10_000).map(|_| g.next()).collect();
        assert!(ids.windows(2).all(|w| w[0] < w[1]));
        assert!(ids
            .iter()
            .all(|&i| i < (1 << 53) && i % SPREAD == g.residue));
    }

    #[test]
    fn instances_with_different_ids_never_collide() {
        // Same clock, bursts far above one id per millisecond: only the residue separates them.
        let a = IdGenerator::for_instance(0).expect("in range");
        let b = IdGenerator::for_instance(1).expect("in range");
        let c = IdGenerator::for_instance(INSTANCES - 1).expect("in range");
        let mut seen = HashSet::new();
        for _ in 0..20_000 {
            for g in [&a, &b, &c] {
                assert!(seen.insert(g.next()), "duplicate id");
            }
        }
        assert!(IdGenerator::for_instance(INSTANCES).is_err());
    }
}
