//! Cases: one named test per (invariant, subject) pair, such as `CAN-5::all_reduce_sum`.

use crate::check::Check;
use crate::harness::{Harness, Instruments};
use crate::matrix::{Driver, Subject};
use crate::results::Evidence;
use crate::spec::Invariant;
use crate::world::{RankCtx, Script};

/// How a suite row runs.
pub(crate) enum Body<H: Harness> {
    /// On the completion matrix: the subject script runs on rank 0 with the
    /// subject's driver, the late-peer role on the other ranks.
    Matrix(fn(&RankCtx<'_, H>, Driver<H>) -> Check),
    /// [`Body::Matrix`], and for collectives also on a world of one more
    /// rank, whose extra member (rank 1) joins each round as soon as the
    /// subject submitted: the exchange is part done while the subject's work
    /// is pending (a deadline falls in the middle of it).
    MatrixPartDone(fn(&RankCtx<'_, H>, Driver<H>) -> Check),
    /// A script of its own, on `ranks` ranks.
    Direct {
        ranks: usize,
        script: fn(&RankCtx<'_, H>) -> Check,
    },
    /// A script of its own that keeps lanes busy with a `Blocker`: on two
    /// ranks where a late peer can feed the blocker (rank 1 plays that
    /// peer), else on one.
    Blocks(fn(&RankCtx<'_, H>) -> Check),
    /// A script of its own, run on a fresh world of each size in turn
    /// (the case fails at the first size that fails).
    Sizes {
        sizes: &'static [usize],
        script: fn(&RankCtx<'_, H>) -> Check,
    },
}

/// One row of a suite: an invariant checked on every subject it applies to.
pub(crate) struct Row<H: Harness> {
    pub(crate) id: &'static str,
    pub(crate) applies: fn(Subject) -> bool,
    pub(crate) requires: Instruments,
    /// Timing-sensitive: a failure is retried once; fail-then-pass is `flaky`.
    pub(crate) timing: bool,
    /// Instruments without which a part of the check cannot run: lacking
    /// any, the case can fail but never pass, so it is listed ignored (a
    /// static not-supported) and runs only when asked (`--include-ignored`).
    pub(crate) pass_needs: Instruments,
    pub(crate) body: Body<H>,
}

/// One named case.
pub struct Case<H: Harness> {
    pub(crate) invariant: &'static Invariant,
    pub(crate) subject: Subject,
    /// World sizes to run the script on, in turn.
    pub(crate) worlds: Vec<usize>,
    pub(crate) timing: bool,
    /// What the verdict rests on.
    pub(crate) evidence: Evidence,
    /// The instruments the case needs on this subject.
    pub(crate) needs: Instruments,
    /// `Err(reason)`: the case is not supported and will not run.
    pub(crate) script: Result<Script<H>, String>,
    /// `Some(reason)`: the case runs, but a part of it cannot (see
    /// [`Row::pass_needs`]): its best verdict is not-supported, so runners
    /// list it ignored.
    pub(crate) capped: Option<String>,
    /// Not-supported because the backend does not claim what the case
    /// exercises (an operation, or the one cancellation mode of CAN-5 or
    /// CAN-6): the case is not part of what the backend must pass.
    pub(crate) unclaimed: bool,
    /// The case's second regime: after each world passes at the standard
    /// submissions, a fresh world runs it again at this size.
    pub(crate) large: Option<Large>,
}

/// A matrix case's regime past the harness's protocol boundaries: the
/// operation's submissions carry `elements` per rank, where a backend that
/// switches protocols with message size (eager below a threshold,
/// rendezvous and chunked above, as MPI, UCX and NCCL do) takes its other
/// path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Large {
    /// Elements per rank (`f32`).
    pub(crate) elements: usize,
    /// Which boundary they pass, for messages.
    pub(crate) why: String,
    /// Whether the regime also runs a world whose subject is the member
    /// whose part needs no peer (RET and EXC-2 cases on `send_receive`, the
    /// sender, and `broadcast`, the root): a rendezvous send stays pending
    /// until its receiver posts, and must retain what it reads until then;
    /// an eager one may end before, never before its own part is done.
    pub(crate) sender: bool,
    /// The other dtypes it runs in too (RET cases), each with its elements
    /// per rank: those the harness offers whose protocol boundaries differ
    /// from `f32`'s (one per distinct set of boundaries), just past their
    /// own largest boundary.
    pub(crate) dtypes: Vec<(crate::dtype::Dtype, usize)>,
}

impl<H: Harness> Case<H> {
    /// The case's name, e.g. `RET-3::all_reduce_sum`.
    pub fn name(&self) -> String {
        format!("{}::{}", self.invariant.id, self.subject)
    }

    /// The invariant under test.
    pub fn invariant(&self) -> &'static Invariant {
        self.invariant
    }

    /// What the case exercises.
    pub fn subject(&self) -> Subject {
        self.subject
    }

    /// Whether the backend does not claim what the case exercises: an
    /// operation, or the cancellation mode CAN-5 (NativeCancel) or CAN-6
    /// (quarantine) is about. Such a case is not-supported and is no
    /// must-pass case of a certification; a case not-supported for a missing
    /// instrument or world size still is.
    pub fn unclaimed(&self) -> bool {
        self.unclaimed
    }

    /// Why the case cannot run, when it cannot.
    pub fn unsupported(&self) -> Option<&str> {
        self.script.as_ref().err().map(String::as_str)
    }

    /// Why the case is not-supported before it runs: it cannot run, or a part
    /// of it cannot (it can then fail, never pass). Runners list such a case
    /// ignored, with this reason.
    pub fn not_supported_before_running(&self) -> Option<&str> {
        self.unsupported().or(self.capped.as_deref())
    }

    /// What the verdict rests on at least: `instrumented` when the case needs
    /// an instrument of the harness, `black-box` otherwise. (A result is
    /// `instrumented` also when the case used an optional instrument.)
    pub fn evidence(&self) -> Evidence {
        self.evidence
    }

    /// The instruments the case needs on its subject (its row's own, and
    /// what keeps the subject's work pending: the hold for local subjects of
    /// a harness that has one, nothing for late peers and lazy work).
    pub fn needs(&self) -> Instruments {
        self.needs
    }

    /// The world sizes the case runs on, in turn.
    pub fn worlds(&self) -> &[usize] {
        &self.worlds
    }
}
