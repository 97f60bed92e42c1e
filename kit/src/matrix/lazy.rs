//! Pending local work without instruments: the backend's own lazy tensor
//! work.
//!
//! `SubmissionBackend: NeuralBackend`, so every backend can build a chain of
//! `matmul`s over square `f32` matrices (entries `1/n`, so every product
//! equals its factors and nothing overflows). A chain built but not yet
//! evaluated costs nothing; submitting it (`submit`, or
//! `submit_local_dependencies`) makes the backend evaluate it, which keeps the
//! submission pending for a while with no hold instrument.
//!
//! **Calibration.** Once per run and backend (before the cases start, with
//! the process quiet, when the harness has no hold), the kit times building,
//! submitting and completing chains, growing them until one takes about
//! [`TARGET`] (shortening a chain once where growing its matrices overshot
//! by half). The fastest of two runs is the calibration, recorded in the
//! result file (operation, size, chain length, duration).
//!
//! **The guarantee.** Evaluation cannot start before the chain's construction
//! started, and takes at least a third of the calibrated duration (slower
//! under load, never much faster), so the work is certainly pending until
//! `built_at + duration / 3`. A check that needs the work pending makes its
//! observations, then confirms that this instant has not passed; if it has,
//! the attempt is inconclusive and the runner retries it with twice the work.
//!
//! **Eager backends.** A backend that evaluates while the chain is built, or
//! inside the submitting call, never shows this work pending: calibration then
//! reports it, and the checks that need pending local work are
//! `not-supported` with that reason (provide the hold instrument).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use eredu_runtime::backend::SubmissionBackend;

use crate::check::{slack, Finding};
use crate::harness::{Backend, Executor, Harness, Tensor, TensorContext};
use crate::matrix::Handle;
use crate::results::Calibration;
use crate::world::RankCtx;

/// Duration calibration aims for: a third of it covers every pending window
/// the checks use (a few [`slack::SETTLE`]s, [`slack::DEADLINE`] and the
/// calls around them).
pub const TARGET: Duration = Duration::from_millis(600);

/// The longest calibration may take before it gives up.
const BUDGET: Duration = Duration::from_secs(30);

/// Longest chain calibration builds.
const MAX_CHAIN: usize = 512;

/// Largest matrix side calibration uses. Large enough that a fast backend
/// reaches [`TARGET`] with a short chain: a backend may throttle a long
/// chain of small products inside the submitting call (MLX waits there once
/// about a hundred dispatches are in flight), which would spend the pending
/// window before `submit` returns. A 2048×2048 `f32` matrix is 16 MiB.
const MAX_SIZE: usize = 2048;

/// Longest run of products in one segment of a chain.
const SEGMENT: usize = 16;

/// The operation chained.
const OPERATION: &str = "matmul";

/// Calibrations of this process, by backend identity.
static CALIBRATIONS: Mutex<Option<HashMap<String, Calibration>>> = Mutex::new(None);

fn key<H: Harness>(harness: &H) -> String {
    let identity = harness.identity();
    format!(
        "{}\u{0}{}\u{0}{}",
        identity.name, identity.version, identity.device
    )
}

/// The calibration made for `harness`'s backend in this process, if any.
pub fn calibration<H: Harness>(harness: &H) -> Option<Calibration> {
    let calibrations = CALIBRATIONS.lock().unwrap_or_else(|p| p.into_inner());
    calibrations.as_ref()?.get(&key(harness)).cloned()
}

/// Calibrates `harness`'s backend now, in a world of one rank of its own,
/// unless it was calibrated already: the runner does this before its cases
/// start when the harness has no hold (the checks then keep local work
/// pending with lazy chains), so that the duration is measured with the
/// process quiet. A calibration made while many cases ran would be slow, and
/// a third of a slow duration is no lower bound once the machine is quiet
/// again (a check could then take finished work for pending).
pub(crate) fn calibrate_alone<H: Harness>(harness: &Arc<H>, seed: u64, limit: Duration) {
    if calibration(&**harness).is_some() {
        return;
    }
    let script: crate::world::Script<H> = Arc::new(|ctx: &RankCtx<'_, H>| {
        calibrated(ctx);
        Ok(())
    });
    // A world that cannot run leaves the backend uncalibrated: the first
    // check that needs lazy work calibrates it then, as before.
    let _ = crate::world::run_world(
        Arc::clone(harness),
        1,
        seed,
        limit,
        script,
        &crate::world::Run::default(),
    );
}

