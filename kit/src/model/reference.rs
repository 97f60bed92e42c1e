//! The reference model: for every submission, what its work and resources
//! must be after each step, derived from what the sequence did to it.
//!
//! The model is three-valued about completion. A submission is
//! - **blocked** when it cannot have finished: its own hold is not released,
//!   a hold that was active on its lane when it was submitted is not released
//!   (the hold instrument's contract), its late peer has not joined (rank 1
//!   joins rounds in order, so an earlier unreleased round blocks later ones)
//!   while its result needs the peer's part, or it is ordered after a
//!   producer that is itself blocked (SUB-3). A member whose part needs no
//!   peer (a broadcast root: its result is its own input) may complete as
//!   soon as its own part is done, before its peers join, as an eager
//!   protocol does: nothing in the contract makes it wait for members its
//!   result does not need, so the model never calls it blocked by a peer;
//! - **due** when it will finish without further action: its own cause and
//!   every hold on its lane are released, every earlier submission on its
//!   lane, every producer it is ordered after and every earlier collective
//!   round are due (a conservative reading: lanes are treated as in-order
//!   queues and the late peer's rounds as one in-order queue);
//! - **unsettled** otherwise: nothing is asserted about timing.
//!
//! Orthogonally, a submission **may fail** when a fault was injected into it,
//! when it follows a faulted submission on its lane, when it is ordered after
//! work that may fail or was torn down, or when it is *doomed*: a collective
//! round submitted after the group was poisoned (a collective natively
//! cancelled or faulted on rank 0; the model then stops submitting
//! collectives and never lets the peer join later rounds). Doomed work is
//! never blocked either: it may meet a stale contribution of the cancelled
//! round and complete. Work that may fail is still held to every retention
//! rule while it is live.

use crate::matrix::Subject;

/// How a submission is kept pending.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Via {
    /// The hold instrument on its lane, taken just before it was submitted.
    Hold,
    /// Its late peer (rank 1) joins when the model releases its round.
    LatePeer,
    /// Nothing (local work on a harness without a hold instrument).
    Unheld,
}

/// The most the caller has learnt about a submission's end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Seen {
    /// Nothing conclusive.
    Nothing,
    /// Success: `is_complete` said `Ok(true)`, `wait` `Ok(())`, or
    /// `wait_bounded` `Completed`.
    Completed,
    /// Native teardown finished: `wait_bounded` under `NativeCancel` returned
    /// `DeadlineExceeded` or `Err` (CAN-5, CAN-7).
    TornDown,
}

/// Where the caller's completion handle is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HandleState {
    /// Held by the caller.
    Held,
    /// Dropped by [`super::Op::DropCompletion`].
    Dropped,
    /// Consumed by `wait_bounded`.
    Consumed,
}

/// Why a blocked submission cannot have finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reason {
    /// A hold on its lane (its own, or one active when it was submitted).
    Hold,
    /// Its late peer has not joined its round.
    Peer,
    /// It is ordered after submission `producer`, which cannot have completed.
    Order { producer: usize },
}

/// Everything the model tracks about one submission.
#[derive(Debug, Clone)]
pub(crate) struct Record {
    pub(crate) subject: Subject,
    pub(crate) lane: usize,
    pub(crate) via: Via,
    /// Collective round (index into [`Model::rounds`]).
    pub(crate) round: Option<usize>,
    /// Its result needs the late peer's part (false for a broadcast root):
    /// an unjoined round blocks it.
    pub(crate) needs_peer: bool,
    pub(crate) faulted: bool,
    /// The contract says this work must fail (an out-of-range root, a
    /// mismatched header): the SPEC ID its success would violate.
    pub(crate) must_fail: Option<&'static str>,
    /// Submitted on a lane after a faulted submission.
    pub(crate) lane_tainted: bool,
    /// Its own hold / late peer was released.
    pub(crate) released: bool,
    /// Holds (by submission) active on its lane when it was submitted.
    pub(crate) holds_at_submit: Vec<usize>,
    /// Producers it is ordered after (`order_after` on its lane before it).
    pub(crate) after: Vec<usize>,
    pub(crate) seen: Seen,
    /// `is_complete` itself returned `Ok(true)` (EXC-3 rather than EXC-5).
    pub(crate) said_complete: bool,
    /// An error was reported by `is_complete`, `wait` or `wait_bounded`.
    pub(crate) error_seen: bool,
    pub(crate) handle: HandleState,
    /// Consumed by `wait_bounded` under quarantine while its work was live.
    pub(crate) quarantined: bool,
    /// `wait_bounded` returned `Err`.
    pub(crate) bounded_error: bool,
    /// The caller still holds its output tensors.
    pub(crate) outputs_held: bool,
}

