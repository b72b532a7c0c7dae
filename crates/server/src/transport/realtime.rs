//! Realtime priority for a UDP receiving thread while it refuses (overload).
//!
//! Refusals must be answered in well under a millisecond, but the thread
//! shares its core with workers busy signing. Under the normal scheduler
//! (EEVDF) a thread woken moments after it last ran is not yet eligible to
//! preempt the running worker and waits for the next tick: up to 4 ms at
//! HZ=250 (BENCHMARKS.md, "Surge"). At SCHED_FIFO priority 1 it runs as soon
//! as it wakes. Only while refusing: then each wake-up does a bounded batch of
//! cheap work and pauses (`udp.rs`), so the thread cannot take its core. The
//! process needs the right to do this (root, CAP_SYS_NICE, or RLIMIT_RTPRIO
//! ≥ 1, e.g. systemd's `LimitRTPRIO=1`); without it the thread stays normal.

use std::sync::atomic::{AtomicBool, Ordering};

/// Said once per process, not once per receiving thread.
static UNAVAILABLE_LOGGED: AtomicBool = AtomicBool::new(false);

/// Switches the calling thread between the normal and the realtime policy.
pub struct RealtimeWhileRefusing {
    /// Configured on, and not yet refused by the kernel.
    allowed: bool,
    active: bool,
}

impl RealtimeWhileRefusing {
    /// Call on the receiving thread: tries the switch once, so whether it is
    /// available is logged at start, not at the first overload.
    pub fn new(enabled: bool) -> Self {
        let mut this = RealtimeWhileRefusing { allowed: enabled, active: false };
        this.set_refusing(true);
        this.set_refusing(false);
        this
    }

    /// Call from the receiving thread at each turn of its loop.
    pub fn set_refusing(&mut self, refusing: bool) {
        if !self.allowed || refusing == self.active {
            return;
        }
        match set_calling_thread_realtime(refusing) {
            Ok(()) => self.active = refusing,
            Err(e) => {
                self.allowed = false;
                if !UNAVAILABLE_LOGGED.swap(true, Ordering::Relaxed) {
                    tracing::info!(
                        "udp: refusals under overload at normal priority ({e}): they may wait for the scheduler \
                         (up to a tick); CAP_SYS_NICE or LimitRTPRIO=1 lets them run at once"
                    );
                }
            }
        }
    }

    #[cfg(test)]
    fn is_active(&self) -> bool {
        self.active
    }
}

/// SCHED_FIFO 1, or back to SCHED_OTHER. Reset on fork: a thread started from
/// this one (tokio's blocking pool may start one) must not inherit realtime.
fn set_calling_thread_realtime(realtime: bool) -> std::io::Result<()> {
    let (policy, priority) = if realtime { (libc::SCHED_FIFO, 1) } else { (libc::SCHED_OTHER, 0) };
    let param = libc::sched_param { sched_priority: priority };
    // SAFETY: `param` is a valid sched_param for the call's duration; pid 0 is
    // the calling thread (Linux scheduling policy is per thread).
    let rc = unsafe { libc::sched_setscheduler(0, policy | libc::SCHED_RESET_ON_FORK, &param) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy_of_calling_thread() -> i32 {
        // SAFETY: no arguments besides pid 0 (the calling thread).
        (unsafe { libc::sched_getscheduler(0) }) & !libc::SCHED_RESET_ON_FORK
    }

    #[test]
    fn realtime_only_while_refusing_and_never_inherited() {
        std::thread::spawn(|| {
            let mut realtime = RealtimeWhileRefusing::new(true);
            assert!(!realtime.is_active(), "the start-up probe must leave the thread normal");
            assert_eq!(policy_of_calling_thread(), libc::SCHED_OTHER);
            realtime.set_refusing(true);
            if !realtime.is_active() {
                // Not permitted here: it must have given up cleanly, stay
                // normal and not retry at every turn.
                assert_eq!(policy_of_calling_thread(), libc::SCHED_OTHER);
                assert!(!realtime.allowed);
                return;
            }
            assert_eq!(policy_of_calling_thread(), libc::SCHED_FIFO);
            let child = std::thread::spawn(policy_of_calling_thread).join().unwrap();
            assert_eq!(child, libc::SCHED_OTHER, "a thread started while refusing inherited realtime");
            realtime.set_refusing(false);
            assert!(!realtime.is_active());
            assert_eq!(policy_of_calling_thread(), libc::SCHED_OTHER);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn switched_off_it_never_changes_the_thread() {
        std::thread::spawn(|| {
            let mut realtime = RealtimeWhileRefusing::new(false);
            realtime.set_refusing(true);
            assert!(!realtime.is_active());
            assert_eq!(policy_of_calling_thread(), libc::SCHED_OTHER);
        })
        .join()
        .unwrap();
    }
}