/// The calibration for the backend of `ctx`, made on this rank if needed.
fn calibrated<H: Harness>(ctx: &RankCtx<'_, H>) -> Calibration {
    if let Some(known) = calibration(ctx.harness()) {
        return known;
    }
    let made = match calibrate(ctx) {
        Ok(made) => made,
        Err(reason) => Calibration {
            operation: OPERATION.into(),
            size: 0,
            chain: 0,
            millis: 0,
            unavailable: Some(reason),
        },
    };
    let mut calibrations = CALIBRATIONS.lock().unwrap_or_else(|p| p.into_inner());
    calibrations
        .get_or_insert_with(HashMap::new)
        .entry(key(ctx.harness()))
        .or_insert(made)
        .clone()
}

/// A built, unevaluated chain.
struct Chain<H: Harness> {
    tensor: Tensor<H>,
    started: Instant,
    built: Duration,
}

/// Builds a chain on `context`.
fn build<H: Harness>(
    ctx: &RankCtx<'_, H>,
    context: &TensorContext<H>,
    size: usize,
    chain: usize,
) -> Result<Chain<H>, String> {
    let started = Instant::now();
    let entry = 1.0 / size as f32;
    let factor = ctx
        .harness()
        .tensor(ctx.state(), &vec![entry; size * size], &[size, size])
        .map_err(|error| format!("making a {size}x{size} tensor failed: {error}"))?;
    let matmul = |lhs: &Tensor<H>| {
        eredu_nn::Tensor::matmul(lhs, &factor, context)
            .map_err(|error| format!("{OPERATION} of {size}x{size} tensors failed: {error}"))
    };
    // Segments of at most SEGMENT products, summed in a balanced tree, so the
    // graph stays shallow however long the chain (a backend may evaluate it
    // recursively).
    let mut parts = Vec::new();
    let mut left = chain.max(1);
    while left > 0 {
        let length = left.min(SEGMENT);
        let mut part = matmul(&factor)?;
        for _ in 1..length {
            part = matmul(&part)?;
        }
        parts.push(part);
        left -= length;
    }
    while parts.len() > 1 {
        let mut next = Vec::with_capacity(parts.len().div_ceil(2));
        let mut pairs = parts.into_iter();
        while let Some(first) = pairs.next() {
            next.push(match pairs.next() {
                Some(second) => eredu_nn::Tensor::add(&first, &second, context)
                    .map_err(|error| format!("add of {size}x{size} tensors failed: {error}"))?,
                None => first,
            });
        }
        parts = next;
    }
    let tensor = parts.pop().ok_or("empty chain")?;
    Ok(Chain {
        tensor,
        started,
        built: started.elapsed(),
    })
}

/// Builds, submits and completes one chain; its total duration, or why it
/// cannot serve as pending work.
fn measure<H: Harness>(
    ctx: &RankCtx<'_, H>,
    size: usize,
    chain: usize,
) -> Result<Duration, String> {
    let built = build(ctx, ctx.context(), size, chain)?;
    let submitting = Instant::now();
    let completion = Backend::<H>::submit(ctx.executor(), [&built.tensor])
        .map(Handle::<H>::Plain)
        .map_err(|error| format!("submit of a {OPERATION} chain failed: {error}"))?;
    let submitted = submitting.elapsed();
    crate::matrix::wait_within(&completion, BUDGET)
        .map_err(|error| format!("a submitted {OPERATION} chain did not complete: {error}"))?;
    let total = built.started.elapsed();
    if total >= slack::SETTLE && built.built * 2 >= total {
        return Err(format!(
            "the backend evaluates eagerly: building a chain of {chain} {OPERATION}s of {size}x{size} took \
             {:?} of its {total:?}, so the work is done before it is submitted",
            built.built
        ));
    }
    if total >= slack::SETTLE && submitted * 2 >= total {
        return Err(format!(
            "the backend evaluates inside the submitting call: submit took {submitted:?} of the chain's \
             {total:?}, so the work is done when its completion is returned"
        ));
    }
    Ok(total)
}

