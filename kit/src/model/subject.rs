//! Rank 0's script, whatever runs it: every step of the sequence through
//! the step executor, then the final drain; the first breach becomes the
//! [`Divergence`], with the step index and operation attached. Where rank 0
//! is goes to the driver before each step ([`Progress`]), so that a hang can
//! be blamed on the step that hung.

use std::sync::Arc;

use super::blame::{hang_hint, Breach};
use super::op::Op;
use super::outcome::{Divergence, Options, Stats};
use super::plan::Plan;
use super::runner::Runner;
use super::scheduler::{Progress, Scheduler};
use crate::harness::Harness;
use crate::world::RankCtx;

/// Tells the peer rank 0 is done however rank 0 leaves (even unwinding).
struct Done<'p>(&'p Plan);

impl Drop for Done<'_> {
    fn drop(&mut self) {
        self.0.done();
    }
}

/// Rank 0: every step, then the final drain. `at` hears where rank 0 is
/// before each step and the drain.
pub(crate) fn subject<H: Harness>(
    ctx: &RankCtx<'_, H>,
    ops: &[Op],
    options: Options,
    scheduler: Arc<dyn Scheduler>,
    plan: &Plan,
    at: &dyn Fn(Progress),
) -> Result<Stats, Divergence> {
    let _done = Done(plan);
    let mut runner = Runner::new(ctx, options, plan, scheduler);
    let diverged = |runner: &mut Runner<'_, '_, H>, step, op, breach: Breach| {
        runner.abandon();
        Err(Divergence {
            step,
            op,
            id: breach.id,
            message: breach.message,
        })
    };
    for (step, &op) in ops.iter().enumerate() {
        at(Progress::at(step, Some(op), hang_hint(op)));
        if let Err(breach) = runner.step(op) {
            return diverged(&mut runner, step, Some(op), breach);
        }
    }
    at(Progress::at(ops.len(), None, Some("EXC-4")));
    match runner.drain() {
        Ok(()) => Ok(runner.stats),
        Err(breach) => diverged(&mut runner, ops.len(), None, breach),
    }
}