/// One executor lane of rank 0.
#[derive(Debug, Clone, Default)]
pub(crate) struct Lane {
    /// Producers every later submission on this lane is ordered after.
    gates: Vec<usize>,
    /// Submissions made before this index may share the lane with a gate
    /// item that has not run yet (see [`Model::fault_lands_here`]).
    gate_mark: Option<usize>,
    /// A fault was injected on this lane.
    faulted: bool,
}

/// What rank 1 has been told about a collective round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fate {
    /// Nothing yet: rank 1 waits for this round before any later one.
    Unreleased,
    /// Rank 1 joins (submits its side).
    Joined,
    /// Rank 1 never joins.
    Skipped,
}

/// One collective round.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Round {
    pub(crate) sub: usize,
    pub(crate) fate: Fate,
}

/// The model's verdict on one submission at one instant.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Status {
    /// Cannot have finished, and why.
    pub(crate) blocked: Option<Reason>,
    /// Will finish without further action.
    pub(crate) due: bool,
    /// May end in failure (or, when doomed, never end unless torn down).
    pub(crate) may_fail: bool,
    pub(crate) doomed: bool,
}

impl Status {
    /// Its work is certainly live and certainly not failing: every retained
    /// resource must be alive and the observer must say `Live`.
    pub(crate) fn certainly_live(self) -> bool {
        self.blocked.is_some() && !self.may_fail
    }
}

/// The reference model of one sequence on rank 0.
#[derive(Debug, Clone, Default)]
pub(crate) struct Model {
    pub(crate) subs: Vec<Record>,
    pub(crate) lanes: Vec<Lane>,
    pub(crate) rounds: Vec<Round>,
    /// The round that poisoned the group.
    poisoned_at: Option<usize>,
}

/// What a new submission is.
pub(crate) struct NewSubmission {
    pub(crate) subject: Subject,
    pub(crate) lane: usize,
    pub(crate) via: Via,
    /// See [`Record::needs_peer`].
    pub(crate) needs_peer: bool,
    pub(crate) faulted: bool,
    pub(crate) must_fail: Option<&'static str>,
    pub(crate) outputs_held: bool,
}

impl Model {
    /// A model with one lane (the rank's own executor).
    pub(crate) fn new() -> Self {
        Self {
            lanes: vec![Lane::default()],
            ..Self::default()
        }
    }

    /// Whether collectives may no longer be submitted.
    pub(crate) fn poisoned(&self) -> bool {
        self.poisoned_at.is_some()
    }

    /// Records a submission; returns its index.
    pub(crate) fn submit(&mut self, new: NewSubmission) -> usize {
        let index = self.subs.len();
        let lane = &self.lanes[new.lane];
        let holds_at_submit = self
            .subs
            .iter()
            .enumerate()
            .filter(|(_, s)| s.lane == new.lane && s.via == Via::Hold && !s.released)
            .map(|(i, _)| i)
            .collect();
        let round = new.subject.operation().map(|_| {
            self.rounds.push(Round {
                sub: index,
                fate: Fate::Unreleased,
            });
            self.rounds.len() - 1
        });
        self.subs.push(Record {
            subject: new.subject,
            lane: new.lane,
            via: new.via,
            round,
            needs_peer: new.needs_peer,
            faulted: new.faulted,
            must_fail: new.must_fail,
            lane_tainted: lane.faulted,
            released: new.via == Via::Unheld,
            holds_at_submit,
            after: lane.gates.clone(),
            seen: Seen::Nothing,
            said_complete: false,
            error_seen: false,
            handle: HandleState::Held,
            quarantined: false,
            bounded_error: false,
            outputs_held: new.outputs_held,
        });
        // Work that fails (injected, or by contract) taints its lane and
        // poisons the group: a backend may fail what follows it.
        if new.faulted || new.must_fail.is_some() {
            self.lanes[new.lane].faulted = true;
            if let Some(round) = round {
                self.poison(round);
            }
        }
        index
    }

