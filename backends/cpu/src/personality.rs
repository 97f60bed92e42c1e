//! Personalities: honest designs that differ from the default CPU backend
//! where real backends differ, for the kit to show that its verdicts do not
//! depend on one design. Each is a correct backend: certified with no
//! instruments, each must reach the same levels as the default.
//!
//! | Personality | What differs |
//! |---|---|
//! | `lazy` (default) | tensor operations build deferred values, evaluated by the work that consumes them; every work item can be cancelled natively |
//! | `eager` | tensor operations compute their values when called, on the calling thread |
//! | `collectives-cancel` | `NativeCancel` stops collectives and local work but not transfers (`send_receive`), so `supports_cancellation(NativeCancel)` honestly answers `false` |
//! | `unstoppable` | running local work cannot be stopped: a `NativeCancel` teardown waits until it has finished |
//! | `spin-wait` | `wait()` and `wait_bounded` poll the work's state in a busy loop on the calling thread instead of sleeping, as MPI progress loops and event-polling GPU waits do |
//! | `rendezvous` | a transfer switches protocol at [`RENDEZVOUS_FROM`] bytes, as MPI, UCX and NCCL do: below it the sender's values are read as soon as its work runs (eager); from it on, the sender's work waits until the receiver has posted its receive, and only then reads the sender's buffer (rendezvous), so a large send stays pending until its receiver joins; no progress thread: that read moves one [`RENDEZVOUS_CHUNK`](crate::RENDEZVOUS_CHUNK) per call into the backend on the device (a submission, `is_complete`, each turn of a wait), whichever rank makes it; waits spin as in `spin-wait` |
//!
//! A sixth design, completions that are not `Clone`, is the harness's
//! (it offers no second handle), not the backend's.
//!
//! `supports_cancellation` is an associated function of the completion type,
//! not of a device, so the `collectives-cancel` answer is a setting of the
//! process: [`restrict_native_cancel_to_collectives`] fixes it before the
//! first answer is given, and cannot be undone.
//!
//! ```
//! use commcheck_cpu::Personality;
//!
//! assert_eq!("eager".parse::<Personality>(), Ok(Personality::Eager));
//! let error = "eagre".parse::<Personality>().unwrap_err();
//! assert!(error.to_string().contains("eagre"));
//! ```

use std::sync::OnceLock;

/// One honest backend design (see the module docs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Personality {
    /// Deferred tensor values; everything natively cancellable.
    #[default]
    Lazy,
    /// Tensor operations compute when called.
    Eager,
    /// `NativeCancel` for collectives and local work, not for transfers:
    /// `supports_cancellation(NativeCancel)` is `false` in the process.
    CollectivesCancel,
    /// Running local work cannot be stopped natively.
    Unstoppable,
    /// Waits poll in a busy loop on the calling thread (they never sleep).
    SpinWait,
    /// Transfers of at least [`RENDEZVOUS_FROM`] bytes wait for their
    /// receiver before reading the sender's buffer, one chunk per call into
    /// the backend (no progress thread); waits spin.
    Rendezvous,
}

/// The bytes from which the `rendezvous` personality's transfers wait for
/// their receiver (its harness reports this boundary).
pub const RENDEZVOUS_FROM: usize = 64 << 10;

impl Personality {
    /// Every personality, the default first.
    pub const ALL: [Self; 6] = [
        Self::Lazy,
        Self::Eager,
        Self::CollectivesCancel,
        Self::Unstoppable,
        Self::SpinWait,
        Self::Rendezvous,
    ];

    /// The personality's name, as [`str::parse`] takes it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Lazy => "lazy",
            Self::Eager => "eager",
            Self::CollectivesCancel => "collectives-cancel",
            Self::Unstoppable => "unstoppable",
            Self::SpinWait => "spin-wait",
            Self::Rendezvous => "rendezvous",
        }
    }

    /// Whether waits poll in a busy loop (`spin-wait`, `rendezvous`).
    pub fn spins(self) -> bool {
        matches!(self, Self::SpinWait | Self::Rendezvous)
    }

    /// Whether a transfer of `bytes` waits for its receiver before reading
    /// the sender's buffer.
    pub fn rendezvous(self, bytes: usize) -> bool {
        self == Self::Rendezvous && bytes >= RENDEZVOUS_FROM
    }
}

impl std::fmt::Display for Personality {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A personality name the CPU backend does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown CPU backend personality `{given}`: expected one of {}",
    known()
)]
pub struct UnknownPersonality {
    /// The name given.
    pub given: String,
}

fn known() -> String {
    Personality::ALL
        .iter()
        .map(|p| format!("`{p}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

impl std::str::FromStr for Personality {
    type Err = UnknownPersonality;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|p| p.name() == name)
            .ok_or_else(|| UnknownPersonality {
                given: name.to_owned(),
            })
    }
}

/// Whether transfers can be cancelled natively in this process: fixed by the
/// first answer to `supports_cancellation`, or by
/// [`restrict_native_cancel_to_collectives`] before it.
static TRANSFERS_CANCEL: OnceLock<bool> = OnceLock::new();

/// The process-wide answer of `supports_cancellation(NativeCancel)`.
pub(crate) fn transfers_cancel() -> bool {
    *TRANSFERS_CANCEL.get_or_init(|| true)
}

/// The `supports_cancellation` answer was given before the restriction.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the CPU backend already answered supports_cancellation(NativeCancel) = true in this process; \
     the collectives-cancel personality must be chosen before any completion is asked"
)]
pub struct AlreadyAnswered;

/// Makes `supports_cancellation(NativeCancel)` answer `false` for the rest of
/// the process (the `collectives-cancel` personality): transfers cannot be
/// cancelled natively. Idempotent; an error once `true` was answered.
pub fn restrict_native_cancel_to_collectives() -> Result<(), AlreadyAnswered> {
    let _ = TRANSFERS_CANCEL.set(false);
    if transfers_cancel() {
        Err(AlreadyAnswered)
    } else {
        Ok(())
    }
}
