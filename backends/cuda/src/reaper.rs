//! The reaper: one thread per device that polls what is in flight (work
//! items and collective instances) and moves it on: a work item whose event
//! completed has its retained resources released (outside any lock, never
//! inside a CUDA callback); a collective whose members all arrived has its
//! gates opened. Quarantined work is simply left here until it completes.
//!
//! It knows nothing of what it polls ([`Pollable`]), so the modules that
//! register things depend on it, never the other way round.

use crate::error::CudaError;
use cudarc::driver::CudaContext;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// What one poll did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Polled {
    /// Nothing changed.
    Pending,
    /// Something moved on; more to do later.
    Progressed,
    /// Finished: drop it from the registry.
    Done,
}

/// Something in flight.
pub(crate) trait Pollable: Send + Sync {
    /// Moves on as far as it can without blocking.
    fn poll(&self) -> Polled;
    /// Whether it still holds retained resources (the ledger's pending work).
    fn unreleased(&self) -> bool {
        false
    }
}

#[derive(Default)]
struct State {
    items: Vec<Arc<dyn Pollable>>,
    shutdown: bool,
}

/// The registry of in-flight items, drained by the reaper thread.
pub(crate) struct Registry {
    state: Mutex<State>,
    wake: Condvar,
}

/// Pause between polls while something is in flight: short after progress,
/// backing off to this when nothing moves.
const MAX_PAUSE: Duration = Duration::from_micros(500);

impl Registry {
    /// A registry and its reaper thread.
    pub(crate) fn start(context: &Arc<CudaContext>) -> Result<Arc<Self>, CudaError> {
        let registry = Arc::new(Self {
            state: Mutex::new(State::default()),
            wake: Condvar::new(),
        });
        let reaper = Arc::clone(&registry);
        let context = Arc::clone(context);
        std::thread::Builder::new()
            .name("commcheck-cuda-reaper".into())
            .spawn(move || {
                let _ = context.bind_to_thread();
                reaper.run();
            })
            .map_err(|e| CudaError::Invalid {
                operation: "CudaDevice::open",
                expected: "a reaper thread".into(),
                got: e.to_string(),
            })?;
        Ok(registry)
    }

    /// Adds an item to poll.
    pub(crate) fn register(&self, item: Arc<dyn Pollable>) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        state.items.push(item);
        drop(state);
        self.wake.notify_one();
    }

    /// Items still holding retained resources.
    pub(crate) fn unreleased(&self) -> usize {
        let items = self
            .state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .items
            .clone();
        items.iter().filter(|item| item.unreleased()).count()
    }

    /// Whether nothing is in flight.
    pub(crate) fn is_empty(&self) -> bool {
        self.state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .items
            .is_empty()
    }

    /// The device is gone: the reaper ends once nothing is in flight.
    pub(crate) fn shut_down(&self) {
        self.state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .shutdown = true;
        self.wake.notify_one();
    }

    fn run(&self) {
        let mut pause = Duration::from_micros(10);
        loop {
            let items = {
                let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
                while state.items.is_empty() {
                    if state.shutdown {
                        return;
                    }
                    state = self.wake.wait(state).unwrap_or_else(|p| p.into_inner());
                }
                state.items.clone()
            };
            let mut progressed = false;
            let mut done = Vec::new();
            for item in &items {
                match item.poll() {
                    Polled::Pending => {}
                    Polled::Progressed => progressed = true,
                    Polled::Done => {
                        progressed = true;
                        done.push(Arc::clone(item));
                    }
                }
            }
            drop(items);
            if !done.is_empty() {
                let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
                state
                    .items
                    .retain(|item| !done.iter().any(|d| Arc::ptr_eq(d, item)));
            }
            // Dropped here, outside the lock: releasing retained resources
            // runs their destructors.
            drop(done);
            pause = if progressed {
                Duration::from_micros(10)
            } else {
                (pause * 2).min(MAX_PAUSE)
            };
            std::thread::sleep(pause);
        }
    }
}