    /// A submission with an armed fault returned `Err` (a backend may report
    /// the fault at submission): the lane's later work may fail, and after a
    /// refused collective the group is poisoned.
    pub(crate) fn refused(&mut self, lane: usize, collective: bool) {
        self.lanes[lane].faulted = true;
        if collective {
            self.poison(self.rounds.len());
        }
    }

    /// Whether a fault was injected or left armed on `lane`.
    pub(crate) fn lane_faulted(&self, lane: usize) -> bool {
        self.lanes.get(lane).is_some_and(|l| l.faulted)
    }

    /// A new lane.
    pub(crate) fn fork(&mut self) {
        self.lanes.push(Lane::default());
    }

    /// `order_after(producer, lane)`: later work on `lane` follows `producer`.
    pub(crate) fn order_after(&mut self, producer: usize, lane: usize) {
        let mark = self.subs.len();
        let lane = &mut self.lanes[lane];
        lane.gates.push(producer);
        lane.gate_mark = Some(mark);
    }

    /// Poisons the group at `round`: no more collectives, and no later round
    /// is ever joined. (A faulted round itself is still joined when released:
    /// its failure may wait for the peer's side, a receive for its message.)
    pub(crate) fn poison(&mut self, round: usize) {
        if self.poisoned_at.is_none_or(|at| round < at) {
            self.poisoned_at = Some(round);
        }
    }

    /// Whether poisoning at `round` (a native cancellation) leaves every
    /// later round reachable: each still has its completion, so the final
    /// drain can tear it down, or has ended.
    pub(crate) fn can_poison(&self, round: usize) -> bool {
        self.rounds[round + 1..].iter().all(|later| {
            let sub = &self.subs[later.sub];
            sub.handle == HandleState::Held || sub.seen != Seen::Nothing
        })
    }

    /// Releases submission `index`'s own cause. For a collective, returns the
    /// round's new fate (joined, or skipped when doomed or torn down).
    pub(crate) fn release(&mut self, index: usize) -> Option<(usize, Fate)> {
        let doomed = self.doomed(index);
        let sub = &mut self.subs[index];
        sub.released = true;
        let round = sub.round?;
        let torn_down = sub.seen == Seen::TornDown;
        let entry = &mut self.rounds[round];
        if entry.fate == Fate::Unreleased {
            entry.fate = if doomed || torn_down {
                Fate::Skipped
            } else {
                Fate::Joined
            };
        }
        Some((round, entry.fate))
    }

    /// Marks a round never to be joined (its rank-0 side was torn down).
    pub(crate) fn skip(&mut self, round: usize) -> bool {
        let entry = &mut self.rounds[round];
        if entry.fate == Fate::Unreleased {
            entry.fate = Fate::Skipped;
            true
        } else {
            false
        }
    }

    /// Whether the caller knows the work has ended.
    pub(crate) fn ended(&self, index: usize) -> bool {
        self.subs[index].seen != Seen::Nothing
    }

    /// A collective round after the one that poisoned the group.
    pub(crate) fn doomed(&self, index: usize) -> bool {
        matches!((self.subs[index].round, self.poisoned_at), (Some(round), Some(at)) if round > at)
    }

    /// Whether a fault injected on `lane` now lands on the next submission:
    /// every submission on the lane has ended (by the model's knowledge or,
    /// when `ended` says so, an observer's), and any `order_after` gate on the
    /// lane has been followed by a submission that ended (so the gate ran).
    pub(crate) fn fault_lands_here(&self, lane: usize, ended: impl Fn(usize) -> bool) -> bool {
        let on_lane = |i: &usize| self.subs[*i].lane == lane;
        let all_ended = (0..self.subs.len())
            .filter(on_lane)
            .all(|i| self.ended(i) || ended(i));
        let gate_passed = match self.lanes[lane].gate_mark {
            None => true,
            Some(mark) => (mark..self.subs.len())
                .filter(on_lane)
                .any(|i| self.ended(i) || ended(i)),
        };
        all_ended && gate_passed
    }

