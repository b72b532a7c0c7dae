//! Work taken together under load, for reads (read_batch.rs) and writes
//! (write_batch.rs): at most `lanes` statements (or transactions) are in
//! flight at once; what arrives while all lanes are busy waits, and a lane's
//! next round takes the waiting work together. Nothing waits for a batch to
//! fill: work that finds a free lane goes at once, alone.
//!
//! A lane runs in a task of its own (the caller spawns it when [`Lanes::push`]
//! says so), so that a caller who gives up (a timeout) cannot strand the
//! others of its round. A lane is freed under the lock that saw the queue
//! empty, so work queued after that finds it free (no lost wake-up), and
//! freed by its guard should its task panic.

use parking_lot::Mutex;

struct Queue<W> {
    waiting: Vec<W>,
    /// Lanes running now (at most `lanes`).
    busy: usize,
}

pub(crate) struct Lanes<W> {
    lanes: usize,
    queue: Mutex<Queue<W>>,
}

impl<W> Lanes<W> {
    pub(crate) fn new(lanes: usize) -> Lanes<W> {
        Lanes { lanes: lanes.max(1), queue: Mutex::new(Queue { waiting: Vec::new(), busy: 0 }) }
    }

    /// Queue `work`; true if a lane was free and is now reserved: the caller
    /// must then run it (in a task of its own) through [`Lanes::reserved`].
    pub(crate) fn push(&self, work: W) -> bool {
        let mut q = self.queue.lock();
        q.waiting.push(work);
        let free = q.busy < self.lanes;
        q.busy += usize::from(free);
        free
    }

    /// The lane a [`Lanes::push`] that returned true reserved (once for each).
    pub(crate) fn reserved(&self) -> Lane<'_, W> {
        Lane { lanes: self, held: true }
    }
}

/// A busy lane.
pub(crate) struct Lane<'a, W> {
    lanes: &'a Lanes<W>,
    held: bool,
}

impl<W> Lane<'_, W> {
    /// The next round: what `take` picks of the waiting work (in the order it
    /// came), or `None` once nothing waits, the lane then freed.
    pub(crate) fn next(&mut self, take: impl FnOnce(&mut Vec<W>) -> Vec<W>) -> Option<Vec<W>> {
        let mut q = self.lanes.queue.lock();
        if q.waiting.is_empty() {
            q.busy -= 1;
            self.held = false;
            return None;
        }
        Some(take(&mut q.waiting))
    }
}

impl<W> Drop for Lane<'_, W> {
    fn drop(&mut self) {
        if self.held {
            self.lanes.queue.lock().busy -= 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lane_takes_what_waits_and_frees_itself_when_nothing_does() {
        let lanes: Lanes<u32> = Lanes::new(1);
        assert!(lanes.push(1), "a free lane");
        let mut lane = lanes.reserved();
        assert!(!lanes.push(2), "one lane: the second waits");
        assert_eq!(lane.next(std::mem::take), Some(vec![1, 2]));
        assert!(!lanes.push(3), "the lane is still busy");
        assert_eq!(lane.next(|w| w.drain(..1).collect()), Some(vec![3]));
        assert_eq!(lane.next(std::mem::take), None);
        assert!(lanes.push(4), "freed once nothing waited");
        drop(lanes.reserved()); // as by a panic: the guard frees it
        assert!(lanes.push(5));
    }
}
