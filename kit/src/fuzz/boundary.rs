//! The `boundary` target: one point-to-point exchange whose framing (route,
//! roles, dtypes, shapes, payload) is built only through eredu's public
//! framing, `RoleExactBoundaryContract::frame_values`.
//!
//! Rank 1 sends the sender's frame on the case's route; rank 0 receives
//! with its own frame. What must hold:
//! - headers that differ (bytes or count) never yield success, and the
//!   failure is sticky (P2P-2);
//! - a *consistent* exchange (equal headers, `F32` roles whose declared
//!   shapes are the tensors' shapes on both sides, the header's route the
//!   route travelled) succeeds with the exact payload, bit for bit (P2P-1);
//! - the sender's wire log, where the harness keeps one, shows one native
//!   message carrying exactly the sender's headers (P2P-3).
//!
//! Anything else (a dtype that is not the tensors', a header naming another
//! route on both sides, ...) may succeed or fail, but must not crash or hang.
//! Frames eredu refuses to build are a clean rejection: nothing runs.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use eredu_core::checkpoint::TensorDtype;
use eredu_core::BoundedCompletionWait;
use eredu_runtime::backend::PointToPointBackend;
use eredu_runtime::{BoundaryRoleContract, CommunicationRouteId, RoleExactBoundaryContract};

use super::{decode, describe, Failure, Frame, Input, Target, LIMIT};
use crate::check::{slack, Check, Finding};
use crate::harness::{Backend, Harness, Tensor};
use crate::matrix::Handle;
use crate::world::{run_world, RankCtx, Script, WorldEnd};

/// eredu's dtype of header tag `tag` (`% 14`).
fn dtype(tag: u8) -> TensorDtype {
    match tag % 14 {
        0 => TensorDtype::Bool,
        1 => TensorDtype::F32,
        2 => TensorDtype::F16,
        3 => TensorDtype::Bf16,
        4 => TensorDtype::I8,
        5 => TensorDtype::U8,
        6 => TensorDtype::U16,
        7 => TensorDtype::U32,
        8 => TensorDtype::U64,
        9 => TensorDtype::I16,
        10 => TensorDtype::I32,
        11 => TensorDtype::I64,
        12 => TensorDtype::F64,
        _ => TensorDtype::Complex64,
    }
}

/// The headers eredu frames for `frame`, or `None` when it refuses it.
fn headers(frame: &Frame) -> Option<Vec<Vec<u8>>> {
    let roles = frame
        .roles
        .iter()
        .map(|role| {
            BoundaryRoleContract::new(role.name.clone(), dtype(role.dtype), role.declared.clone())
        })
        .collect::<Result<Vec<_>, _>>()
        .ok()?;
    let contract = RoleExactBoundaryContract::new(frame.schema.clone(), roles.clone()).ok()?;
    let framed = contract
        .frame_values(
            CommunicationRouteId::new(frame.route),
            &roles,
            vec![(); roles.len()],
        )
        .ok()?;
    Some(framed.into_iter().map(|v| v.header().to_vec()).collect())
}