    /// The lane of the group's unfinished rounds, if any (`ended` adds an
    /// observer's knowledge). New rounds go there: a group's rounds must
    /// start in submission order (a receive started early on another lane
    /// would take a later round's message, and the late peer joins rounds in
    /// order on one lane), so the model never races them across lanes.
    pub(crate) fn group_lane(&self, ended: impl Fn(usize) -> bool) -> Option<usize> {
        self.rounds
            .iter()
            .rev()
            .map(|round| round.sub)
            .find(|&sub| !self.ended(sub) && !ended(sub))
            .map(|sub| self.subs[sub].lane)
    }

    /// The verdict on every submission, computed in submission order (every
    /// dependency is on an earlier submission), in one pass: what `due` and
    /// `blocked` ask of the lanes and the rounds is gathered once, so a
    /// sequence's steps cost linear, not quadratic, time in its length.
    pub(crate) fn statuses(&self) -> Vec<Status> {
        let lanes = self
            .subs
            .iter()
            .map(|s| s.lane + 1)
            .max()
            .unwrap_or(0)
            .max(self.lanes.len());
        let mut tally = Tally {
            // A lane with a hold not yet released (any submission's, later
            // ones included).
            held: vec![false; lanes],
            // Every submission so far on the lane is due.
            lane_due: vec![true; lanes],
            rounds_due: true,
            first_unreleased: self
                .rounds
                .iter()
                .position(|round| round.fate == Fate::Unreleased),
        };
        for sub in &self.subs {
            if sub.via == Via::Hold && !sub.released {
                tally.held[sub.lane] = true;
            }
        }
        let mut statuses: Vec<Status> = Vec::with_capacity(self.subs.len());
        for index in 0..self.subs.len() {
            let doomed = self.doomed(index);
            let may_fail = self.may_fail(index, doomed, &statuses);
            let blocked = self.blocked(index, &statuses, &tally);
            let due = self.due(index, doomed, &statuses, &tally);
            let sub = &self.subs[index];
            tally.lane_due[sub.lane] &= due;
            if sub.round.is_some() {
                tally.rounds_due &= due;
            }
            statuses.push(Status {
                blocked,
                due,
                may_fail,
                doomed,
            });
        }
        statuses
    }

    fn may_fail(&self, index: usize, doomed: bool, earlier: &[Status]) -> bool {
        let sub = &self.subs[index];
        sub.faulted
            || sub.must_fail.is_some()
            || sub.lane_tainted
            || doomed
            || sub
                .after
                .iter()
                .any(|&p| earlier[p].may_fail || self.subs[p].seen == Seen::TornDown)
    }

    fn own_cause_released(&self, index: usize) -> bool {
        let sub = &self.subs[index];
        match (sub.via, sub.round) {
            (Via::LatePeer, Some(round)) => self.rounds[round].fate == Fate::Joined,
            (Via::Unheld, _) => true,
            _ => sub.released,
        }
    }

    fn blocked(&self, index: usize, earlier: &[Status], tally: &Tally) -> Option<Reason> {
        let sub = &self.subs[index];
        // Doomed work may even meet a stale contribution of a cancelled round.
        if self.ended(index) || self.doomed(index) {
            return None;
        }
        if sub.via == Via::Hold && !sub.released {
            return Some(Reason::Hold);
        }
        if sub.holds_at_submit.iter().any(|&h| !self.subs[h].released) {
            return Some(Reason::Hold);
        }
        if let Some(round) = sub.round.filter(|_| sub.needs_peer) {
            // An earlier round the late peer has not been told about.
            let waiting = tally.first_unreleased.is_some_and(|first| first < round);
            if !self.own_cause_released(index) || waiting {
                return Some(Reason::Peer);
            }
        }
        sub.after
            .iter()
            .copied()
            .find(|&p| earlier[p].certainly_live())
            .map(|producer| Reason::Order { producer })
    }

