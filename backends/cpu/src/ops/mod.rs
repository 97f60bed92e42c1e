//! Implementations of the eredu backend traits for [`crate::CpuBackend`].
//!
//! Every operation follows one pattern: validate locally (errors here are
//! returned before any work exists, SUB-4), decide what the completion
//! retains, and queue a body that reaches those resources only through weak
//! references. Retention is therefore exactly what the completion holds: a
//! planted defect that retains less is observable through liveness probes
//! and the ledger, and the body reports a use after free instead of
//! silently working.

pub(crate) mod collectives;
pub use collectives::CpuAgreement;
mod local;
mod point_to_point;

use std::sync::{Arc, Weak};

use crate::core::Retained;
use crate::error::CpuError;
use crate::tensor::{CpuTensor, Storage};

/// The resources one submission's completion retains.
pub(crate) struct Retention {
    retained: Vec<Retained>,
}

impl Default for Retention {
    /// Room for the usual retention (inputs, output, group) and the executor
    /// that [`crate::executor::CpuExecutor::dispatch`] adds, in one allocation.
    fn default() -> Self {
        Self {
            retained: Vec::with_capacity(4),
        }
    }
}

impl Retention {
    /// Retains `value` when `retain` is true; returns a weak reference for the body.
    pub(crate) fn keep<T: Send + Sync + 'static>(
        &mut self,
        value: &Arc<T>,
        retain: bool,
    ) -> Weak<T> {
        if retain {
            self.retained.push(Box::new(Arc::clone(value)));
        }
        Arc::downgrade(value)
    }

    /// Retains a tensor's storage.
    pub(crate) fn storage(&mut self, tensor: &CpuTensor, retain: bool) -> Weak<Storage> {
        self.keep(tensor.storage(), retain)
    }

    pub(crate) fn into_vec(self) -> Vec<Retained> {
        self.retained
    }
}

/// Upgrades a weak reference held by a body; a failure is a use after free.
pub(crate) fn reach<T>(
    weak: &Weak<T>,
    operation: &'static str,
    resource: &'static str,
) -> Result<Arc<T>, CpuError> {
    weak.upgrade().ok_or(CpuError::UseAfterFree {
        operation,
        resource,
    })
}
