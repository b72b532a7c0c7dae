//! Stopping the server in order: first no new work (listeners and background
//! loops stop, connections finish the request they are on), then, after a grace
//! period, whatever is left is cut; the store is closed only after every task
//! that could use it has ended ([`crate::Server::shutdown`]).
//!
//! Tasks spawned through a [`Stop`] are counted: each holds a sender of a
//! channel nobody sends on, and the owner's receiver ends when the last one is
//! dropped (tokio's graceful-shutdown pattern), threads included.

use std::future::Future;
use std::time::Duration;
use tokio::sync::{mpsc, watch};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Phase {
    Serving,
    /// No new connections, datagrams or background work; requests in flight finish.
    Draining,
    /// Whatever still runs is dropped at its next await.
    Cut,
}

/// Held by a counted task or thread until it ends.
pub struct Alive {
    _counted: mpsc::Sender<()>,
}

/// What listeners and tasks watch to know when to stop; cheap to clone.
#[derive(Clone)]
pub struct Stop {
    phase: watch::Receiver<Phase>,
    // Weak: holding a `Stop` (e.g. in an acceptor) must not keep the owner waiting.
    alive: mpsc::WeakSender<()>,
}

impl Stop {
    /// Resolves once the server stops taking new work.
    pub async fn draining(&self) {
        self.reached(Phase::Draining).await
    }

    pub fn is_draining(&self) -> bool {
        *self.phase.borrow() >= Phase::Draining
    }

    async fn cut(&self) {
        self.reached(Phase::Cut).await
    }

    async fn reached(&self, wanted: Phase) {
        let mut phase = self.phase.clone();
        if phase.wait_for(|p| *p >= wanted).await.is_err() {
            // The owner was dropped without a shutdown: run on until the runtime ends.
            std::future::pending::<()>().await;
        }
    }

    /// Counted until dropped; None once the owner has stopped counting.
    pub fn alive(&self) -> Option<Alive> {
        self.alive.upgrade().map(|s| Alive { _counted: s })
    }

    /// Run work that was accepted (a connection, a request): it may finish
    /// during the grace period and is dropped when that ends.
    pub fn spawn(&self, work: impl Future<Output = ()> + Send + 'static) {
        self.spawn_on(&tokio::runtime::Handle::current(), work)
    }

    /// [`Self::spawn`] from outside the runtime (a UDP thread).
    pub fn spawn_on(&self, runtime: &tokio::runtime::Handle, work: impl Future<Output = ()> + Send + 'static) {
        let Some(alive) = self.alive() else { return };
        let stop = self.clone();
        runtime.spawn(async move {
            let _alive = alive;
            tokio::select! {
                _ = work => {}
                _ = stop.cut() => {}
            }
        });
    }

    /// Run a loop that only ever waits for more to do (an accept loop, a
    /// sweeper): it is dropped as soon as draining starts.
    pub fn spawn_until_draining(&self, work: impl Future<Output = ()> + Send + 'static) -> tokio::task::JoinHandle<()> {
        let alive = self.alive();
        let stop = self.clone();
        tokio::spawn(async move {
            let _alive = alive;
            tokio::select! {
                _ = work => {}
                _ = stop.draining() => {}
            }
        })
    }
}

/// The owner's side: starts draining, waits, cuts.
pub struct Shutdown {
    phase: watch::Sender<Phase>,
    alive: Option<mpsc::Sender<()>>,
    ended: mpsc::Receiver<()>,
}

impl Default for Shutdown {
    fn default() -> Self {
        let (phase, _) = watch::channel(Phase::Serving);
        let (alive, ended) = mpsc::channel(1);
        Shutdown { phase, alive: Some(alive), ended }
    }
}

impl Shutdown {
    pub fn stop(&self) -> Stop {
        let alive = self.alive.as_ref().map(mpsc::Sender::downgrade).expect("counting until run");
        Stop { phase: self.phase.subscribe(), alive }
    }

    /// Drain, give what is in flight `grace` to finish, cut the rest, and
    /// return once every counted task and thread has ended. True if nothing had to be cut.
    pub async fn run(mut self, grace: Duration) -> bool {
        self.phase.send_replace(Phase::Draining);
        self.alive = None;
        let finished = tokio::time::timeout(grace, self.ended.recv()).await.is_ok();
        self.phase.send_replace(Phase::Cut);
        if !finished {
            self.ended.recv().await;
        }
        finished
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    #[tokio::test]
    async fn work_in_flight_finishes_within_the_grace_and_loops_stop_at_once() {
        let shutdown = Shutdown::default();
        let stop = shutdown.stop();
        let done = Arc::new(AtomicBool::new(false));
        let d = done.clone();
        stop.spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            d.store(true, Ordering::SeqCst);
        });
        let looping = stop.spawn_until_draining(std::future::pending());
        assert!(shutdown.run(Duration::from_secs(10)).await, "nothing cut");
        assert!(done.load(Ordering::SeqCst));
        assert!(looping.is_finished());
        assert!(stop.is_draining());
        assert!(stop.alive().is_none(), "nothing new is counted after the end");
    }

    #[tokio::test]
    async fn work_past_the_grace_is_cut_and_still_waited_for() {
        let shutdown = Shutdown::default();
        let stop = shutdown.stop();
        stop.spawn(std::future::pending());
        let thread_alive = stop.alive().unwrap();
        let thread = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            drop(thread_alive);
        });
        let started = std::time::Instant::now();
        assert!(!shutdown.run(Duration::from_millis(20)).await, "the pending task was cut");
        assert!(started.elapsed() >= Duration::from_millis(100), "waited for the thread");
        thread.join().unwrap();
    }
}