    /// `tally` holds what the submissions before `index` were.
    fn due(&self, index: usize, doomed: bool, earlier: &[Status], tally: &Tally) -> bool {
        if self.ended(index) {
            return true;
        }
        if doomed || !self.own_cause_released(index) {
            return false;
        }
        let sub = &self.subs[index];
        let producers = sub.after.iter().all(|&p| earlier[p].due);
        // Rounds are numbered in submission order: every earlier round is an
        // earlier submission.
        let rounds = sub.round.is_none() || tally.rounds_due;
        !tally.held[sub.lane] && tally.lane_due[sub.lane] && producers && rounds
    }
}

/// What [`Model::statuses`] knows of the lanes and rounds as it goes.
struct Tally {
    /// Per lane: a hold on it is not released.
    held: Vec<bool>,
    /// Per lane: every submission on it so far is due.
    lane_due: Vec<bool>,
    /// Every collective round so far is due.
    rounds_due: bool,
    /// The first round the late peer has not been told about.
    first_unreleased: Option<usize>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operation::Operation;

    fn local(model: &mut Model, lane: usize) -> usize {
        model.submit(NewSubmission {
            subject: Subject::Submit,
            lane,
            via: Via::Hold,
            needs_peer: false,
            faulted: false,
            must_fail: None,
            outputs_held: false,
        })
    }

    fn collective(model: &mut Model, faulted: bool) -> usize {
        model.submit(NewSubmission {
            subject: Subject::Operation(Operation::AllReduceSum),
            lane: 0,
            via: Via::LatePeer,
            needs_peer: true,
            faulted,
            must_fail: None,
            outputs_held: true,
        })
    }

    /// A broadcast from rank 0, the subject: its result needs no peer.
    fn root_broadcast(model: &mut Model) -> usize {
        model.submit(NewSubmission {
            subject: Subject::Operation(Operation::Broadcast),
            lane: 0,
            via: Via::LatePeer,
            needs_peer: false,
            faulted: false,
            must_fail: None,
            outputs_held: true,
        })
    }

    /// A broadcast root may complete before its late peer joins (an eager
    /// protocol posts its copies and is done), so the model never calls it
    /// blocked by the peer, also behind an unjoined round; it is due only
    /// once the peer joined, as any round is.
    #[test]
    fn a_broadcast_root_is_not_blocked_by_its_peer() {
        let mut model = Model::new();
        let earlier = collective(&mut model, false);
        let root = root_broadcast(&mut model);
        let s = model.statuses();
        assert_eq!(s[earlier].blocked, Some(Reason::Peer));
        assert_eq!(s[root].blocked, None);
        assert!(!s[root].due && !s[root].certainly_live());
        model.release(earlier);
        model.release(root);
        let s = model.statuses();
        assert!(s[earlier].due && s[root].due);
    }

    #[test]
    fn a_hold_blocks_later_work_on_its_lane_only() {
        let mut model = Model::new();
        model.fork();
        let held = local(&mut model, 0);
        let behind = model.submit(NewSubmission {
            subject: Subject::LocalDependencies,
            lane: 0,
            via: Via::Unheld,
            needs_peer: false,
            faulted: false,
            must_fail: None,
            outputs_held: false,
        });
        let other = model.submit(NewSubmission {
            subject: Subject::LocalDependencies,
            lane: 1,
            via: Via::Unheld,
            needs_peer: false,
            faulted: false,
            must_fail: None,
            outputs_held: false,
        });
        let s = model.statuses();
        assert_eq!(s[held].blocked, Some(Reason::Hold));
        assert_eq!(s[behind].blocked, Some(Reason::Hold));
        assert!(s[other].blocked.is_none() && s[other].due);
        model.release(held);
        let s = model.statuses();
        assert!(s[held].due && s[behind].due);
    }

    #[test]
    fn rounds_are_joined_in_order() {
        let mut model = Model::new();
        let first = collective(&mut model, false);
        let second = collective(&mut model, false);
        assert_eq!(model.release(second), Some((1, Fate::Joined)));
        let s = model.statuses();
        assert_eq!(s[second].blocked, Some(Reason::Peer));
        model.release(first);
        let s = model.statuses();
        assert!(s[first].due && s[second].due);
    }

    #[test]
    fn a_faulted_collective_poisons_the_group() {
        let mut model = Model::new();
        let faulted = collective(&mut model, true);
        assert!(model.poisoned());
        let s = model.statuses();
        assert!(s[faulted].may_fail && !s[faulted].certainly_live());
    }

