//! Property tests of the exchange operations on the CPU reference backend:
//! point-to-point bundles (P2P-1), broadcast from any root and out-of-range
//! roots (BRD-1, BRD-2), barriers with a late member (BAR-1) and success
//! agreement (AGR-1), over random worlds of 1 to 8 ranks, shapes (empty and
//! one-element included), roots, statuses and which member joins last.
//!
//! Each instance is one world run by `commcheck::world::run_script` under its
//! watchdog; a failure shrinks to a minimal instance and prints it.

use std::sync::Arc;
use std::time::Duration;

use commcheck::world::run_script;
use commcheck::{Check, Finding, RankCtx};
use commcheck_cpu::{CpuBackend, CpuCompletion, CpuTensor};
use commcheck_reference::cpu::CpuHarness;
use eredu_core::checkpoint::TensorDtype;
use eredu_core::Completion;
use eredu_runtime::backend::{
    BarrierBackend, BroadcastBackend, FailureAgreementBackend, PointToPointBackend,
};
use eredu_runtime::{BoundaryRoleContract, CommunicationRouteId, RoleExactBoundaryContract};
use proptest::prelude::*;

type Ctx<'c, 'w> = &'c RankCtx<'w, CpuHarness>;

/// Watchdog of one instance's world.
const LIMIT: Duration = Duration::from_secs(10);
/// Bound on one wait for a peer's signal: only against a signal that is
/// never raised, since the world's watchdog (progress-based, so load alone
/// never trips it) ends a real hang long before.
const WAIT: Duration = Duration::from_secs(120);

fn violation(message: String) -> Finding {
    Finding::Violation(message)
}

fn run(
    ranks: usize,
    script: impl Fn(Ctx<'_, '_>) -> Check + Send + Sync + 'static,
) -> Result<(), String> {
    run_script(Arc::new(CpuHarness::new()), ranks, 0, LIMIT, script)
}

/// Waits for a completion with the backend's own blocking `wait()`: a hang
/// is the run's watchdog's (progress-based, so load alone never trips it),
/// never a bound of this test's own.
fn wait(completion: &CpuCompletion, what: &str) -> Check {
    completion
        .wait()
        .map_err(|error| violation(format!("{what}: failed: {error}")))
}

/// Submits in turn: the `late` member only once every other member has
/// submitted, each of them first running `early` on its submission.
fn in_turn<T>(
    ctx: Ctx<'_, '_>,
    late: usize,
    tag: &str,
    submit: impl FnOnce() -> Result<T, Finding>,
    early: impl FnOnce(&T) -> Check,
) -> Result<T, Finding> {
    if ctx.rank() == late {
        for peer in (0..ctx.size()).filter(|&peer| peer != late) {
            if !ctx.await_signal(&format!("{tag}-{peer}"), WAIT) {
                return Err(violation(format!("{tag}: rank {peer} never submitted")));
            }
        }
        return submit();
    }
    let submitted = submit()?;
    early(&submitted)?;
    ctx.signal(&format!("{tag}-{}", ctx.rank()));
    Ok(submitted)
}

/// An early member's collective must still be pending: the late one is out.
fn still_pending(completion: &CpuCompletion, what: &str, late: usize) -> Check {
    match completion.is_complete() {
        Ok(false) => Ok(()),
        other => Err(violation(format!(
            "{what}: {other:?} before member {late} joined"
        ))),
    }
}

fn same_bits(got: &[f32], expected: &[f32]) -> bool {
    got.len() == expected.len()
        && got
            .iter()
            .zip(expected)
            .all(|(a, b)| a.to_bits() == b.to_bits())
}

fn values(tag: usize, len: usize) -> Vec<f32> {
    (0..len).map(|i| (tag * 100 + i) as f32 - 50.0).collect()
}

// ------------------------------------------------------------------ P2P-1

#[derive(Debug, Clone)]
struct Transfer {
    ranks: usize,
    source: usize,
    destination: usize,
    /// Framable shapes (the framing admits no zero extent).
    shapes: Vec<Vec<usize>>,
    /// Whether the receiver submits last (otherwise the sender does).
    receiver_late: bool,
}

fn transfer() -> impl Strategy<Value = Transfer> {
    (2usize..=8)
        .prop_flat_map(|ranks| {
            (
                Just(ranks),
                0..ranks,
                1..ranks,
                prop::collection::vec(prop::collection::vec(1usize..=3, 1..=3), 1..=4),
                any::<bool>(),
            )
        })
        .prop_map(|(ranks, source, offset, shapes, receiver_late)| Transfer {
            ranks,
            source,
            destination: (source + offset) % ranks,
            shapes,
            receiver_late,
        })
}

