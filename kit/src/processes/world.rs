//! One world run across the processes: this process runs its rank (when the
//! world includes it), then every process sends its outcome to every other,
//! and all of them combine the same outcomes into the same [`WorldEnd`] (so
//! every process reaches the same verdict and retries in step).

use std::cell::Cell;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::control::{Control, End, Message, Outcome, Stop};
use crate::harness::Harness;
use crate::world::{overrun, run_ranks, Ranks, Run, Script, Signals, WorldEnd};

/// Runs a world of `ranks` ranks on processes `0..ranks` (see the module docs).
pub(crate) fn run_world_across<H: Harness>(
    control: &Arc<Control>,
    harness: Arc<H>,
    ranks: usize,
    seed: u64,
    (limit, grace): (Duration, Duration),
    script: Script<H>,
    run: &Run,
) -> WorldEnd {
    let epoch = control.next_epoch();
    let me = control.rank();
    let marks = run.journal.marks();
    let started = Instant::now();
    let end = if me < ranks {
        let relaying = Arc::clone(control);
        let signals = Arc::new(Signals::relayed(Box::new(move |name| {
            relaying.signal(epoch, ranks, name)
        })));
        control.register(epoch, Arc::clone(&signals));
        let announcing = Arc::clone(control);
        let world = Ranks {
            size: ranks,
            local: me..me + 1,
            signals,
            announce: Some(Box::new(move || announcing.progress(epoch, ranks))),
        };
        let abandoned = Cell::new(false);
        let interrupt = || {
            let elsewhere = control.ended_elsewhere(epoch, ranks);
            abandoned.set(elsewhere);
            // The value only ends the wait; this process's end is `Abandoned`.
            elsewhere.then(|| WorldEnd::TimedOut {
                ranks: Vec::new(),
                stacks: Vec::new(),
            })
        };
        let end = run_ranks(harness, &world, seed, limit, script, run, &interrupt);
        control.unregister(epoch);
        if abandoned.get() {
            End::Abandoned
        } else {
            local_end(end)
        }
    } else {
        End::Absent
    };
    control.broadcast(&Message::Outcome {
        epoch,
        outcome: Outcome {
            end: end.clone(),
            journal: run.journal.since(marks),
        },
    });
    // A rank still moving may run to the ceiling (see `world::overrun`).
    let deadline = started + overrun(limit) + grace;
    let ends: Vec<Result<End, Stop>> = (0..control.size())
        .map(|from| {
            if from == me {
                return Ok(end.clone());
            }
            let message = control.wait(
                from,
                deadline,
                |m| matches!(m, Message::Outcome { epoch: sent, .. } if *sent == epoch),
            )?;
            let Message::Outcome { outcome, .. } = message else {
                return Ok(End::Absent);
            };
            run.journal.merge(outcome.journal);
            Ok(outcome.end)
        })
        .collect();
    combine(control, ranks, grace, ends)
}

/// This process's end, from its local supervision (one local rank).
fn local_end(end: WorldEnd) -> End {
    match end {
        WorldEnd::Finished(mut checks) => End::Finished(checks.pop().unwrap_or(Ok(()))),
        WorldEnd::Crashed { message, .. } => End::Crashed(message),
        WorldEnd::TimedOut { stacks, .. } => End::TimedOut(format!(
            "on host {}: {}",
            crate::build::hostname(),
            stacks.join("; ")
        )),
        WorldEnd::Overran { ran, idle, .. } => End::Overran {
            ran_ms: millis(ran),
            idle_ms: millis(idle),
        },
        WorldEnd::Blocked {
            what,
            invariant,
            limit,
            ..
        } => End::Blocked {
            what,
            invariant,
            limit_ms: millis(limit),
        },
    }
}

/// Rank `rank`'s mesh address: where its process runs.
fn address(control: &Control, rank: usize) -> &str {
    control.addresses().get(rank).map_or("?", String::as_str)
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// The world's end from every process's end, the same on every process: the
/// first process (in rank order) that was lost, crashed or blocked decides
/// it; then one that overran, one that timed out; otherwise every rank's
/// check, in rank order. A lost or
/// silent process also breaks the process world: no later case can run.
fn combine(
    control: &Control,
    ranks: usize,
    grace: Duration,
    ends: Vec<Result<End, Stop>>,
) -> WorldEnd {
    let mut checks = Vec::with_capacity(ranks);
    let (mut timed_out, mut stacks) = (Vec::new(), Vec::new());
    let mut overran = None;
    for (rank, end) in ends.into_iter().enumerate() {
        match end {
            Err(Stop::Lost(reason)) => {
                let message = format!(
                    "crashed: its process (at {}) died mid-case ({reason})",
                    address(control, rank)
                );
                control.break_with(format!("rank {rank} {message}"));
                return WorldEnd::Crashed { rank, message };
            }
            Err(Stop::Timeout) => {
                control.break_with(format!(
                    "the process of rank {rank} sent no outcome within {grace:?} (COMMCHECK_GRACE_MS) past the \
                     world's ceiling"
                ));
                return WorldEnd::TimedOut {
                    ranks: vec![rank],
                    stacks: vec![format!(
                        "at {}: its process sent nothing, so where it was is unknown",
                        address(control, rank)
                    )],
                };
            }
            Ok(End::Crashed(message)) => return WorldEnd::Crashed { rank, message },
            Ok(End::Blocked {
                what,
                invariant,
                limit_ms,
            }) => {
                return WorldEnd::Blocked {
                    rank,
                    what,
                    invariant,
                    limit: Duration::from_millis(limit_ms),
                }
            }
            Ok(End::TimedOut(stack)) => {
                timed_out.push(rank);
                stacks.push(stack);
            }
            Ok(End::Overran { ran_ms, idle_ms }) => {
                overran.get_or_insert(WorldEnd::Overran {
                    ranks: vec![rank],
                    ran: Duration::from_millis(ran_ms),
                    idle: Duration::from_millis(idle_ms),
                });
            }
            Ok(End::Finished(check)) => checks.push(check),
            Ok(End::Absent | End::Abandoned) => {}
        }
    }
    // A rank still moving at the ceiling means the world was not hung, even
    // where a rank waiting for it saw nothing move in its own process.
    if let Some(overran) = overran {
        return overran;
    }
    if !timed_out.is_empty() || checks.len() < ranks {
        // An abandoned rank with no crash anywhere cannot happen; were it
        // to, the world did not finish within the watchdog.
        return WorldEnd::TimedOut {
            ranks: timed_out,
            stacks,
        };
    }
    WorldEnd::Finished(checks)
}
