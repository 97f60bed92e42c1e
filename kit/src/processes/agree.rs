//! One configuration for the whole world: every process reads its own
//! `COMMCHECK_*` settings, and the leader's (rank 0's) are the ones every
//! process runs by. A process whose own differ says so, naming each
//! setting, and so does the leader: a mix is never silent.

use super::control::Control;
use super::say::say;
use super::ProcessError;
use crate::settings::Settings;
use std::time::Duration;

/// The settings that must be the same on every process of a world.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct Shared {
    /// `COMMCHECK_CASE_TIMEOUT_MS`.
    case_timeout_ms: u64,
    /// `COMMCHECK_GRACE_MS`.
    grace_ms: u64,
    /// `COMMCHECK_SEED`, when set.
    seed: Option<u64>,
    /// The base seed this process would use (set, or derived).
    base: u64,
}

impl Shared {
    fn of(settings: &Settings) -> Self {
        let millis = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        Self {
            case_timeout_ms: millis(settings.case_timeout),
            grace_ms: millis(settings.grace),
            seed: settings.seed,
            base: settings.base_seed(),
        }
    }

    /// The settings of `self` that differ from `leader`'s: `(variable,
    /// this value, the leader's)`. An unset seed differs from no seed.
    fn differences(&self, leader: &Self) -> Vec<(&'static str, String, String)> {
        let mut found = Vec::new();
        if self.case_timeout_ms != leader.case_timeout_ms {
            found.push((
                "COMMCHECK_CASE_TIMEOUT_MS",
                self.case_timeout_ms.to_string(),
                leader.case_timeout_ms.to_string(),
            ));
        }
        if self.grace_ms != leader.grace_ms {
            found.push((
                "COMMCHECK_GRACE_MS",
                self.grace_ms.to_string(),
                leader.grace_ms.to_string(),
            ));
        }
        if let Some(seed) = self.seed.filter(|seed| *seed != leader.base) {
            found.push(("COMMCHECK_SEED", seed.to_string(), leader.base.to_string()));
        }
        found
    }
}

/// What a process world runs by: the leader's settings.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Agreed {
    /// The case watchdog.
    pub(crate) limit: Duration,
    /// How long past a world's ceiling a process may take to report.
    pub(crate) grace: Duration,
    /// The base seed.
    pub(crate) base: u64,
}

/// Exchanges every process's settings (all call this together, at the
/// start of a run) and returns the leader's. Each follower whose own
/// settings differ prints one line per setting; the leader prints one per
/// follower and setting.
pub(crate) fn agree(control: &Control, settings: &Settings) -> Result<Agreed, ProcessError> {
    let mine = Shared::of(settings);
    let encoded = serde_json::to_vec(&mine)
        .map_err(|e| ProcessError::Launcher(format!("cannot encode this rank's settings: {e}")))?;
    let all = control
        .all_gather(&encoded)?
        .iter()
        .enumerate()
        .map(|(rank, bytes)| {
            serde_json::from_slice::<Shared>(bytes).map_err(|e| {
                ProcessError::Launcher(format!(
                    "rank {rank} sent settings this rank cannot read ({e}): every process must run the same \
                     commcheck build"
                ))
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let leader = all[0];
    for (rank, shared) in all.iter().enumerate().skip(1) {
        for (variable, theirs, leaders) in shared.differences(&leader) {
            if control.rank() == 0 {
                say(format!(
                    "commcheck: rank {rank} has {variable}={theirs}, the leader (rank 0) {leaders}: every rank uses \
                     the leader's"
                ));
            } else if control.rank() == rank {
                say(format!(
                    "commcheck (rank {rank}): {variable}={theirs} here, {leaders} on the leader (rank 0): this rank \
                     uses the leader's"
                ));
            }
        }
    }
    Ok(Agreed {
        limit: Duration::from_millis(leader.case_timeout_ms),
        grace: Duration::from_millis(leader.grace_ms),
        base: leader.base,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shared(timeout: u64, grace: u64, seed: Option<u64>, base: u64) -> Shared {
        Shared {
            case_timeout_ms: timeout,
            grace_ms: grace,
            seed,
            base,
        }
    }

    #[test]
    fn each_differing_setting_is_named() {
        let leader = shared(20_000, 10_000, None, 42);
        assert!(shared(20_000, 10_000, None, 7)
            .differences(&leader)
            .is_empty());
        assert!(shared(20_000, 10_000, Some(42), 42)
            .differences(&leader)
            .is_empty());
        let found = shared(5_000, 0, Some(7), 7).differences(&leader);
        let names: Vec<_> = found.iter().map(|(variable, _, _)| *variable).collect();
        assert_eq!(
            names,
            [
                "COMMCHECK_CASE_TIMEOUT_MS",
                "COMMCHECK_GRACE_MS",
                "COMMCHECK_SEED"
            ]
        );
        assert_eq!(found[0].1, "5000");
        assert_eq!(found[0].2, "20000");
    }
}