    #[test]
    fn order_after_blocks_the_consumer_until_the_producer_is_released() {
        let mut model = Model::new();
        model.fork();
        let producer = local(&mut model, 0);
        model.order_after(producer, 1);
        let consumer = model.submit(NewSubmission {
            subject: Subject::Submit,
            lane: 1,
            via: Via::Unheld,
            needs_peer: false,
            faulted: false,
            must_fail: None,
            outputs_held: false,
        });
        assert_eq!(
            model.statuses()[consumer].blocked,
            Some(Reason::Order { producer })
        );
        assert!(!model.fault_lands_here(1, |_| false));
        model.release(producer);
        assert!(model.statuses()[consumer].due);
    }

    /// The model's definitions read literally, one submission at a time
    /// (quadratic): the oracle for [`Model::statuses`]'s single pass.
    fn literal_statuses(model: &Model) -> Vec<Status> {
        let mut statuses: Vec<Status> = Vec::new();
        for index in 0..model.subs.len() {
            let sub = &model.subs[index];
            let doomed = model.doomed(index);
            let may_fail = model.may_fail(index, doomed, &statuses);
            let blocked = if model.ended(index) || doomed {
                None
            } else if (sub.via == Via::Hold && !sub.released)
                || sub.holds_at_submit.iter().any(|&h| !model.subs[h].released)
            {
                Some(Reason::Hold)
            } else if sub.round.filter(|_| sub.needs_peer).is_some_and(|round| {
                !model.own_cause_released(index)
                    || model.rounds[..round]
                        .iter()
                        .any(|earlier| earlier.fate == Fate::Unreleased)
            }) {
                Some(Reason::Peer)
            } else {
                sub.after
                    .iter()
                    .copied()
                    .find(|&p| statuses[p].certainly_live())
                    .map(|producer| Reason::Order { producer })
            };
            let due = model.ended(index)
                || (!doomed
                    && model.own_cause_released(index)
                    && model
                        .subs
                        .iter()
                        .all(|s| s.lane != sub.lane || s.via != Via::Hold || s.released)
                    && (0..index)
                        .filter(|&i| model.subs[i].lane == sub.lane)
                        .all(|i| statuses[i].due)
                    && sub.after.iter().all(|&p| statuses[p].due)
                    && match sub.round {
                        Some(round) => model.rounds[..round].iter().all(|r| statuses[r.sub].due),
                        None => true,
                    });
            statuses.push(Status {
                blocked,
                due,
                may_fail,
                doomed,
            });
        }
        statuses
    }

    proptest::proptest! {
        /// Whatever a sequence did to the model, the single pass agrees
        /// with the definitions read literally.
        #[test]
        fn statuses_agree_with_the_literal_definitions(
            steps in proptest::collection::vec((0u8..8, 0u8..8, proptest::bool::ANY), 0..48)
        ) {
            let mut model = Model::new();
            for (what, at, flag) in steps {
                let lanes = model.lanes.len();
                let subs = model.subs.len();
                let lane = usize::from(at) % lanes;
                match what {
                    0 => {
                        local(&mut model, lane);
                    }
                    1 => {
                        collective(&mut model, flag && at == 0);
                    }
                    2 => model.fork(),
                    3 if subs > 0 => {
                        model.release(usize::from(at) % subs);
                    }
                    4 if subs > 0 => model.order_after(usize::from(at) % subs, lane),
                    5 if subs > 0 => {
                        let seen = if flag { Seen::Completed } else { Seen::TornDown };
                        model.subs[usize::from(at) % subs].seen = seen;
                    }
                    7 => {
                        root_broadcast(&mut model);
                    }
                    6 => {
                        model.submit(NewSubmission {
                            subject: Subject::LocalDependencies,
                            lane,
                            via: Via::Unheld,
                            needs_peer: false,
                            faulted: flag && at == 1,
                            must_fail: None,
                            outputs_held: false,
                        });
                    }
                    _ => {}
                }
                proptest::prop_assert_eq!(model.statuses(), literal_statuses(&model));
            }
        }
    }
}
