//! The database's slots (a pool's connections, SQLite's statement threads), shared fairly
//! between clients.
//!
//! A first-come queue lets one client that sends many expensive statements take every slot,
//! and everybody else waits behind it: an unrelated point lookup waited seconds. Here a slot
//! that frees goes to the waiting client holding the fewest, and the last free slot is kept
//! for clients holding none: a client with work under way may fill the others, never that
//! one, so a newcomer (an unrelated lookup, another visitor) starts at once however busy the
//! others keep the database. With many clients each holds at most its share, the slots divided
//! among those holding or waiting. Clients are named by the request's [`Watch`]
//! (`crate::cancel`); work of no client (the server's own) counts as one client.
//!
//! [`Watch`]: crate::cancel::Watch

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::oneshot;

/// Who holds or waits for a slot: a client's key, none for the server's own work.
pub type Holder = Option<u128>;

/// Slots shared fairly; see the module documentation.
#[derive(Debug)]
pub struct FairSlots {
    slots: usize,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    free: usize,
    /// Slots held per holder: a few clients at a time, so a list beats hashing.
    held: Vec<(Holder, usize)>,
    waiting: VecDeque<Waiter>,
}

impl State {
    fn held_by(&self, holder: Holder) -> usize {
        self.held
            .iter()
            .find(|(h, _)| *h == holder)
            .map_or(0, |(_, n)| *n)
    }

    fn holds(&self, holder: Holder) -> bool {
        self.held.iter().any(|(h, _)| *h == holder)
    }
}

#[derive(Debug)]
struct Waiter {
    holder: Holder,
    granted: oneshot::Sender<()>,
}

/// A slot held; dropping it frees it for the next waiter.
#[derive(Debug)]
pub struct Slot {
    slots: Arc<FairSlots>,
    holder: Holder,
}