fn framed(
    id: u64,
    shapes: &[Vec<usize>],
    tensors: Vec<CpuTensor>,
) -> Result<Vec<eredu_runtime::RoleExactBoundaryValue<CpuTensor>>, Finding> {
    let roles = shapes
        .iter()
        .enumerate()
        .map(|(i, shape)| {
            BoundaryRoleContract::new(format!("value-{i}"), TensorDtype::F32, shape.clone())
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Finding::Harness(e.to_string()))?;
    RoleExactBoundaryContract::new("commcheck.properties", roles.clone())
        .and_then(|contract| contract.frame_values(CommunicationRouteId::new(id), &roles, tensors))
        .map_err(|e| Finding::Harness(e.to_string()))
}

fn transfer_script(t: Transfer) -> impl Fn(Ctx<'_, '_>) -> Check + Send + Sync + 'static {
    move |ctx| {
        let me = ctx.rank();
        if me != t.source && me != t.destination {
            return Ok(());
        }
        let route = ctx.route(9, t.source, t.destination)?;
        ctx.signal(&format!("open-{me}"));
        let peer = if me == t.source {
            t.destination
        } else {
            t.source
        };
        if !ctx.await_signal(&format!("open-{peer}"), WAIT) {
            return Err(violation(format!("rank {peer} never opened the route")));
        }
        let sender = me == t.source;
        if sender != t.receiver_late && !ctx.await_signal("first-submitted", WAIT) {
            return Err(violation("the first side never submitted".into()));
        }
        let tensors = t
            .shapes
            .iter()
            .enumerate()
            .map(|(i, shape)| {
                let len = shape.iter().product();
                ctx.tensor(
                    &if sender {
                        values(i, len)
                    } else {
                        vec![f32::NAN; len]
                    },
                    shape,
                )
            })
            .collect::<Result<Vec<_>, _>>()?;
        let submission =
            CpuBackend::send_receive(framed(9, &t.shapes, tensors)?, &route, ctx.executor())
                .map_err(|e| violation(format!("send_receive submission: {e}")))?;
        ctx.signal("first-submitted");
        wait(
            &submission.completion,
            if sender { "sender" } else { "receiver" },
        )?;
        if submission.output.len() != t.shapes.len() {
            return Err(violation(format!(
                "rank {me}: {} values",
                submission.output.len()
            )));
        }
        for (i, (output, shape)) in submission.output.iter().zip(&t.shapes).enumerate() {
            let expected = values(i, shape.iter().product());
            let got = ctx.read(output)?;
            let got_shape: Vec<usize> = eredu_nn::Tensor::shape(output)
                .iter()
                .map(|&d| d as usize)
                .collect();
            if &got_shape != shape || !same_bits(&got, &expected) {
                return Err(violation(format!(
                    "rank {me}: value {i} is {got:?} of shape {got_shape:?}"
                )));
            }
        }
        Ok(())
    }
}

// ------------------------------------------------------------------ BRD-1, BRD-2

#[derive(Debug, Clone)]
struct Publication {
    ranks: usize,
    root: usize,
    /// Any shape: empty and one-element ones included.
    shape: Vec<usize>,
    late: usize,
}

fn publication() -> impl Strategy<Value = Publication> {
    (1usize..=8)
        .prop_flat_map(|ranks| {
            (
                Just(ranks),
                0..ranks,
                prop::collection::vec(0usize..=3, 1..=3),
                0..ranks,
            )
        })
        .prop_map(|(ranks, root, shape, late)| Publication {
            ranks,
            root,
            shape,
            late,
        })
}

fn publication_script(p: Publication) -> impl Fn(Ctx<'_, '_>) -> Check + Send + Sync + 'static {
    move |ctx| {
        let len: usize = p.shape.iter().product();
        let expected = values(p.root + 1, len);
        let input = if ctx.rank() == p.root {
            expected.clone()
        } else {
            [f32::NAN, f32::INFINITY, f32::NEG_INFINITY]
                .into_iter()
                .cycle()
                .take(len)
                .collect()
        };
        let input = ctx.tensor(&input, &p.shape)?;
        let submission = in_turn(
            ctx,
            p.late,
            "broadcast",
            || {
                CpuBackend::broadcast(input, p.root, ctx.group(), ctx.executor())
                    .map_err(|e| violation(format!("broadcast submission: {e}")))
            },
            |submission| still_pending(&submission.completion, "broadcast", p.late),
        )?;
        wait(&submission.completion, "broadcast")?;
        let got = ctx.read(&submission.output)?;
        if !same_bits(&got, &expected) {
            return Err(violation(format!(
                "rank {}: output {got:?}, expected {expected:?}",
                ctx.rank()
            )));
        }
        Ok(())
    }
}

