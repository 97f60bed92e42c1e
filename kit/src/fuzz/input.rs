//! The fuzz targets' inputs, decoded: a sequence program, a deadline case, a
//! boundary case, a report; what a rejected input was rejected for; and the
//! operation kinds a sequence may draw from (its swarm). Their byte format
//! is `format`'s, which also encodes them.

use std::time::Duration;

use crate::model::{Mode, Op, Options, Sequence, Timeout, Work};

/// The version byte of format 1 (`format`): every target's first format,
/// still the one of `deadlines`, `boundary` and `report`.
pub(crate) const VERSION: u8 = 1;

/// The version byte of the `sequence` target's format 2 (`format2`).
pub(crate) const SEQUENCE_VERSION: u8 = 2;

/// The watchdog of one fuzz input: a hang is reported after this long (an
/// input normally runs in milliseconds).
pub(crate) const LIMIT: Duration = Duration::from_secs(5);

/// Operation kinds of a sequence input, numbered for the swarm mask and the
/// selector byte (frozen): format 1 has the first [`V1_KINDS`], format 2
/// all of them.
pub(crate) const KINDS: [&str; 24] = [
    "LocalDependencies",
    "Submit",
    "Operation",
    "UnevenGather",
    "AllToAll",
    "Broadcast",
    "Agree",
    "SendReceive",
    "Release",
    "LateRelease",
    "IsComplete",
    "Wait",
    "WaitBounded",
    "DropOutputs",
    "DropCompletion",
    "Fork",
    "OrderAfter",
    "Retain",
    "DropLane",
    "EmptyLocal",
    "SubmitLazy",
    "Refused",
    "DropQueued",
    "OrderedPair",
];

/// How many of [`KINDS`] format 1 has.
pub(crate) const V1_KINDS: usize = 18;

/// The fuzz targets, by the name of their corpus folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Target {
    /// Operation sequences through the model ([`run`](super::run)).
    Sequence,
    /// Point-to-point framing ([`run_boundary`](super::run_boundary)).
    Boundary,
    /// Bounded waits racing completion ([`run_deadlines`](super::run_deadlines)).
    Deadlines,
    /// commcheck-report's parsers (`commcheck_report::fuzz`).
    Report,
}

impl Target {
    /// Every target.
    pub const ALL: [Self; 4] = [
        Self::Sequence,
        Self::Boundary,
        Self::Deadlines,
        Self::Report,
    ];

    /// The target's name (its folder under `fuzz/corpus` and `fuzz/regressions`).
    pub const fn name(self) -> &'static str {
        match self {
            Self::Sequence => "sequence",
            Self::Boundary => "boundary",
            Self::Deadlines => "deadlines",
            Self::Report => "report",
        }
    }

    /// The target named `name`.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|target| target.name() == name)
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Why bytes decode to no input (nothing runs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rejection {
    /// No bytes at all.
    Empty,
    /// A format version this kit does not know.
    Version(u8),
    /// The bytes end inside a required header field.
    Truncated(&'static str),
}

impl std::fmt::Display for Rejection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Empty => f.write_str("empty input"),
            Self::Version(version) => {
                write!(f, "format version {version} (this kit reads {VERSION})")
            }
            Self::Truncated(field) => write!(f, "the input ends in its {field}"),
        }
    }
}

/// A set of operation kinds of a sequence input (its swarm).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Kinds(u32);

