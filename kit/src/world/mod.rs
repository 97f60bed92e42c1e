//! Worlds: `n` rank threads per case, each building its own rank state, with
//! host-side signals for choreography (a late peer joins when told to).

//!
//! Layers, lowest first: `sample` (what the process did), `watch` (the case watchdog, the block guard and
//! the stopwatch of poll bounds), `end` (how a world ended), `signals` (what
//! the ranks share), `rank` (one rank's view, [`RankCtx`]), `run` (running a
//! world under the watchdog).

mod end;
mod rank;
mod run;
mod sample;
mod signals;
mod watch;

pub(crate) use end::{where_they_were, WorldEnd};
pub use rank::RankCtx;
pub(crate) use rank::{note_completion_report, Script};
pub use run::run_script;
pub(crate) use run::{panic_message, run_ranks, run_world, Ranks, Run};
pub(crate) use sample::{across_processes, remote_progress, starved};
pub(crate) use signals::{Journal, JournalPart, Signals};
pub use watch::eventually;
pub(crate) use watch::{
    guarded, inside, overrun, pause, polled, progressed, prompt, Stopwatch, SETUP,
};
