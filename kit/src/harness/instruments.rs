//! The instruments a harness may provide (SPEC's class I evidence): what
//! each one is, and the handles it hands the kit (holds, probes, ledger
//! readings, observers, wire logs).

/// Which instruments a harness provides. Invariants of class I that need a
/// missing instrument are reported `not-supported`, never `pass`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct Instruments {
    /// [`Harness::hold`](crate::Harness::hold): work on an executor stays pending until released.
    pub hold: bool,
    /// [`Harness::probe`](crate::Harness::probe): is a tensor's native storage still allocated?
    pub probe: bool,
    /// [`Harness::ledger`](crate::Harness::ledger): live native resources by kind.
    pub ledger: bool,
    /// [`Harness::inject_fault`](crate::Harness::inject_fault): work faults (the next native work item
    /// fails after its submission succeeded).
    pub fault: bool,
    /// [`Harness::fail_next_submission`](crate::Harness::fail_next_submission): submission faults (the next
    /// submission call returns `Err`). A backend that can fail work but not
    /// refuse a submission on demand declares `fault` only; SUB-4, the one
    /// check that needs a refused submission, is then not-supported.
    #[serde(default)]
    pub submission_fault: bool,
    /// [`Harness::observer`](crate::Harness::observer): a second handle on a completion's state.
    pub observer: bool,
    /// [`Harness::wire_log`](crate::Harness::wire_log): native messages sent on a route.
    pub wire_log: bool,
}

impl Instruments {
    /// No instruments.
    pub const NONE: Self = Self {
        hold: false,
        probe: false,
        ledger: false,
        fault: false,
        submission_fault: false,
        observer: false,
        wire_log: false,
    };

    /// Every instrument.
    pub const ALL: Self = Self {
        hold: true,
        probe: true,
        ledger: true,
        fault: true,
        submission_fault: true,
        observer: true,
        wire_log: true,
    };

    /// This set and the hold ([`Harness::hold`](crate::Harness::hold)).
    /// The builders name what a harness provides outside the kit, where the
    /// struct (`#[non_exhaustive]`) cannot be written as a literal:
    ///
    /// ```
    /// use commcheck::Instruments;
    ///
    /// const MINE: Instruments = Instruments::NONE.with_hold().with_probe();
    /// assert!(MINE.hold && MINE.probe && !MINE.ledger);
    /// ```
    pub const fn with_hold(self) -> Self {
        Self { hold: true, ..self }
    }

    /// This set and the liveness probe ([`Harness::probe`](crate::Harness::probe)).
    pub const fn with_probe(self) -> Self {
        Self {
            probe: true,
            ..self
        }
    }

    /// This set and the resource ledger ([`Harness::ledger`](crate::Harness::ledger)).
    pub const fn with_ledger(self) -> Self {
        Self {
            ledger: true,
            ..self
        }
    }

    /// This set and work faults ([`Harness::inject_fault`](crate::Harness::inject_fault)).
    pub const fn with_fault(self) -> Self {
        Self {
            fault: true,
            ..self
        }
    }

    /// This set and submission faults
    /// ([`Harness::fail_next_submission`](crate::Harness::fail_next_submission)).
    pub const fn with_submission_fault(self) -> Self {
        Self {
            submission_fault: true,
            ..self
        }
    }

    /// This set and the observer ([`Harness::observer`](crate::Harness::observer)).
    pub const fn with_observer(self) -> Self {
        Self {
            observer: true,
            ..self
        }
    }

    /// This set and the wire log ([`Harness::wire_log`](crate::Harness::wire_log)).
    pub const fn with_wire_log(self) -> Self {
        Self {
            wire_log: true,
            ..self
        }
    }

    /// Whether every instrument in `needed` is present.
    pub fn covers(self, needed: Self) -> bool {
        self.missing(needed).is_empty()
    }

    /// Names of the instruments of `needed` that are absent.
    pub fn missing(self, needed: Self) -> Vec<&'static str> {
        [
            (needed.hold && !self.hold, "hold"),
            (needed.probe && !self.probe, "liveness probe"),
            (needed.ledger && !self.ledger, "resource ledger"),
            (needed.fault && !self.fault, "fault injection"),
            (
                needed.submission_fault && !self.submission_fault,
                "submission fault injection",
            ),
            (needed.observer && !self.observer, "observer"),
            (needed.wire_log && !self.wire_log, "wire log"),
        ]
        .into_iter()
        .filter_map(|(absent, name)| absent.then_some(name))
        .collect()
    }

    /// The union of two sets.
    pub const fn and(self, other: Self) -> Self {
        Self {
            hold: self.hold || other.hold,
            probe: self.probe || other.probe,
            ledger: self.ledger || other.ledger,
            fault: self.fault || other.fault,
            submission_fault: self.submission_fault || other.submission_fault,
            observer: self.observer || other.observer,
            wire_log: self.wire_log || other.wire_log,
        }
    }
}

/// The instruments' names as [`Instruments`]'s `FromStr` takes them.
const NAMES: [&str; 7] = [
    "hold",
    "probe",
    "ledger",
    "fault",
    "submission-fault",
    "observer",
    "wire-log",
];