impl Kinds {
    /// The kinds, in mask-bit order (frozen by the format; format 1 has
    /// the first 18).
    pub const NAMES: [&'static str; 24] = KINDS;

    /// Every kind (of the newest format).
    pub const ALL: Self = Self((1 << KINDS.len()) - 1);

    /// Every kind of format 1.
    pub(crate) const ALL_V1: Self = Self((1 << V1_KINDS) - 1);

    /// The kinds of `mask`'s known bits; all of them when it has none.
    pub fn from_mask(mask: u32) -> Self {
        Self::within(mask, Self::ALL)
    }

    /// The kinds of `mask` among `all`; all of those when it has none.
    pub(crate) fn within(mask: u32, all: Self) -> Self {
        match mask & all.0 {
            0 => all,
            known => Self(known),
        }
    }

    /// The mask.
    pub fn mask(self) -> u32 {
        self.0
    }

    /// The enabled kinds' numbers, in order (never empty).
    pub(crate) fn list(self) -> Vec<usize> {
        (0..Self::NAMES.len())
            .filter(|k| self.0 & (1 << k) != 0)
            .collect()
    }
}

impl std::fmt::Debug for Kinds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if *self == Self::ALL {
            return f.write_str("Kinds(all)");
        }
        let names: Vec<&str> = self.list().into_iter().map(|k| Self::NAMES[k]).collect();
        write!(f, "Kinds({})", names.join(" | "))
    }
}

/// A decoded `sequence` input.
#[derive(Clone, PartialEq, Eq)]
pub struct Program {
    /// The format it was decoded from (1 or 2); [`Program::encode`] writes
    /// the newest whatever this says.
    pub format: u8,
    /// Ranks in its world, 2 to 4 (always 2 in format 1). A harness that
    /// does not build this size runs it at 2.
    pub ranks: usize,
    /// The operation kinds this input may use.
    pub enabled: Kinds,
    /// Settle after each submission and release (by events where the
    /// harness has an observer, else 1 ms: [`crate::model::Options::settle`]).
    pub settle: bool,
    /// The operations.
    pub ops: Sequence,
}

/// Format 1 inputs print as they always did (their stored decoded forms
/// stay valid); format 2 adds its fields.
impl std::fmt::Debug for Program {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut program = f.debug_struct("Program");
        if self.format >= SEQUENCE_VERSION {
            program
                .field("format", &self.format)
                .field("ranks", &self.ranks);
        }
        let all = if self.format >= SEQUENCE_VERSION {
            Kinds::ALL
        } else {
            Kinds::ALL_V1
        };
        match self.enabled == all {
            true => program.field("enabled", &format_args!("Kinds(all)")),
            false => program.field("enabled", &self.enabled),
        };
        program
            .field("settle", &self.settle)
            .field("ops", &self.ops)
            .finish()
    }
}

impl Program {
    /// Every kind enabled, a two-rank world, no settling (format 2).
    pub fn new(ops: Vec<Op>) -> Self {
        Self {
            format: SEQUENCE_VERSION,
            ranks: 2,
            enabled: Kinds::ALL,
            settle: false,
            ops: Sequence(ops),
        }
    }

    /// How the model runs it.
    pub fn options(&self) -> Options {
        Options {
            limit: LIMIT,
            settle: if self.settle {
                Duration::from_millis(1)
            } else {
                Duration::ZERO
            },
        }
    }
}

/// When the `deadlines` target releases the work, relative to its bounded wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReleaseAt {
    /// Released just before the wait (the work races the deadline).
    Before,
    /// The late peer joins `delay` × 10 µs after the wait began (held
    /// local work is released just before it).
    During,
    /// After the wait (the wait meets pending work; long deadlines are cut
    /// to [`Timeout::BLOCKED_LIMIT`]).
    After,
}

/// A decoded `deadlines` input: one bounded wait on one submission.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadlineCase {
    /// What is submitted: a claimed operation's standard submission, or
    /// local dependencies.
    pub work: Work,
    /// The deadline, from 1 ns to `Duration::MAX`.
    pub timeout: Timeout,
    /// The disposition at the deadline.
    pub mode: Mode,
    /// When the work is let complete.
    pub release: ReleaseAt,
    /// The late peer's delay for [`ReleaseAt::During`], in units of 10 µs.
    pub delay: u8,
    /// A fault is injected into the work.
    pub fault: bool,
    /// `is_complete` is called before the wait.
    pub poll_first: bool,
    /// The caller's outputs are dropped before the wait.
    pub drop_outputs_first: bool,
}