/// Longest calibrated duration taken as it is: past it, a chain that can be
/// shortened is (see [`calibrate`]).
const OVERSHOOT: Duration = Duration::from_millis(TARGET.as_millis() as u64 * 3 / 2);

fn calibrate<H: Harness>(ctx: &RankCtx<'_, H>) -> Result<Calibration, String> {
    let start = Instant::now();
    let (mut size, mut chain) = (32usize, 8usize);
    // Doubling the side is taken for 8x the work, but costs more where the
    // matrices outgrow a cache: a doubling can land at several times the
    // target, and every lazy hold of the run would last that much longer
    // (and slow down more beside other cases). Where one did, the chain is
    // shortened towards the target, once.
    let mut shortened = false;
    loop {
        let took = measure(ctx, size, chain)?.min(measure(ctx, size, chain)?);
        if took > OVERSHOOT && chain > 1 && !shortened {
            let wanted = TARGET.as_secs_f64() / took.as_secs_f64();
            chain = ((chain as f64 * wanted).ceil() as usize).clamp(1, chain - 1);
            shortened = true;
            continue;
        }
        if took >= TARGET * 4 / 5 {
            return Ok(Calibration {
                operation: OPERATION.into(),
                size,
                chain,
                millis: took.as_millis() as u64,
                unavailable: None,
            });
        }
        if start.elapsed() >= BUDGET {
            return Err(format!(
                "calibration gave up after {BUDGET:?}: a chain of {chain} {OPERATION}s of {size}x{size} took only {took:?}"
            ));
        }
        // Doubling the side costs 8x (more past a cache): take it while
        // that stays within the target, and grow the chain for the rest
        // (not once a doubling overshot).
        if size < MAX_SIZE && took * 8 <= TARGET && !shortened {
            size *= 2;
        } else if chain >= MAX_CHAIN {
            return Err(format!(
                "a chain of {chain} {OPERATION}s of {size}x{size} took only {took:?}, less than {TARGET:?}"
            ));
        } else {
            let wanted = TARGET.as_secs_f64() / took.as_secs_f64().max(1e-6);
            chain = ((chain as f64 * wanted).ceil() as usize).clamp(chain + 1, MAX_CHAIN);
        }
    }
}

/// Unevaluated work that will keep a submission of it pending.
pub(crate) struct Heavy<H: Harness> {
    /// The chain's result, not yet evaluated.
    pub(crate) tensor: Tensor<H>,
    /// Until when a submission of it is certainly pending.
    pub(crate) pending_until: Instant,
    /// About how long it takes (the calibrated duration, scaled).
    pub(crate) takes: Duration,
}

/// Builds lazy work to submit on `executor` for `ctx`'s attempt (each retry
/// doubles it), or `NotSupported` with the calibration's reason. It is built
/// on the executor's own context where the harness names one
/// ([`Harness::context_on`]).
pub(crate) fn heavy<H: Harness>(
    ctx: &RankCtx<'_, H>,
    executor: &Executor<H>,
) -> Result<Heavy<H>, Finding> {
    heavier(ctx, executor, 1)
}

/// [`heavy`] with `factor` times the work (to outlast other lazy work).
pub(crate) fn heavier<H: Harness>(
    ctx: &RankCtx<'_, H>,
    executor: &Executor<H>,
    factor: usize,
) -> Result<Heavy<H>, Finding> {
    let calibration = calibrated(ctx);
    if let Some(reason) = &calibration.unavailable {
        return Err(Finding::NotSupported(format!(
            "no pending local work without the hold instrument: {reason}"
        )));
    }
    let scale = (1usize << ctx.attempt().min(4)) * factor.max(1);
    let chain = calibration.chain * scale;
    let built = build(ctx, ctx.context_on(executor), calibration.size, chain).map_err(|error| {
        Finding::NotSupported(format!(
            "no pending local work without the hold instrument: {error}"
        ))
    })?;
    let guaranteed = Duration::from_millis(calibration.millis) * scale as u32 / 3;
    if built.built * 2 >= guaranteed {
        return Err(crate::check::setup(format!(
            "building the lazy work took {:?}, most of the {guaranteed:?} it is known to stay pending",
            built.built
        )));
    }
    Ok(Heavy {
        tensor: built.tensor,
        pending_until: built.started + guaranteed,
        takes: Duration::from_millis(calibration.millis) * scale as u32,
    })
}