#[derive(Debug, Clone)]
struct BadRoot {
    ranks: usize,
    beyond: usize,
}

fn bad_root_script(b: BadRoot) -> impl Fn(Ctx<'_, '_>) -> Check + Send + Sync + 'static {
    move |ctx| {
        let root = b.ranks.saturating_add(b.beyond);
        let input = ctx.tensor(&[1.0], &[1])?;
        let Ok(submission) = CpuBackend::broadcast(input, root, ctx.group(), ctx.executor()) else {
            return Ok(());
        };
        match wait(&submission.completion, "broadcast") {
            Ok(()) => Err(violation(format!(
                "root {root} of {} members completed",
                b.ranks
            ))),
            Err(Finding::Violation(message)) if message.contains("still pending") => {
                Err(violation(message))
            }
            Err(_) => Ok(()),
        }
    }
}

// ------------------------------------------------------------------ BAR-1

fn barrier_script(late: usize) -> impl Fn(Ctx<'_, '_>) -> Check + Send + Sync + 'static {
    move |ctx| {
        let completion = in_turn(
            ctx,
            late,
            "barrier",
            || {
                CpuBackend::barrier(ctx.group(), ctx.executor())
                    .map_err(|e| violation(format!("barrier submission: {e}")))
            },
            |completion| still_pending(completion, "barrier", late),
        )?;
        wait(&completion, "barrier")
    }
}

// ------------------------------------------------------------------ AGR-1

#[derive(Debug, Clone)]
struct Agreement {
    statuses: Vec<bool>,
    late: usize,
}

fn agreement() -> impl Strategy<Value = Agreement> {
    prop::collection::vec(any::<bool>(), 1..=8)
        .prop_flat_map(|statuses| {
            let ranks = statuses.len();
            (Just(statuses), 0..ranks)
        })
        .prop_map(|(statuses, late)| Agreement { statuses, late })
}

fn agreement_script(a: Agreement) -> impl Fn(Ctx<'_, '_>) -> Check + Send + Sync + 'static {
    move |ctx| {
        let status = a.statuses[ctx.rank()];
        let submission = in_turn(
            ctx,
            a.late,
            "agree",
            || {
                CpuBackend::agree_success(status, ctx.group(), ctx.executor())
                    .map_err(|e| violation(format!("agree_success submission: {e}")))
            },
            |_| Ok(()),
        )?;
        wait(&submission.completion, "agree_success")?;
        let agreed = CpuBackend::resolve_failure_agreement(submission.output)
            .map_err(|e| violation(format!("resolve_failure_agreement: {e}")))?;
        let expected = a.statuses.iter().all(|&s| s);
        if agreed != expected {
            return Err(violation(format!(
                "rank {} resolved {agreed}, expected {expected}",
                ctx.rank()
            )));
        }
        Ok(())
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn point_to_point_delivers_the_exact_bundle(t in transfer()) {
        let ranks = t.ranks;
        let outcome = run(ranks, transfer_script(t.clone()));
        prop_assert!(outcome.is_ok(), "{:?}: {}", t, outcome.unwrap_err());
    }

    #[test]
    fn broadcast_publishes_the_roots_input(p in publication()) {
        let outcome = run(p.ranks, publication_script(p.clone()));
        prop_assert!(outcome.is_ok(), "{:?}: {}", p, outcome.unwrap_err());
    }

    #[test]
    fn broadcast_refuses_an_out_of_range_root(ranks in 1usize..=8, beyond in prop_oneof![0usize..4, Just(usize::MAX)]) {
        let b = BadRoot { ranks, beyond };
        let outcome = run(ranks, bad_root_script(b.clone()));
        prop_assert!(outcome.is_ok(), "{:?}: {}", b, outcome.unwrap_err());
    }

    #[test]
    fn barrier_waits_for_the_late_member((ranks, late) in (1usize..=8).prop_flat_map(|n| (Just(n), 0..n))) {
        let outcome = run(ranks, barrier_script(late));
        prop_assert!(outcome.is_ok(), "{} ranks, member {} late: {}", ranks, late, outcome.unwrap_err());
    }

    #[test]
    fn agreement_is_the_conjunction_of_statuses(a in agreement()) {
        let outcome = run(a.statuses.len(), agreement_script(a.clone()));
        prop_assert!(outcome.is_ok(), "{:?}: {}", a, outcome.unwrap_err());
    }
}