impl DeadlineCase {
    /// The operation sequence the model runs for this case.
    pub fn sequence(&self) -> Sequence {
        let mut ops = vec![Op::Submit {
            work: self.work,
            lane: 0,
            fault: self.fault,
        }];
        if self.poll_first {
            ops.push(Op::IsComplete { sub: 0 });
        }
        if self.drop_outputs_first {
            ops.push(Op::DropOutputs { sub: 0 });
        }
        let wait = Op::WaitBounded {
            sub: 0,
            timeout: self.timeout,
            mode: self.mode,
        };
        match self.release {
            ReleaseAt::Before => ops.extend([Op::Release { sub: 0 }, wait]),
            ReleaseAt::During => ops.extend([
                Op::LateRelease {
                    sub: 0,
                    delay: self.delay,
                },
                wait,
            ]),
            ReleaseAt::After => ops.extend([wait, Op::Release { sub: 0 }]),
        }
        Sequence(ops)
    }
}

/// One tensor role of a [`Frame`] (equality compares values bit for bit).
#[derive(Debug, Clone)]
pub struct Role {
    /// The role's name (may be blank: eredu then refuses the contract).
    pub name: String,
    /// The declared dtype, by eredu's header tag (`% 14`: Bool, F32, F16,
    /// BF16, I8, U8, U16, U32, U64, I16, I32, I64, F64, Complex64).
    pub dtype: u8,
    /// The declared shape (may hold zeros: eredu then refuses the role).
    pub declared: Vec<usize>,
    /// The tensor's real shape (`f32` values).
    pub tensor: Vec<usize>,
    /// The tensor's values (the sender's payload; the receiver's are zeros).
    pub values: Vec<f32>,
}

impl PartialEq for Role {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
            && self.dtype == other.dtype
            && self.declared == other.declared
            && self.tensor == other.tensor
            && self.values.len() == other.values.len()
            && self
                .values
                .iter()
                .zip(&other.values)
                .all(|(a, b)| a.to_bits() == b.to_bits())
    }
}

/// One side's framing of a point-to-point bundle.
#[derive(Debug, Clone, PartialEq)]
pub struct Frame {
    /// The route id written into the headers.
    pub route: u64,
    /// The contract's schema.
    pub schema: String,
    /// The roles, in bundle order.
    pub roles: Vec<Role>,
}

/// A decoded `boundary` input: one point-to-point exchange from rank 1 to
/// rank 0 of a two-rank world.
#[derive(Debug, Clone, PartialEq)]
pub struct BoundaryCase {
    /// The route the bundle travels.
    pub route: u64,
    /// The sender submits before the receiver.
    pub sender_first: bool,
    /// The sender's framing and payload.
    pub sender: Frame,
    /// The receiver's framing (its expected headers and shapes).
    pub receiver: Frame,
}

/// Which commcheck-report parser a `report` input feeds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Parser {
    /// `verify` (and `load`) on one text.
    Verify,
    /// `load` on two texts, then `diff` of what loads.
    Diff,
    /// `Expectations::parse` on one text.
    Expectations,
}

/// A decoded `report` input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportInput {
    /// The parser.
    pub parser: Parser,
    /// Its texts (two for `diff`, else one).
    pub texts: Vec<String>,
}

/// A decoded input of any target.
#[derive(Debug, Clone, PartialEq)]
pub enum Input {
    /// `sequence`.
    Sequence(Program),
    /// `boundary`.
    Boundary(BoundaryCase),
    /// `deadlines`.
    Deadlines(DeadlineCase),
    /// `report`.
    Report(ReportInput),
}

impl Input {
    /// The input's bytes in the current format.
    pub fn encode(&self) -> Vec<u8> {
        match self {
            Self::Sequence(program) => program.encode(),
            Self::Boundary(case) => case.encode(),
            Self::Deadlines(case) => case.encode(),
            Self::Report(input) => input.encode(),
        }
    }
}