/// A set of instruments that could not be read: an unknown name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown instrument `{given}`: expected `all`, `none` or a comma-separated list of {}",
    NAMES.join(", ")
)]
pub struct UnknownInstrument {
    /// The name given.
    pub given: String,
}

impl std::str::FromStr for Instruments {
    type Err = UnknownInstrument;

    /// `all`, `none`, or instrument names joined by commas:
    ///
    /// ```
    /// use commcheck::Instruments;
    ///
    /// let set: Instruments = "probe,fault".parse().unwrap();
    /// assert_eq!(set, Instruments::NONE.with_probe().with_fault());
    /// assert_eq!("none".parse::<Instruments>(), Ok(Instruments::NONE));
    /// assert!("probe,ledgr".parse::<Instruments>().unwrap_err().to_string().contains("ledgr"));
    /// ```
    fn from_str(list: &str) -> Result<Self, Self::Err> {
        match list.trim() {
            "all" => return Ok(Self::ALL),
            "none" => return Ok(Self::NONE),
            _ => {}
        }
        list.split(',')
            .map(str::trim)
            .try_fold(Self::NONE, |set, name| {
                Ok(match name {
                    "hold" => set.with_hold(),
                    "probe" => set.with_probe(),
                    "ledger" => set.with_ledger(),
                    "fault" => set.with_fault(),
                    "submission-fault" => set.with_submission_fault(),
                    "observer" => set.with_observer(),
                    "wire-log" => set.with_wire_log(),
                    _ => {
                        return Err(UnknownInstrument {
                            given: name.to_owned(),
                        })
                    }
                })
            })
    }
}

/// A held executor; releasing (or dropping) it lets the held work run.
#[must_use = "dropping a hold releases it"]
pub struct HoldGuard(Option<Box<dyn FnOnce()>>);

impl HoldGuard {
    /// Wraps the action that releases the hold.
    pub fn new(release: impl FnOnce() + 'static) -> Self {
        Self(Some(Box::new(release)))
    }

    /// Releases the hold now.
    pub fn release(mut self) {
        if let Some(release) = self.0.take() {
            release();
        }
    }
}

impl Drop for HoldGuard {
    fn drop(&mut self) {
        if let Some(release) = self.0.take() {
            release();
        }
    }
}

impl std::fmt::Debug for HoldGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "HoldGuard(held)"
        } else {
            "HoldGuard(released)"
        })
    }
}

/// A liveness probe on one tensor's native storage. It must not keep the
/// storage alive itself.
pub struct Probe(Box<dyn Fn() -> bool>);

impl Probe {
    /// Wraps the query "is the storage still allocated?".
    pub fn new(is_live: impl Fn() -> bool + 'static) -> Self {
        Self(Box::new(is_live))
    }

    /// Whether the storage is still allocated.
    pub fn is_live(&self) -> bool {
        (self.0)()
    }
}

impl std::fmt::Debug for Probe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Probe(live: {})", self.is_live())
    }
}

/// Live native resources, by kind, at one instant.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Ledger {
    /// Tensor storages.
    pub storages: usize,
    /// Executors / streams.
    pub executors: usize,
    /// Communication-group handles.
    pub groups: usize,
    /// Route endpoints.
    pub routes: usize,
    /// Submitted work not yet terminal.
    pub pending_work: usize,
    /// Completions held by the backend's quarantine owner, work still live.
    pub quarantined: usize,
}

/// What an [`Observer`] reports about a completion's native work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum WorkState {
    /// Native work may still touch retained resources.
    Live,
    /// Finished successfully.
    Completed,
    /// Finished with an error.
    Failed,
    /// Torn down by native cancellation.
    Cancelled,
}

impl WorkState {
    /// Whether native work has stopped for good.
    pub fn is_terminal(self) -> bool {
        self != Self::Live
    }
}

/// A second handle on a completion's state, usable after `wait_bounded`
/// consumed the completion. It must retain nothing.
pub struct Observer {
    state: Box<dyn Fn() -> WorkState>,
    releasable: Option<Box<dyn Fn() -> bool>>,
}

impl Observer {
    /// Wraps the state query.
    pub fn new(state: impl Fn() -> WorkState + 'static) -> Self {
        Self {
            state: Box::new(state),
            releasable: None,
        }
    }

    /// Adds what `resources_releasable()` answers on this work, read through
    /// the observer (EXC-8's timeout clause is checked with it after
    /// `wait_bounded` consumed the completion).
    pub fn with_releasable(mut self, releasable: impl Fn() -> bool + 'static) -> Self {
        self.releasable = Some(Box::new(releasable));
        self
    }

    /// Current state of the native work.
    pub fn state(&self) -> WorkState {
        (self.state)()
    }

    /// `resources_releasable()` on the observed work, when the observer offers it.
    pub fn resources_releasable(&self) -> Option<bool> {
        self.releasable.as_ref().map(|releasable| releasable())
    }
}

/// One native message recorded by a route's wire log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireRecord {
    /// In-band header bytes the message carried, one entry per value.
    pub headers: Vec<Vec<u8>>,
    /// Payload bytes the message carried.
    pub payload_bytes: usize,
}
