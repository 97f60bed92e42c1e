//! How many cases run at once when `COMMCHECK_JOBS` does not say: as many
//! as the machine has room for. Most cases spend their time waiting (work
//! kept pending for a late peer, a bounded wait running out, a release
//! slack), a few computing (the value checks' size sweeps). A case always
//! starts while fewer cases run than the machine has CPUs; beyond that, one
//! more starts only while the machine's CPUs were idle for at least one CPU's
//! worth of the last look (the running cases wait, so a waiting one costs
//! nothing), up to [`LIMIT`]. On a loaded machine nothing is idle and the run
//! keeps to one case per CPU, as a fixed count would. With the adaptive
//! count, a case's world sizes run at once, and the cases that run the most
//! ranks in all start first (`cli::start_order`); a fixed count runs each
//! case's worlds in turn, so it bounds the worlds a backend has at a time.
//!
//! Verdicts do not depend on the count: every bound a check rests on counts
//! only time in which the backend could run (see the case watchdog in
//! `kit/EVIDENCE.md`).

use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// The most cases run at once by the adaptive count.
pub(crate) const LIMIT: usize = 32;

/// How long a look at the machine's idle time lasts at least.
const LOOK: Duration = Duration::from_millis(50);

/// The cases running, and the gate a new one waits at.
pub(crate) struct Admission {
    /// `Some(n)`: exactly `n` at once (`COMMCHECK_JOBS`); `None`: adaptive.
    fixed: Option<usize>,
    cpus: usize,
    state: Mutex<State>,
    changed: Condvar,
}

struct State {
    running: usize,
    /// The machine's idle and total CPU time at the start of the current
    /// look (`/proc/stat`), and when that look started.
    look: Option<(CpuTimes, Instant)>,
    /// Whether the last whole look found a CPU's worth idle.
    idle: bool,
}

/// Idle and total jiffies of all CPUs, and how many CPUs there are.
#[derive(Clone, Copy)]
struct CpuTimes {
    idle: u64,
    total: u64,
    cpus: u64,
}

/// A running case: dropping it lets the next one in.
pub(crate) struct Admitted<'a>(&'a Admission);

impl Drop for Admitted<'_> {
    fn drop(&mut self) {
        let mut state = self.0.state.lock().unwrap_or_else(|p| p.into_inner());
        state.running -= 1;
        self.0.changed.notify_all();
    }
}

impl Admission {
    /// `COMMCHECK_JOBS`' count when it is set (`fixed`), else adaptive.
    pub(crate) fn new(fixed: Option<usize>) -> Self {
        let cpus = std::thread::available_parallelism().map_or(1, usize::from);
        Self {
            fixed,
            cpus,
            state: Mutex::new(State {
                running: 0,
                look: None,
                idle: false,
            }),
            changed: Condvar::new(),
        }
    }

    /// How many workers to start: each takes a case when admitted.
    pub(crate) fn workers(&self) -> usize {
        self.fixed.unwrap_or(LIMIT.max(self.cpus))
    }

    /// Waits until another case may start.
    pub(crate) fn enter(&self) -> Admitted<'_> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            let room = match self.fixed {
                Some(jobs) => state.running < jobs,
                None => {
                    state.running < self.cpus || (state.running < LIMIT && idle_cpu(&mut state))
                }
            };
            if room {
                state.running += 1;
                return Admitted(self);
            }
            state = self
                .changed
                .wait_timeout(state, LOOK)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }
}

/// Whether the machine's CPUs were idle for at least one CPU's worth of the
/// last whole look of [`LOOK`] or more; each call past a look's end closes it
/// and starts the next, so the answer follows what the running cases do.
/// Without `/proc/stat` (not Linux): never, so the count stays at one case
/// per CPU.
fn idle_cpu(state: &mut State) -> bool {
    let Some(now) = cpu_times() else {
        return false;
    };
    match state.look {
        Some((then, started)) if started.elapsed() >= LOOK => {
            let total = now.total.saturating_sub(then.total);
            let idle = now.idle.saturating_sub(then.idle);
            state.idle = total > 0 && idle * now.cpus >= total;
            state.look = Some((now, Instant::now()));
        }
        Some(_) => {}
        None => state.look = Some((now, Instant::now())),
    }
    state.idle
}

/// The machine's idle and total CPU time (`cpu` line of `/proc/stat`).
fn cpu_times() -> Option<CpuTimes> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().find(|line| line.starts_with("cpu "))?;
    let fields: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|field| field.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal ...
    let idle = fields.get(3)? + fields.get(4).copied().unwrap_or(0);
    let cpus = stat
        .lines()
        .filter(|line| line.starts_with("cpu") && !line.starts_with("cpu "))
        .count()
        .max(1) as u64;
    Some(CpuTimes {
        idle,
        total: fields.iter().take(8).sum(),
        cpus,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fixed_count_admits_that_many_at_once() {
        let admission = Admission::new(Some(2));
        assert_eq!(admission.workers(), 2);
        let first = admission.enter();
        let _second = admission.enter();
        assert_eq!(admission.state.lock().unwrap().running, 2);
        drop(first);
        let _third = admission.enter();
        assert_eq!(admission.state.lock().unwrap().running, 2);
    }

    #[test]
    fn the_adaptive_count_admits_one_case_per_cpu_at_once() {
        let admission = Admission::new(None);
        let admitted: Vec<_> = (0..admission.cpus).map(|_| admission.enter()).collect();
        assert_eq!(admitted.len(), admission.cpus);
        assert!(admission.workers() >= admission.cpus);
    }
}
