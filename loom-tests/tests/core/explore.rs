//! Exploring a model under loom: which core a run explores (the shipped
//! one, a core mutant or a replayed backend defect), the preemption bound,
//! the count of interleavings, and what a clean run and a mutant run must
//! find (no failure; a failure naming the invariant the mutant breaks).

use std::io::Write as _;
use std::panic::{self, AssertUnwindSafe};

use commcheck_cpu::loom_core::{Core, Mutant, Retained};
use commcheck_cpu::Defect;

/// Which core a model run explores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Variant {
    /// The shipped core.
    Clean,
    /// A loom-only mutant planted in the core (`commcheck_cpu::loom_core::Mutant`).
    Core(Mutant),
    /// A planted defect of the backend, replayed by the model over the core
    /// (for a mechanism that lives outside `core.rs`).
    Backend(Defect),
}

impl Variant {
    /// SPEC ID of the invariant the variant breaks (`None` for the shipped core).
    fn breaks(self) -> Option<&'static str> {
        match self {
            Variant::Clean => None,
            Variant::Core(mutant) => Some(mutant.invariant()),
            Variant::Backend(defect) => Some(defect.invariant()),
        }
    }

    /// A core of queued work retaining `retained`.
    pub(crate) fn core(self, retained: Vec<Retained>) -> Core {
        self.plant(Core::new(retained))
    }

    /// A core of work complete at submission.
    pub(crate) fn completed_core(self) -> Core {
        self.plant(Core::completed())
    }

    fn plant(self, core: Core) -> Core {
        match self {
            Variant::Core(mutant) => core.with_mutant(mutant),
            Variant::Clean | Variant::Backend(_) => core,
        }
    }
}

/// One loom model of the core.
pub(crate) struct Model {
    pub(crate) name: &'static str,
    /// Preemption bound of the default run (see the crate docs).
    pub(crate) bound: usize,
    /// The invariant a deadlock of this model breaks: every blocking call of
    /// a model is expected to return, so loom's "deadlock" is reported as a
    /// violation of it.
    pub(crate) liveness: &'static str,
    pub(crate) run: fn(Variant),
}

/// The preemption bound a model runs with: `LOOM_MAX_PREEMPTIONS` (read by
/// loom itself) for every model, else none with `COMMCHECK_LOOM_DEEP=1`,
/// else the model's own.
pub(crate) fn preemption_bound(model: &Model, builder: &loom::model::Builder) -> Option<usize> {
    if builder.preemption_bound.is_some() {
        return builder.preemption_bound;
    }
    match std::env::var("COMMCHECK_LOOM_DEEP") {
        Ok(deep) if !deep.is_empty() && deep != "0" => None,
        _ => Some(model.bound),
    }
}

pub(crate) struct Explored {
    interleavings: usize,
    bound: Option<usize>,
    failure: Option<String>,
}

impl Explored {
    fn bound(&self) -> String {
        self.bound
            .map_or_else(|| "none".to_owned(), |bound| bound.to_string())
    }
}

/// Runs `model` on `variant` under loom, counting the executions (the
/// interleavings explored) and catching the first failure.
pub(crate) fn explore(model: &Model, variant: Variant) -> Explored {
    let mut builder = loom::model::Builder::new();
    let bound = preemption_bound(model, &builder);
    builder.preemption_bound = bound;
    let count = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = std::sync::Arc::clone(&count);
    let run = model.run;
    let result = panic::catch_unwind(AssertUnwindSafe(|| {
        builder.check(move || {
            counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            run(variant);
        });
    }));
    let failure = result.err().map(|payload| {
        let message = payload
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
            .unwrap_or_else(|| "a panic without a message".to_owned());
        if message.starts_with("deadlock") {
            format!(
                "{} violated: a thread blocked on the core is never woken; loom: {message}",
                model.liveness
            )
        } else {
            message
        }
    });
    Explored {
        interleavings: count.load(std::sync::atomic::Ordering::Relaxed),
        bound,
        failure,
    }
}

/// One line on the test binary's stderr, outside libtest's output capture,
/// so CI logs show it for passing tests too.
pub(crate) fn report(line: String) {
    let _ = std::io::stderr().write_all(format!("{line}\n").as_bytes());
}

/// The shipped core: loom must find no failing interleaving.
pub(crate) fn clean(model: &Model) {
    let explored = explore(model, Variant::Clean);
    report(format!(
        "loom {}: {} interleavings (preemption bound {})",
        model.name,
        explored.interleavings,
        explored.bound()
    ));
    if let Some(failure) = &explored.failure {
        panic!(
            "loom {}: the shipped core fails in interleaving {} (preemption bound {}): {failure}",
            model.name,
            explored.interleavings,
            explored.bound()
        );
    }
}

/// A mutant: loom must find a failing interleaving, and the failure must
/// name the invariant the mutant breaks.
pub(crate) fn mutant(model: &Model, variant: Variant) {
    let expected = variant.breaks().expect("a mutant breaks an invariant");
    let explored = explore(model, variant);
    let Some(failure) = &explored.failure else {
        panic!(
            "loom {} with {variant:?}: no failing interleaving among {} (preemption bound {}): \
             the model does not catch this {expected} mutant",
            model.name,
            explored.interleavings,
            explored.bound()
        );
    };
    report(format!(
        "loom {} with {variant:?}: caught in interleaving {} (preemption bound {}): {}",
        model.name,
        explored.interleavings,
        explored.bound(),
        failure.lines().next().unwrap_or_default()
    ));
    assert!(
        failure.contains(&format!("{expected} violated")),
        "loom {} with {variant:?}: expected a {expected} violation, got: {failure}",
        model.name
    );
}