impl FairSlots {
    /// `slots` slots (at least one).
    pub fn new(slots: usize) -> Arc<FairSlots> {
        let slots = slots.max(1);
        Arc::new(FairSlots {
            slots,
            state: Mutex::new(State {
                free: slots,
                ..State::default()
            }),
        })
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A slot for `holder` now, if the rules above give it one without waiting.
    pub fn try_acquire(self: &Arc<Self>, holder: Holder) -> Option<Slot> {
        let mut state = self.state();
        let clients = state.held.len() + usize::from(!state.holds(holder));
        if !state.waiting.is_empty() || !self.may_take(&state, holder, clients) {
            return None;
        }
        take(&mut state, holder);
        Some(Slot {
            slots: Arc::clone(self),
            holder,
        })
    }

    /// A slot for `holder`, once the rules above give it one.
    pub async fn acquire(self: &Arc<Self>, holder: Holder) -> Slot {
        let granted = {
            let mut state = self.state();
            // With nobody waiting, the clients are the holders (and this one).
            let clients = state.held.len() + usize::from(!state.holds(holder));
            if state.waiting.is_empty() && self.may_take(&state, holder, clients) {
                take(&mut state, holder);
                None
            } else {
                let (tx, rx) = oneshot::channel();
                state.waiting.push_back(Waiter {
                    holder,
                    granted: tx,
                });
                self.dispatch(&mut state);
                Some(Pending {
                    slots: Arc::clone(self),
                    holder,
                    rx: Some(rx),
                })
            }
        };
        if let Some(mut pending) = granted {
            if let Some(rx) = pending.rx.as_mut() {
                // The sender lives in the queue until it grants; the queue outlives us.
                let _ = rx.await;
            }
            pending.rx = None;
        }
        Slot {
            slots: Arc::clone(self),
            holder,
        }
    }

    /// Whether `holder` may take a free slot now, with `clients` holding or waiting.
    fn may_take(&self, state: &State, holder: Holder, clients: usize) -> bool {
        let held = state.held_by(holder);
        if state.free == 0 {
            return false;
        }
        if held == 0 {
            return true;
        }
        let share = (self.slots / clients.max(1)).max(1);
        state.free > 1 && held < share
    }

    /// Clients holding or waiting.
    fn clients(state: &State) -> usize {
        let mut waiting: Vec<Holder> = Vec::new();
        for w in &state.waiting {
            if !state.holds(w.holder) && !waiting.contains(&w.holder) {
                waiting.push(w.holder);
            }
        }
        state.held.len() + waiting.len()
    }

    /// Grants free slots to waiters, fewest held first, in arrival order among equals.
    fn dispatch(&self, state: &mut State) {
        loop {
            state.waiting.retain(|w| !w.granted.is_closed());
            let clients = Self::clients(state);
            let next = state
                .waiting
                .iter()
                .enumerate()
                .filter(|(_, w)| self.may_take(state, w.holder, clients))
                .min_by_key(|(i, w)| (state.held_by(w.holder), *i))
                .map(|(i, _)| i);
            let Some(waiter) = next.and_then(|i| state.waiting.remove(i)) else {
                return;
            };
            take(state, waiter.holder);
            if waiter.granted.send(()).is_err() {
                // Gone since the check: the slot is free again.
                give_back(state, waiter.holder);
            }
        }
    }

    fn release(&self, holder: Holder) {
        let mut state = self.state();
        give_back(&mut state, holder);
        self.dispatch(&mut state);
    }

    /// Slots held and waiters (for tests).
    #[cfg(test)]
    fn counts(&self) -> (usize, usize) {
        let state = self.state();
        (self.slots - state.free, state.waiting.len())
    }
}

fn take(state: &mut State, holder: Holder) {
    state.free -= 1;
    match state.held.iter_mut().find(|(h, _)| *h == holder) {
        Some((_, n)) => *n += 1,
        None => state.held.push((holder, 1)),
    }
}

fn give_back(state: &mut State, holder: Holder) {
    state.free += 1;
    if let Some(i) = state.held.iter().position(|(h, _)| *h == holder) {
        state.held[i].1 -= 1;
        if state.held[i].1 == 0 {
            state.held.swap_remove(i);
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.slots.release(self.holder);
    }
}

/// A waiter's side while it waits: dropped after a grant it never took (its future was
/// dropped), it gives the slot back.
struct Pending {
    slots: Arc<FairSlots>,
    holder: Holder,
    rx: Option<oneshot::Receiver<()>>,
}

impl Drop for Pending {
    fn drop(&mut self) {
        if let Some(mut rx) = self.rx.take() {
            let granted = rx.try_recv().is_ok();
            drop(rx);
            if granted {
                self.slots.release(self.holder);
            } else {
                // Out of the queue now: the others' shares may grow.
                let mut state = self.slots.state();
                self.slots.dispatch(&mut state);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn the_last_slot_waits_for_a_client_holding_none() {
        let slots = FairSlots::new(3);
        let a = Some(1);
        let held = [slots.acquire(a).await, slots.acquire(a).await];
        // A third for the same client waits: the last slot is kept.
        let third = tokio::time::timeout(Duration::from_millis(50), slots.acquire(a)).await;
        assert!(third.is_err(), "the last slot went to a client holding two");
        assert_eq!(slots.counts(), (2, 0), "a dropped wait leaves the queue");
        // Another client gets it at once.
        let other = tokio::time::timeout(Duration::from_millis(50), slots.acquire(Some(2)))
            .await
            .expect("a newcomer takes the last slot");
        drop((held, other));
        assert_eq!(slots.counts(), (0, 0));
    }

    #[tokio::test]
    async fn a_freed_slot_goes_to_the_client_holding_fewest() {
        let slots = FairSlots::new(2);
        let first = slots.acquire(Some(1)).await;
        let second = slots.acquire(Some(2)).await;
        // Client 1 asks again first, client 3 after: 3 holds none and goes first.
        let again = tokio::spawn({
            let slots = Arc::clone(&slots);
            async move { slots.acquire(Some(1)).await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        let newcomer = tokio::spawn({
            let slots = Arc::clone(&slots);
            async move { slots.acquire(Some(3)).await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        drop(second);
        let newcomer = tokio::time::timeout(Duration::from_millis(200), newcomer)
            .await
            .expect("the newcomer got the freed slot")
            .expect("task");
        assert!(
            !again.is_finished(),
            "client 1 waits while it holds its share"
        );
        drop((first, newcomer));
        let again = tokio::time::timeout(Duration::from_millis(200), again)
            .await
            .expect("then client 1")
            .expect("task");
        drop(again);
        assert_eq!(slots.counts(), (0, 0));
    }

    #[tokio::test]
    async fn a_lone_client_fills_every_slot_but_the_last() {
        let slots = FairSlots::new(4);
        let mut held = Vec::new();
        for _ in 0..3 {
            held.push(slots.acquire(None).await);
        }
        assert_eq!(slots.counts(), (3, 0));
        assert!(
            tokio::time::timeout(Duration::from_millis(30), slots.acquire(None))
                .await
                .is_err()
        );
        held.pop();
        let _next = tokio::time::timeout(Duration::from_millis(100), slots.acquire(None))
            .await
            .expect("a freed slot is taken again");
    }
}
