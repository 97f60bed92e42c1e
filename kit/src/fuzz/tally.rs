//! How many of a fuzz target's inputs decoded: the decoder turns any bytes
//! into an input or a clean rejection ([`super::Rejection`]), and a rejected
//! input runs nothing, so a vendor needs to see when random bytes are being
//! rejected (a swarm of inputs that never reach the backend looks like a
//! fast, clean run).
//!
//! Every `run` function counts its input ([`super::prepare`]) and the time
//! its check took (the kit, the harness and the backend, from decoding to
//! the world's teardown); the counts go to stderr beside libFuzzer's own
//! status lines, at 256 inputs, every power of two after it, and every
//! [`EVERY`] at least: `commcheck sequence: 8192 inputs, 8101 decoded (98.9
//! %), 91 rejected; checks 802 µs per input (1247 inputs/s)`. The rate is
//! what the target itself costs; libFuzzer's exec/s is lower by what
//! libFuzzer spends between inputs (mutation, coverage bookkeeping, corpus
//! files).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::input::Target;
use crate::model::lock;

/// The longest gap between two lines of counts.
const EVERY: Duration = Duration::from_secs(5);

/// Inputs one target saw, and how many of them decoded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DecodedCount {
    /// Inputs given to the target's `run` function in this process.
    pub inputs: u64,
    /// Those that decoded to an input (the rest were rejected).
    pub decoded: u64,
    /// Wall time the target's checks of those inputs took, from decoding to
    /// the end of the run (the world's teardown included).
    pub checking: Duration,
}

impl DecodedCount {
    /// Inputs rejected by the decoder.
    pub fn rejected(self) -> u64 {
        self.inputs - self.decoded
    }
}

impl std::fmt::Display for DecodedCount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let share = if self.inputs == 0 {
            0.0
        } else {
            100.0 * self.decoded as f64 / self.inputs as f64
        };
        write!(
            f,
            "{} inputs, {} decoded ({share:.1} %), {} rejected",
            self.inputs,
            self.decoded,
            self.rejected()
        )?;
        let seconds = self.checking.as_secs_f64();
        if self.inputs > 0 && seconds > 0.0 {
            write!(
                f,
                "; checks {:.0} µs per input ({:.0} inputs/s)",
                1e6 * seconds / self.inputs as f64,
                self.inputs as f64 / seconds
            )?;
        }
        Ok(())
    }
}

struct Counter {
    inputs: AtomicU64,
    decoded: AtomicU64,
    /// Nanoseconds of checking ([`Checking`]).
    nanos: AtomicU64,
}

static COUNTS: [Counter; 4] = [const {
    Counter {
        inputs: AtomicU64::new(0),
        decoded: AtomicU64::new(0),
        nanos: AtomicU64::new(0),
    }
}; 4];

/// When counts were last printed.
static PRINTED: Mutex<Option<Instant>> = Mutex::new(None);

fn slot(target: Target) -> &'static Counter {
    let index = Target::ALL
        .iter()
        .position(|t| *t == target)
        .unwrap_or_default();
    &COUNTS[index]
}

/// The counts of `target`'s inputs in this process so far.
pub fn decoded(target: Target) -> DecodedCount {
    let counter = slot(target);
    DecodedCount {
        inputs: counter.inputs.load(Ordering::Relaxed),
        decoded: counter.decoded.load(Ordering::Relaxed),
        checking: Duration::from_nanos(counter.nanos.load(Ordering::Relaxed)),
    }
}

/// One input's check, timed from [`super::prepare`] until this is dropped
/// (the end of the target's `run` function, or the unwinding of a
/// failure): the time is added to the target's [`DecodedCount::checking`].
#[must_use = "the input's check is timed until this is dropped: keep it for the whole check"]
#[derive(Debug)]
pub struct Checking {
    target: Target,
    started: Instant,
}

impl Checking {
    pub(super) fn start(target: Target) -> Self {
        Self {
            target,
            started: Instant::now(),
        }
    }
}

impl Drop for Checking {
    fn drop(&mut self) {
        let nanos = u64::try_from(self.started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        slot(self.target).nanos.fetch_add(nanos, Ordering::Relaxed);
    }
}

/// Counts one input of `target`, and prints the counts when it is time.
pub(super) fn count(target: Target, decoded_ok: bool) {
    let counter = slot(target);
    if decoded_ok {
        counter.decoded.fetch_add(1, Ordering::Relaxed);
    }
    let inputs = counter.inputs.fetch_add(1, Ordering::Relaxed) + 1;
    let now = Instant::now();
    let mut printed = lock(&PRINTED);
    let due = (inputs >= 256 && inputs.is_power_of_two())
        || printed.is_some_and(|at| now.duration_since(at) >= EVERY);
    if printed.is_none() {
        *printed = Some(now);
    }
    if due {
        *printed = Some(now);
        eprintln!("commcheck {target}: {}", decoded(target));
    }
}
