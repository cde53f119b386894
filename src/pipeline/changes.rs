//! What writes changed, for whoever follows it (live answers; an answer cache would be
//! another): a generation per table (by SQL name) that moves when a write to it committed, and
//! an epoch that moves when every table must be taken as changed (a reload may have changed
//! the rules; notifications from other instances were lost).
//!
//! Every write through the pipeline tells its plan's
//! [`changes`](apijet_plan::write::WritePlan::changes) once it has committed and before
//! its answer is sent; what other instances wrote is told as heard. Any number of followers
//! read the generations: each keeps the [`Stamp`] of when it last looked, asks what moved since
//! ([`Changes::since`], [`Changes::moved_since`]) and waits for the next change
//! ([`Changes::wait`]). Nothing is kept while no one follows, so a server without followers
//! pays one atomic load per write.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use tokio::sync::watch;

/// When a follower looked: the epoch and the clock of the last change it had seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stamp {
    epoch: u64,
    clock: u64,
}

/// What moved after a stamp.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Moved {
    /// Every table (the epoch moved).
    pub every: bool,
    /// The tables whose generation moved.
    pub tables: BTreeSet<String>,
}

impl Moved {
    /// Whether nothing moved.
    pub fn is_empty(&self) -> bool {
        !self.every && self.tables.is_empty()
    }
}

/// A table's generations: the clock of its last change, and of its last change by a write of
/// this instance.
#[derive(Debug, Clone, Copy, Default)]
struct Generation {
    any: u64,
    own: u64,
}

#[derive(Debug, Default)]
struct Generations {
    epoch: u64,
    clock: u64,
    tables: HashMap<String, Generation>,
}

/// The generations of every table written since someone followed.
pub struct Changes {
    followed: AtomicBool,
    /// Writes elsewhere cannot be heard now (the change feed's connection broke, a look at the
    /// change table failed or is late): what they change is unknown until they can be.
    deaf: AtomicBool,
    generations: RwLock<Generations>,
    /// The clock, for the followers that wait for it to move.
    moved: watch::Sender<u64>,
}

impl Default for Changes {
    fn default() -> Self {
        Changes {
            followed: AtomicBool::new(false),
            deaf: AtomicBool::new(false),
            generations: RwLock::default(),
            moved: watch::Sender::new(0),
        }
    }
}

/// Whose write moved a table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Writer {
    /// This instance's (told to the other instances).
    Own,
    /// Another instance's or program's.
    Other,
}

impl Changes {
    fn read(&self) -> RwLockReadGuard<'_, Generations> {
        self.generations.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, Generations> {
        self.generations.write().unwrap_or_else(|e| e.into_inner())
    }

    /// From now on, changes are kept; the stamp of now.
    pub fn follow(&self) -> Stamp {
        self.followed.store(true, Ordering::Relaxed);
        self.stamp()
    }

    /// The stamp of now.
    pub fn stamp(&self) -> Stamp {
        let g = self.read();
        Stamp {
            epoch: g.epoch,
            clock: g.clock,
        }
    }

    /// Writes elsewhere can (`false`) or cannot (`true`) be heard from now on. What was written
    /// while they could not is told once they can again (the change table's generations), or
    /// taken as everything (a notification channel).
    pub fn deaf(&self, deaf: bool) {
        self.deaf.store(deaf, Ordering::Relaxed);
    }

    /// Whether writes elsewhere cannot be heard now: nothing read before may be taken as
    /// unchanged.
    pub fn is_deaf(&self) -> bool {
        self.deaf.load(Ordering::Relaxed)
    }