/// Frames `tensors` as `frame` says (eredu's public framing only).
fn framed<T>(
    frame: &Frame,
    tensors: Vec<T>,
) -> Result<Vec<eredu_runtime::RoleExactBoundaryValue<T>>, Finding> {
    let roles = frame
        .roles
        .iter()
        .map(|role| {
            BoundaryRoleContract::new(role.name.clone(), dtype(role.dtype), role.declared.clone())
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Finding::Harness(format!("boundary role: {e}")))?;
    RoleExactBoundaryContract::new(frame.schema.clone(), roles.clone())
        .and_then(|contract| {
            contract.frame_values(CommunicationRouteId::new(frame.route), &roles, tensors)
        })
        .map_err(|e| Finding::Harness(format!("framing: {e}")))
}

/// A violation found by a rank: the SPEC ID and what happened.
type Found = Arc<Mutex<Vec<(&'static str, String)>>>;

fn found(violations: &Found, id: &'static str, message: String) {
    crate::model::lock(violations).push((id, message));
}

const SENT: &str = "commcheck-boundary-sent";
const POSTED: &str = "commcheck-boundary-posted";
const RECEIVED: &str = "commcheck-boundary-received";

/// How long an exchange may take to complete.
const EXCHANGE: Duration = Duration::from_secs(2);

/// Polls `is_complete` until it is `Ok(true)` or `Err`, or `limit` passes
/// (`None`).
fn settle<H: Harness>(completion: &Handle<H>, limit: Duration) -> Option<Result<(), String>> {
    let start = Instant::now();
    loop {
        match completion.is_complete() {
            Ok(true) => return Some(Ok(())),
            Err(error) => return Some(Err(error)),
            Ok(false) if start.elapsed() >= limit => return None,
            Ok(false) => crate::world::pause(Duration::from_micros(100)),
        }
    }
}

/// Ends pending work (a short bounded wait in a supported mode).
fn tear_down<H: Harness>(ctx: &RankCtx<'_, H>, completion: Handle<H>) {
    let mode = crate::model::teardown_mode::<H>();
    if let Ok(policy) = BoundedCompletionWait::new(Duration::from_millis(1), mode) {
        let _ = completion.wait_bounded(ctx, policy);
    }
}

fn tensors<H: Harness>(
    ctx: &RankCtx<'_, H>,
    frame: &Frame,
    sending: bool,
) -> Result<Vec<Tensor<H>>, Finding> {
    frame
        .roles
        .iter()
        .map(|role| {
            let elements = role.tensor.iter().product::<usize>();
            let values = if sending {
                role.values.clone()
            } else {
                vec![0.0; elements]
            };
            ctx.tensor(&values, &role.tensor)
                .map_err(|f| Finding::NotSupported(format!("{f:?}")))
        })
        .collect()
}

/// The `boundary` target's check: one exchange of the decoded frames from
/// rank 1 to rank 0 of a two-rank world. `Ok` for rejected bytes, frames
/// eredu refuses to build, and a harness that does not claim
/// `point_to_point`.
pub fn check_boundary<H: Harness + Clone>(harness: &H, data: &[u8]) -> Result<(), Failure>
where
    Backend<H>: PointToPointBackend,
{
    let Ok(Input::Boundary(case)) = decode(Target::Boundary, data) else {
        return Ok(());
    };
    if !harness.claims().claims(crate::Operation::SendReceive) {
        return Ok(());
    }
    let (Some(sent), Some(expected)) = (headers(&case.sender), headers(&case.receiver)) else {
        return Ok(());
    };
    let equal = sent == expected;
    let consistent = equal
        && case.sender.route == case.route
        && case.sender.roles.len() == case.receiver.roles.len()
        && case
            .sender
            .roles
            .iter()
            .zip(&case.receiver.roles)
            .all(|(s, r)| {
                dtype(s.dtype) == TensorDtype::F32 && s.declared == s.tensor && r.tensor == s.tensor
            });
    let violations: Found = Arc::default();
    let case = Arc::new(case);
    let script: Script<H> = {
        let (case, violations) = (Arc::clone(&case), Arc::clone(&violations));
        Arc::new(move |ctx: &RankCtx<'_, H>| {
            if ctx.rank() == 1 {
                sender(ctx, &case, &sent, &violations)
            } else {
                receiver(ctx, &case, equal, consistent, &violations)
            }
        })
    };
    let failure = |id, message| Failure {
        target: Target::Boundary,
        id,
        message,
        input: describe(Target::Boundary, data),
    };
    let end = run_world(
        Arc::new(harness.clone()),
        2,
        0,
        LIMIT,
        script,
        &Default::default(),
    );
    if let Some((id, message)) = crate::model::lock(&violations).first().cloned() {
        return Err(failure(Some(id), message));
    }
    match end {
        WorldEnd::Finished(checks) => match checks.into_iter().find_map(Result::err) {
            None | Some(Finding::NotSupported(_) | Finding::Inconclusive(_)) => Ok(()),
            Some(finding) => Err(failure(None, format!("{finding:?}"))),
        },
        WorldEnd::Crashed { rank, message } => Err(failure(None, format!("rank {rank} {message}"))),
        WorldEnd::TimedOut { ranks, stacks } => Err(failure(
            None,
            format!(
                "rank(s) {ranks:?} did not return, and nothing moved for {LIMIT:?} (hang){}",
                crate::world::where_they_were(&ranks, &stacks)
            ),
        )),
        // Still moving at the ceiling: too slow here to tell, so nothing found.
        WorldEnd::Overran { .. } => Ok(()),
        WorldEnd::Blocked { invariant, .. } if invariant == crate::world::SETUP => Ok(()),
        WorldEnd::Blocked {
            rank,
            what,
            invariant,
            limit,
        } => Err(failure(
            crate::spec::invariant(&invariant).map(|known| known.id),
            format!("{what} on rank {rank} had not returned after {limit:?}"),
        )),
    }
}

/// Rank 1: sends the sender's frame; checks its wire log.
fn sender<H: Harness>(
    ctx: &RankCtx<'_, H>,
    case: &super::BoundaryCase,
    sent: &[Vec<u8>],
    violations: &Found,
) -> Check
where
    Backend<H>: PointToPointBackend,
{
    let outcome = (|| {
        let route = ctx.route(case.route, 1, 0)?;
        let values = framed(&case.sender, tensors(ctx, &case.sender, true)?)?;
        if !case.sender_first && !ctx.await_signal(POSTED, slack::RELEASE) {
            return Ok(());
        }
        let submitted =
            Backend::<H>::send_receive(values, std::borrow::Borrow::borrow(&route), ctx.executor());
        ctx.signal(SENT);
        let Ok(submission) = submitted else {
            return Ok(());
        };
        let completion = Handle::<H>::Communication(submission.completion);
        if let Some(Ok(())) = settle(&completion, EXCHANGE) {
            if let Some(log) = ctx.wire_log(&route) {
                let headers: Vec<&Vec<u8>> = log.iter().flat_map(|m| &m.headers).collect();
                let one = log.len() == 1 && headers.len() == sent.len();
                if !one || headers.iter().zip(sent).any(|(got, want)| *got != want) {
                    found(
                        violations,
                        "P2P-3",
                        format!(
                            "the sender's wire log shows {} message(s) with {} header(s) for one bundle of {} \
                             value(s); expected one message carrying exactly the framed headers",
                            log.len(),
                            headers.len(),
                            sent.len()
                        ),
                    );
                }
            }
        }
        ctx.await_signal(RECEIVED, EXCHANGE * 2);
        tear_down(ctx, completion);
        Ok(())
    })();
    ctx.signal(SENT);
    outcome
}

/// Rank 0: receives with the receiver's frame; checks the outcome.
fn receiver<H: Harness>(
    ctx: &RankCtx<'_, H>,
    case: &super::BoundaryCase,
    equal: bool,
    consistent: bool,
    violations: &Found,
) -> Check
where
    Backend<H>: PointToPointBackend,
{
    let outcome = receive(ctx, case, equal, consistent, violations);
    ctx.signal(POSTED);
    ctx.signal(RECEIVED);
    outcome
}

fn receive<H: Harness>(
    ctx: &RankCtx<'_, H>,
    case: &super::BoundaryCase,
    equal: bool,
    consistent: bool,
    violations: &Found,
) -> Check
where
    Backend<H>: PointToPointBackend,
{
    let route = ctx.route(case.route, 1, 0)?;
    let values = framed(&case.receiver, tensors(ctx, &case.receiver, false)?)?;
    if case.sender_first && !ctx.await_signal(SENT, slack::RELEASE) {
        return Ok(());
    }
    let submit =
        || Backend::<H>::send_receive(values, std::borrow::Borrow::borrow(&route), ctx.executor());
    let submitted = if case.sender_first {
        submit()
    } else {
        crate::world::guarded(
            "send_receive() submitted by the receiver before its sender",
            crate::world::SETUP,
            slack::BLOCKED,
            submit,
        )
    };
    ctx.signal(POSTED);
    let submission = match submitted {
        Ok(submission) => submission,
        Err(error) if consistent => {
            found(
                violations,
                "P2P-1",
                format!("the receiver's send_receive of a consistent bundle was refused: {error}"),
            );
            return Ok(());
        }
        Err(_) => return Ok(()),
    };
    let completion = Handle::<H>::Communication(submission.completion);
    match settle(&completion, EXCHANGE) {
        Some(Ok(())) if !equal => found(
            violations,
            "P2P-2",
            "the receive completed successfully although the received headers differ from the expected ones"
                .into(),
        ),
        Some(Ok(())) => {
            if consistent {
                compare(ctx, case, &submission.output, violations);
            }
        }
        Some(Err(error)) => {
            if consistent {
                found(
                    violations,
                    "P2P-1",
                    format!("the receive of a consistent bundle failed: {error}"),
                );
            }
            let again = completion.is_complete();
            let waited = completion.wait();
            if matches!(again, Ok(true)) || waited.is_ok() {
                found(
                    violations,
                    if equal { "EXC-6" } else { "P2P-2" },
                    format!(
                        "the receive failed ({error}), then is_complete() returned {again:?} and wait() {waited:?}: \
                         the failure is not sticky"
                    ),
                );
            }
        }
        None => {
            if consistent {
                found(
                    violations,
                    "P2P-1",
                    format!("the receive of a consistent bundle had not completed after {EXCHANGE:?}"),
                );
            }
            tear_down(ctx, completion);
        }
    }
    Ok(())
}

/// P2P-1: the received bundle is the sent one, bit for bit.
fn compare<H: Harness>(
    ctx: &RankCtx<'_, H>,
    case: &super::BoundaryCase,
    outputs: &[Tensor<H>],
    violations: &Found,
) {
    if outputs.len() != case.sender.roles.len() {
        return found(
            violations,
            "P2P-1",
            format!(
                "{} value(s) received for a bundle of {}",
                outputs.len(),
                case.sender.roles.len()
            ),
        );
    }
    for (index, (output, role)) in outputs.iter().zip(&case.sender.roles).enumerate() {
        match ctx.read(output) {
            Ok(got) => {
                let same = got.len() == role.values.len()
                    && got
                        .iter()
                        .zip(&role.values)
                        .all(|(a, b)| a.to_bits() == b.to_bits());
                if !same {
                    return found(
                        violations,
                        "P2P-1",
                        format!("value {index} arrived as {got:?}, sent {:?}", role.values),
                    );
                }
            }
            Err(finding) => {
                return found(
                    violations,
                    "P2P-1",
                    format!(
                        "value {index} cannot be read after the receive completed: {finding:?}"
                    ),
                )
            }
        }
    }
}

/// The `boundary` fuzz target: [`check_boundary`], panicking on a failure.
pub fn run_boundary<H: Harness + Clone>(harness: &H, data: &[u8])
where
    Backend<H>: PointToPointBackend,
{
    let _checking = super::prepare(Target::Boundary, data);
    if let Err(failure) = check_boundary(harness, data) {
        super::fail(failure)
    }
}