    /// A write of this instance committed, changing `tables` (SQL names).
    pub fn committed<'a>(&self, tables: impl IntoIterator<Item = &'a str>) {
        self.moved_by(tables, Writer::Own);
    }

    /// Another instance or program wrote `tables`.
    pub fn heard<'a>(&self, tables: impl IntoIterator<Item = &'a str>) {
        self.moved_by(tables, Writer::Other);
    }

    fn moved_by<'a>(&self, tables: impl IntoIterator<Item = &'a str>, writer: Writer) {
        if !self.followed.load(Ordering::Relaxed) {
            return;
        }
        let mut tables = tables.into_iter().peekable();
        if tables.peek().is_none() {
            return;
        }
        let clock = {
            let mut g = self.write();
            g.clock += 1;
            let clock = g.clock;
            for t in tables {
                if !g.tables.contains_key(t) {
                    g.tables.insert(t.to_string(), Generation::default());
                }
                if let Some(generation) = g.tables.get_mut(t) {
                    generation.any = clock;
                    if writer == Writer::Own {
                        generation.own = clock;
                    }
                }
            }
            clock
        };
        self.moved.send_replace(clock);
    }

    /// Every table is to be taken as changed: the rules may have changed (a reload), or what
    /// other instances wrote was lost.
    pub fn everything(&self) {
        let clock = {
            let mut g = self.write();
            g.epoch += 1;
            g.clock += 1;
            g.clock
        };
        self.moved.send_replace(clock);
    }

    /// What moved after `stamp`, and the stamp of now.
    pub fn since(&self, stamp: Stamp) -> (Moved, Stamp) {
        self.moved_after(stamp, Writer::Other)
    }

    /// What this instance's own writes moved after `stamp` (what to tell the other
    /// instances), and the stamp of now.
    pub fn own_since(&self, stamp: Stamp) -> (Moved, Stamp) {
        self.moved_after(stamp, Writer::Own)
    }

    fn moved_after(&self, stamp: Stamp, writer: Writer) -> (Moved, Stamp) {
        let g = self.read();
        let now = Stamp {
            epoch: g.epoch,
            clock: g.clock,
        };
        let mut moved = Moved {
            every: writer == Writer::Other && g.epoch != stamp.epoch,
            tables: BTreeSet::new(),
        };
        if now.clock != stamp.clock {
            for (t, generation) in &g.tables {
                let at = match writer {
                    Writer::Own => generation.own,
                    Writer::Other => generation.any,
                };
                if at > stamp.clock {
                    moved.tables.insert(t.clone());
                }
            }
        }
        (moved, now)
    }

    /// Whether a table that `reads` says a read depends on moved after `stamp` (every table,
    /// when the epoch moved).
    pub fn moved_since(&self, stamp: Stamp, reads: impl Fn(&str) -> bool) -> bool {
        let g = self.read();
        if g.epoch != stamp.epoch {
            return true;
        }
        g.clock != stamp.clock
            && g.tables
                .iter()
                .any(|(t, generation)| generation.any > stamp.clock && reads(t))
    }

    /// Waits until something moves after `stamp` (at once when it has already).
    pub async fn wait(&self, stamp: Stamp) {
        let mut moved = self.moved.subscribe();
        // The sender lives as long as `self`: the wait cannot fail.
        let _ = moved.wait_for(|clock| *clock != stamp.clock).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    fn tables(m: &Moved) -> Vec<&str> {
        m.tables.iter().map(String::as_str).collect()
    }

    #[test]
    fn nothing_is_kept_until_someone_follows() {
        let c = Changes::default();
        let before = c.stamp();
        c.committed(["Moment"]);
        assert_eq!(c.stamp(), before);
        let seen = c.follow();
        c.committed(["Moment"]);
        assert_ne!(c.stamp(), seen);
    }

    #[test]
    fn every_follower_sees_every_change_however_many_follow() {
        let c = Changes::default();
        let first = c.follow();
        c.committed(["Moment", "Comment"]);
        let second = c.stamp();
        c.heard(["apijson_user"]);
        // Neither look takes anything from the other.
        let (moved, now) = c.since(first);
        assert_eq!(tables(&moved), ["Comment", "Moment", "apijson_user"]);
        let (again, _) = c.since(first);
        assert_eq!(again, moved);
        let (moved, _) = c.since(second);
        assert_eq!(tables(&moved), ["apijson_user"]);
        assert!(c.since(now).0.is_empty());
        // Only this instance's writes are told to the others.
        assert_eq!(tables(&c.own_since(first).0), ["Comment", "Moment"]);
        assert!(c.own_since(second).0.is_empty());
    }

    #[test]
    fn a_read_moved_when_a_table_it_reads_moved_or_everything_did() {
        let c = Changes::default();
        let read_at = c.follow();
        c.committed(["Comment"]);
        assert!(!c.moved_since(read_at, |t| t == "Moment"));
        assert!(c.moved_since(read_at, |t| t == "Comment"));
        let later = c.stamp();
        c.everything();
        assert!(c.moved_since(later, |_| false));
        let (moved, _) = c.since(later);
        assert!(moved.every);
        assert!(
            c.own_since(later).0.is_empty(),
            "a reload is no write to tell"
        );
    }

    /// One change in a model of the history: the clock after it, the tables it moved, whether
    /// this instance wrote them, whether it moved every table.
    struct Event {
        clock: u64,
        tables: Vec<&'static str>,
        own: bool,
        every: bool,
    }

    /// Whatever the writes, the reloads and the order in which followers look, each follower
    /// sees exactly what moved after its own last look, and nothing one follower looks at is
    /// taken from another.
    #[test]
    fn each_follower_sees_exactly_what_moved_after_its_stamp() {
        const TABLES: [&str; 4] = ["Moment", "Comment", "apijson_user", "apijson_privacy"];
        for seed in 0..300 {
            let mut rng = apijet_testkit::rng::Rng::new(seed);
            let c = Changes::default();
            let mut looked = [c.follow(); 3];
            let mut history: Vec<Event> = Vec::new();
            for _ in 0..60 {
                let op = rng.below(6);
                if op < 3 {
                    let tables: Vec<&str> = TABLES
                        .iter()
                        .copied()
                        .filter(|_| rng.below(2) == 0)
                        .collect();
                    let own = op < 2;
                    if own {
                        c.committed(tables.iter().copied());
                    } else {
                        c.heard(tables.iter().copied());
                    }
                    if !tables.is_empty() {
                        let clock = c.stamp().clock;
                        history.push(Event {
                            clock,
                            tables,
                            own,
                            every: false,
                        });
                    }
                    continue;
                }
                if op == 3 {
                    c.everything();
                    let clock = c.stamp().clock;
                    history.push(Event {
                        clock,
                        tables: Vec::new(),
                        own: false,
                        every: true,
                    });
                    continue;
                }
                let f = rng.below(looked.len() as u64) as usize;
                let stamp = looked[f];
                let after: Vec<&Event> = history.iter().filter(|e| e.clock > stamp.clock).collect();
                let moved = |own_only: bool| Moved {
                    every: !own_only && after.iter().any(|e| e.every),
                    tables: after
                        .iter()
                        .filter(|e| e.own || !own_only)
                        .flat_map(|e| e.tables.iter().map(|t| t.to_string()))
                        .collect(),
                };
                assert_eq!(c.since(stamp).0, moved(false), "seed {seed}");
                assert_eq!(c.own_since(stamp).0, moved(true), "seed {seed}");
                let table = TABLES[rng.below(TABLES.len() as u64) as usize];
                let expected = moved(false);
                assert_eq!(
                    c.moved_since(stamp, |t| t == table),
                    expected.every || expected.tables.contains(table),
                    "seed {seed}"
                );
                if rng.below(2) == 0 {
                    looked[f] = c.since(stamp).1;
                }
            }
        }
    }

    #[tokio::test]
    async fn waiting_followers_all_wake_on_one_change() {
        let c = Arc::new(Changes::default());
        let seen = c.follow();
        let waiters: Vec<_> = (0..3)
            .map(|_| {
                let c = Arc::clone(&c);
                tokio::spawn(async move { c.wait(seen).await })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(20)).await;
        c.committed(["Moment"]);
        for w in waiters {
            tokio::time::timeout(Duration::from_secs(10), w)
                .await
                .expect("woken")
                .expect("joined");
        }
        // A change made before the wait began is not waited for.
        tokio::time::timeout(Duration::from_secs(10), c.wait(seen))
            .await
            .expect("at once");
    }
}
