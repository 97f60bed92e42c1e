//! P2P: point-to-point transfers of ordered, role-exact bundles on a directed
//! route (`PointToPointBackend::send_receive`, `RoleExactBoundaryValue`).
//!
//! - P2P-1: the destination receives the exact ordered bundle (values bit for
//!   bit, shapes), and the direction follows this rank's endpoint: the
//!   sender's output is what it sent, the receiver's is what arrived.
//! - P2P-2: a received header that differs from the receiver's expected
//!   `header()` never yields success, and that failure is sticky.
//! - P2P-3: header and payload travel in one native message whose header
//!   bytes are exactly `header()` (wire-log instrument).
//!
//! Every header is built with eredu-runtime's public framing
//! (`RoleExactBoundaryContract::frame_values`). That framing admits no zero
//! extent and no scalar, so bundles use one-element tensors as their
//! smallest values: an empty tensor cannot be framed.
//!
//! Every rank opens all of its route endpoints before any rank sends (a
//! message must never reach a route whose destination has not opened it),
//! and every rank submits its side of the routes in one global order, so
//! FIFO executors cannot deadlock.

use std::borrow::Borrow;
use std::time::Duration;

use eredu_core::checkpoint::TensorDtype;
use eredu_core::{BoundedCompletionWait, CompletionCancellationMode};
use eredu_runtime::backend::PointToPointBackend;
use eredu_runtime::{
    BoundaryRoleContract, CommunicationRouteId, RoleExactBoundaryContract, RoleExactBoundaryValue,
};

use super::choreography::rendezvous;
use super::choreography::run;
use super::common::{handle_and_output, must_complete, needs, poll, supported, Polled};
use super::exact::{differs, value_difference, Differs};
use super::scenario::exact;
use super::seeds::mix_two as mix;
use super::values::{each_dtype, Refused};
use crate::case::{Body, Row};
use crate::check::{slack, Check, Finding};
use crate::dtype::Dtype;
use crate::harness::{Backend, Harness, Instruments, Tensor};
use crate::matrix::{wait_within, Handle, Subject};
use crate::operation::Operation;
use crate::world::RankCtx;

/// Schema of every bundle these rows frame.
const SCHEMA: &str = "commcheck.p2p";

/// P2P-3 reads what travelled on the wire.
const WIRE_LOG: Instruments = Instruments {
    wire_log: true,
    ..Instruments::NONE
};

fn send_receive(subject: Subject) -> bool {
    subject == Subject::Operation(Operation::SendReceive)
}

pub(crate) fn rows<H: Harness>() -> Vec<Row<H>>
where
    Backend<H>: PointToPointBackend,
{
    vec![
        Row {
            id: "P2P-1",
            applies: send_receive,
            requires: needs::NOTHING,
            timing: false,
            pass_needs: needs::NOTHING,
            body: Body::Sizes {
                sizes: &[2, 3, 4, 8],
                script: bundles_arrive_exact_and_in_order::<H>,
            },
        },
        Row {
            id: "P2P-2",
            applies: send_receive,
            requires: needs::NOTHING,
            timing: false,
            pass_needs: needs::NOTHING,
            body: Body::Sizes {
                sizes: &[2, 3],
                script: mismatching_headers_never_succeed::<H>,
            },
        },
        // EXC-6's natural form: the error a header mismatch provokes through
        // the public API, for a harness without fault injection (the
        // catalogue prefers the suites' own EXC-6 row where it can run).
        Row {
            id: "EXC-6",
            applies: send_receive,
            requires: needs::NOTHING,
            timing: false,
            pass_needs: needs::NOTHING,
            body: Body::Direct {
                ranks: 2,
                script: a_provoked_error_is_sticky::<H>,
            },
        },
        // CAN-9's natural form, as EXC-6's above.
        Row {
            id: "CAN-9",
            applies: send_receive,
            requires: needs::NOTHING,
            timing: false,
            pass_needs: needs::NOTHING,
            body: Body::Direct {
                ranks: 2,
                script: provoked_failure_is_an_error::<H>,
            },
        },
        Row {
            id: "P2P-3",
            applies: send_receive,
            requires: WIRE_LOG,
            timing: false,
            pass_needs: needs::NOTHING,
            body: Body::Sizes {
                sizes: &[2, 3, 4],
                script: header_and_payload_travel_together::<H>,
            },
        },
    ]
}

// ---------------------------------------------------------------------------
// Routes, bundles and framing.

/// One directed route of a script and the shapes of its bundle.
#[derive(Debug, Clone)]
pub(crate) struct Link {
    pub(crate) id: u64,
    source: usize,
    destination: usize,
    pub(crate) shapes: Vec<Vec<usize>>,
}

impl Link {
    fn touches(&self, rank: usize) -> bool {
        rank == self.source || rank == self.destination
    }

    /// This rank's role on the route, for messages.
    fn role(&self, rank: usize) -> &'static str {
        if rank == self.source {
            "sender"
        } else {
            "receiver"
        }
    }

    fn describe(&self) -> String {
        format!(
            "send_receive on route {} (rank {} -> rank {})",
            self.id, self.source, self.destination
        )
    }
}

/// Framable shapes (the framing admits no zero extent and no scalar).
const SHAPES: &[&[usize]] = &[&[2, 3], &[4], &[1, 1, 1], &[3, 1, 2], &[5], &[2, 2]];

/// Two to four values of distinct shapes, one of them one-element, in a
/// seeded order.
fn bundle_shapes(seed: u64, id: u64) -> Vec<Vec<usize>> {
    let count = 2 + (mix(seed, id, 1) % 3) as usize;
    let start = (mix(seed, id, 2) % SHAPES.len() as u64) as usize;
    let mut shapes: Vec<Vec<usize>> = (0..count - 1)
        .map(|i| SHAPES[(start + i) % SHAPES.len()].to_vec())
        .collect();
    let at = (mix(seed, id, 3) % count as u64) as usize;
    shapes.insert(at, vec![1]);
    shapes
}

/// A seeded ordered pair of distinct ranks of `n` (at least two): the first
/// drawn with `salt`, the other offset from it with `salt + 1`.
fn distinct_pair(seed: u64, key: u64, salt: u64, n: usize) -> (usize, usize) {
    let first = (mix(seed, key, salt) % n as u64) as usize;
    let second = (first + 1 + (mix(seed, key, salt + 1) % (n as u64 - 1)) as usize) % n;
    (first, second)
}

/// One link per (source, destination) pair, with ids from `first_id` on and
/// seeded bundles.
fn links(seed: u64, first_id: u64, pairs: Vec<(usize, usize)>) -> Vec<Link> {
    (first_id..)
        .zip(pairs)
        .map(|(id, (source, destination))| Link {
            id,
            source,
            destination,
            shapes: bundle_shapes(seed, id),
        })
        .collect()
}

fn elements(shape: &[usize]) -> usize {
    shape.iter().product()
}

/// Exact payload of value `index` on route `id`: small integers (and one
/// negative zero) in a range of their own per value, so a swapped, reversed or
/// truncated bundle never compares equal.
pub(crate) fn payload(dtype: Dtype, seed: u64, id: u64, index: usize, shape: &[usize]) -> Vec<f32> {
    let mut values = super::scenario::elements(dtype, seed, id, index, elements(shape));
    if let (0, Some(one)) = (index, values.get_mut(1)) {
        *one = -0.0;
    }
    values
}

/// Receiver placeholders: garbage the output must never show.
pub(crate) fn placeholder(shape: &[usize]) -> Vec<f32> {
    [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 1.0e30]
        .into_iter()
        .cycle()
        .take(elements(shape))
        .collect()
}

/// A role of the bundle's contract.
fn role(
    name: String,
    dtype: TensorDtype,
    shape: &[usize],
) -> Result<BoundaryRoleContract, Finding> {
    BoundaryRoleContract::new(name, dtype, shape.to_vec())
        .map_err(|e| Finding::Harness(format!("boundary role of shape {shape:?}: {e}")))
}

/// The roles a receiver expects: `value-i`, of `dtype`, the bundle's shapes.
fn expected_roles(
    shapes: &[Vec<usize>],
    dtype: Dtype,
) -> Result<Vec<BoundaryRoleContract>, Finding> {
    shapes
        .iter()
        .enumerate()
        .map(|(i, shape)| role(format!("value-{i}"), dtype.eredu(), shape))
        .collect()
}

/// Frames `tensors` with eredu-runtime's public framing.
fn frame<T>(
    route: u64,
    roles: Vec<BoundaryRoleContract>,
    tensors: Vec<T>,
) -> Result<Vec<RoleExactBoundaryValue<T>>, Finding> {
    let contract = RoleExactBoundaryContract::new(SCHEMA, roles.clone())
        .map_err(|e| Finding::Harness(format!("boundary contract: {e}")))?;
    contract
        .frame_values(CommunicationRouteId::new(route), &roles, tensors)
        .map_err(|e| Finding::Harness(format!("framing for route {route}: {e}")))
}

/// This rank's side of `link`'s bundle, framed with the expected headers.
fn well_formed<H: Harness>(
    ctx: &RankCtx<'_, H>,
    link: &Link,
) -> Result<Vec<RoleExactBoundaryValue<Tensor<H>>>, Finding> {
    frame(
        link.id,
        expected_roles(&link.shapes, ctx.dtype())?,
        side_tensors(ctx, link)?,
    )
}

/// Makes this rank's tensors for `link`: the payload on the sender,
/// placeholders of the expected shapes on the receiver.
fn side_tensors<H: Harness>(ctx: &RankCtx<'_, H>, link: &Link) -> Result<Vec<Tensor<H>>, Finding> {
    let sender = ctx.rank() == link.source;
    link.shapes
        .iter()
        .enumerate()
        .map(|(i, shape)| {
            let values = if sender {
                payload(ctx.dtype(), ctx.seed(), link.id, i, shape)
            } else {
                placeholder(shape)
            };
            ctx.tensor(&values, shape)
        })
        .collect()
}

/// Opens this rank's endpoints of `links` (`None` where it is no endpoint),
/// then waits until every rank has opened its own.
fn open<H: Harness>(
    ctx: &RankCtx<'_, H>,
    links: &[Link],
    tag: &str,
) -> Result<Vec<Option<H::Route>>, Finding> {
    let ends = links
        .iter()
        .map(|link| {
            link.touches(ctx.rank())
                .then(|| ctx.route(link.id, link.source, link.destination))
                .transpose()
        })
        .collect::<Result<Vec<_>, _>>()?;
    rendezvous(ctx, tag)?;
    Ok(ends)
}

/// Findings of several independent routes: a rank keeps playing its part on
/// every route after one failed, so its peers are never left waiting.
#[derive(Default)]
struct Findings(Vec<Finding>);

impl Findings {
    fn add(&mut self, check: Check) {
        if let Err(finding) = check {
            self.0.push(finding);
        }
    }

    /// Every violation, joined; otherwise the first other finding.
    fn into_check(self) -> Check {
        let violations: Vec<&str> = self
            .0
            .iter()
            .filter_map(|finding| match finding {
                Finding::Violation(message) => Some(message.as_str()),
                _ => None,
            })
            .collect();
        if !violations.is_empty() {
            return Err(Finding::Violation(violations.join("; ")));
        }
        self.0.into_iter().next().map_or(Ok(()), Err)
    }
}

/// Submits one framed bundle on `route`. A submission that has not returned
/// after [`slack::BLOCKED`] (one that waits for its peer, whose own turn may
/// depend on it) ends the case inconclusive, naming the call: no SPEC
/// invariant bounds a submission.
fn submit<H: Harness>(
    ctx: &RankCtx<'_, H>,
    framed: Vec<RoleExactBoundaryValue<Tensor<H>>>,
    route: &H::Route,
) -> Result<(Handle<H>, Vec<Tensor<H>>), String>
where
    Backend<H>: PointToPointBackend,
{
    crate::world::guarded(
        "send_receive() (a submission that waits for its peer)",
        crate::world::SETUP,
        slack::BLOCKED,
        || Backend::<H>::send_receive(framed, route.borrow(), ctx.executor()),
    )
    .map(handle_and_output::<H, _>)
    .map_err(|e| e.to_string())
}

/// Submits this rank's well-formed side of `link`; a refusal is a violation.
fn submit_side<H: Harness>(
    ctx: &RankCtx<'_, H>,
    link: &Link,
    framed: Vec<RoleExactBoundaryValue<Tensor<H>>>,
    route: &H::Route,
) -> Result<(Handle<H>, Vec<Tensor<H>>), Finding>
where
    Backend<H>: PointToPointBackend,
{
    submit(ctx, framed, route).map_err(|error| {
        Finding::Violation(format!(
            "{}: the {} (rank {}) could not submit: {error}",
            link.describe(),
            link.role(ctx.rank()),
            ctx.rank()
        ))
    })
}

/// Waits (bounded) for this rank's side of `link` to complete.
fn settle_side<H: Harness>(ctx: &RankCtx<'_, H>, link: &Link, completion: &Handle<H>) -> Check {
    must_complete(completion, || {
        format!(
            "{}: the {} (rank {}) did not complete",
            link.describe(),
            link.role(ctx.rank()),
            ctx.rank()
        )
    })
}

/// Checks `outputs` against the bundle `link` carries: count, shapes, values.
fn check_bundle<H: Harness>(ctx: &RankCtx<'_, H>, link: &Link, outputs: &[Tensor<H>]) -> Check {
    let who = format!(
        "{}, {} rank {}",
        link.describe(),
        link.role(ctx.rank()),
        ctx.rank()
    );
    if outputs.len() != link.shapes.len() {
        return Err(Finding::Violation(format!(
            "{who}: output has {} tensors, expected the {} of the bundle",
            outputs.len(),
            link.shapes.len()
        )));
    }
    for (index, (output, shape)) in outputs.iter().zip(&link.shapes).enumerate() {
        let expected = exact(
            shape.clone(),
            payload(ctx.dtype(), ctx.seed(), link.id, index, shape),
        );
        let wrong = match differs(ctx, crate::Operation::SendReceive, output, &expected)? {
            None => continue,
            Some(Differs::Shape(got_shape)) => {
                format!("{who}: value {index} has shape {got_shape:?}, expected {shape:?}")
            }
            Some(Differs::Values(got, mismatch)) => format!(
                "{who}: value {index} (shape {shape:?}) should be the sent value bit for bit: {}",
                value_difference(&got, &expected, mismatch)
            ),
        };
        return Err(Finding::Violation(wrong));
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// P2P-1

/// Routes of a P2P-1 world in one dtype, ids from `first_id` on: first to
/// last, last to first, a ring over every rank, a seeded pair, and (when the
/// sweep has sizes) last to first with a bundle of one value per nonzero
/// size of the sweep (an empty tensor cannot be framed).
pub(crate) fn p2p1_links(seed: u64, n: usize, first_id: u64, sweep: &[usize]) -> Vec<Link> {
    let mut pairs = vec![(0, n - 1), (n - 1, 0)];
    pairs.extend((0..n).map(|i| (i, (i + 1) % n)));
    pairs.push(distinct_pair(seed, n as u64, 20, n));
    let mut links = links(seed, first_id, pairs);
    let swept: Vec<Vec<usize>> = sweep.iter().filter(|&&c| c > 0).map(|&c| vec![c]).collect();
    if !swept.is_empty() {
        links.push(Link {
            id: first_id + links.len() as u64,
            source: n - 1,
            destination: 0,
            shapes: swept,
        });
    }
    links
}

/// The first route id of P2P-1's links in `dtype` (30 ids each).
pub(crate) fn p2p1_first_id(dtype: Dtype) -> u64 {
    100 + 30 * Dtype::ALL.iter().position(|d| *d == dtype).unwrap_or(0) as u64
}

/// P2P-1: in every dtype, on routes between various pairs and with the
/// size sweep, the receiver's output is the exact ordered bundle (shapes,
/// values bit for bit) and the sender's output is what it sent.
fn bundles_arrive_exact_and_in_order<H: Harness>(ctx: &RankCtx<'_, H>) -> Check
where
    Backend<H>: PointToPointBackend,
{
    run(ctx, || {
        each_dtype(ctx, |dtype, sweep| {
            let links = p2p1_links(ctx.seed(), ctx.size(), p2p1_first_id(dtype), sweep);
            let ends = open(ctx, &links, &format!("p2p1-open-{dtype}"))?;
            // The sweep's route (the last, when there is a sweep) is a phase
            // of its own: a backend may hold a large send in its submission
            // until the receiver waits for it (a rendezvous protocol), so
            // nothing else may be pending between them.
            let swept = usize::from(!sweep.is_empty());
            let (table, large) = links.split_at(links.len() - swept);
            let (table_ends, large_ends) = ends.split_at(ends.len() - swept);
            let mut first = dtype != Dtype::F32;
            for (links, ends) in [(table, table_ends), (large, large_ends)] {
                let mut sides = Vec::new();
                for (link, end) in links.iter().zip(ends) {
                    let Some(route) = end else { continue };
                    let (completion, outputs) =
                        match submit_side(ctx, link, well_formed(ctx, link)?, route) {
                            // The backend refuses the dtype (every rank's first submission).
                            Err(Finding::Violation(why)) if first => {
                                return Err(Refused::Dtype(why))
                            }
                            other => other?,
                        };
                    first = false;
                    sides.push((link, completion, outputs));
                }
                for (link, completion, outputs) in &sides {
                    settle_side(ctx, link, completion)?;
                    check_bundle(ctx, link, outputs)?;
                }
            }
            Ok(())
        })
    })
}

// ---------------------------------------------------------------------------
// P2P-2

/// How the sender's frame differs from what the receiver expects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mismatch {
    /// Framed for another route id.
    RouteId,
    /// Another role name, same dtype and shape.
    RoleName,
    /// A role declared with another dtype, same shape.
    Dtype,
    /// Another shape with the same element count (the tensor has it too).
    Shape,
}

impl Mismatch {
    const ALL: [Self; 4] = [Self::RouteId, Self::RoleName, Self::Dtype, Self::Shape];

    fn describe(self, index: usize) -> String {
        match self {
            Self::RouteId => "a frame for another route id".into(),
            Self::RoleName => format!("value {index} framed under another role name"),
            Self::Dtype => format!("value {index} framed as f16 instead of f32"),
            Self::Shape => format!("value {index} framed with another shape of the same size"),
        }
    }
}

/// Another shape with the same number of elements.
fn other_shape(shape: &[usize]) -> Vec<usize> {
    let reversed: Vec<usize> = shape.iter().rev().copied().collect();
    if reversed != shape {
        reversed
    } else {
        let mut longer = shape.to_vec();
        longer.push(1);
        longer
    }
}

/// One P2P-2 route: the bundle, the mismatch, and which value carries it.
struct Trap {
    link: Link,
    mismatch: Mismatch,
    index: usize,
}

fn p2p2_traps(seed: u64, n: usize) -> Vec<Trap> {
    Mismatch::ALL
        .iter()
        .enumerate()
        .map(|(v, &mismatch)| {
            let id = 300 + v as u64;
            let (source, destination) = distinct_pair(seed, id, 30, n);
            let shapes = vec![vec![2, 3], vec![1], vec![4]];
            let index = (mix(seed, id, 32) % shapes.len() as u64) as usize;
            Trap {
                link: Link {
                    id,
                    source,
                    destination,
                    shapes,
                },
                mismatch,
                index,
            }
        })
        .collect()
}

/// The signal a sender raises when the backend refused its mismatching frame
/// (before it drains the receiver with a well-formed one).
fn refused(trap: &Trap) -> String {
    format!("p2p2-refused-{}", trap.link.id)
}

/// P2P-2: for a frame for another route id, another role name, another
/// dtype and another shape, the receiver's completion never reports success,
/// and its error is sticky.
fn mismatching_headers_never_succeed<H: Harness>(ctx: &RankCtx<'_, H>) -> Check
where
    Backend<H>: PointToPointBackend,
{
    let traps = p2p2_traps(ctx.seed(), ctx.size());
    let links: Vec<Link> = traps.iter().map(|trap| trap.link.clone()).collect();
    let ends = open(ctx, &links, "p2p2-open")?;
    let mut findings = Findings::default();
    for (trap, end) in traps.iter().zip(&ends) {
        let Some(route) = end else { continue };
        findings.add(if ctx.rank() == trap.link.source {
            send_mismatching(ctx, trap, route)
        } else {
            receive_mismatching(ctx, trap, route)
        });
    }
    findings.into_check()
}

/// The sender's frame for `trap`: the expected one with one difference.
fn mismatching_frame<H: Harness>(
    ctx: &RankCtx<'_, H>,
    trap: &Trap,
) -> Result<Vec<RoleExactBoundaryValue<Tensor<H>>>, Finding> {
    let mut roles = expected_roles(&trap.link.shapes, Dtype::F32)?;
    let mut tensors = side_tensors(ctx, &trap.link)?;
    let shape = &trap.link.shapes[trap.index];
    let name = format!("value-{}", trap.index);
    let mut route = trap.link.id;
    match trap.mismatch {
        Mismatch::RouteId => route += 1000,
        Mismatch::RoleName => {
            roles[trap.index] = role(format!("{name}-other"), TensorDtype::F32, shape)?
        }
        Mismatch::Dtype => roles[trap.index] = role(name, TensorDtype::F16, shape)?,
        Mismatch::Shape => {
            let other = other_shape(shape);
            roles[trap.index] = role(name, TensorDtype::F32, &other)?;
            tensors[trap.index] = ctx.tensor(
                &payload(Dtype::F32, ctx.seed(), route, trap.index, &other),
                &other,
            )?;
        }
    }
    frame(route, roles, tensors)
}

/// Sends the mismatching frame. If the backend refuses it on the sending
/// side (also never a success on the receiver), says so and drains the
/// receiver with a well-formed bundle so its lane does not stay blocked.
fn send_mismatching<H: Harness>(ctx: &RankCtx<'_, H>, trap: &Trap, route: &H::Route) -> Check
where
    Backend<H>: PointToPointBackend,
{
    let sent = submit(ctx, mismatching_frame(ctx, trap)?, route)
        .and_then(|(completion, _outputs)| wait_within(&completion, slack::RELEASE));
    if sent.is_ok() {
        return Ok(());
    }
    ctx.signal(&refused(trap));
    let framed = well_formed(ctx, &trap.link)?;
    let (completion, _outputs) = submit(ctx, framed, route).map_err(|error| {
        Finding::Violation(format!(
            "{}: a well-formed bundle could not be sent: {error}",
            trap.link.describe()
        ))
    })?;
    settle_side(ctx, &trap.link, &completion)
}

/// What the receiver of a mismatching frame saw.
enum Received<H: Harness> {
    /// Its completion reported an error (the completion, for more calls).
    Failed(Handle<H>),
    /// Its completion reported success after the sender's backend refused
    /// the mismatching frame (and sent a well-formed one instead).
    Refused,
    /// Its completion reported success for the mismatching frame.
    Succeeded,
    /// Its completion neither failed nor completed within [`slack::RELEASE`].
    Hung,
}

/// Receives `trap`'s route with the expected headers (the sender sends the
/// mismatching frame).
fn receive_mismatching_frame<H: Harness>(
    ctx: &RankCtx<'_, H>,
    trap: &Trap,
    route: &H::Route,
    what: &str,
) -> Result<Received<H>, Finding>
where
    Backend<H>: PointToPointBackend,
{
    let framed = well_formed(ctx, &trap.link)?;
    let (completion, _outputs) = submit(ctx, framed, route).map_err(|error| {
        Finding::Violation(format!(
            "{what}: the receiver's own well-formed submission was refused: {error}"
        ))
    })?;
    Ok(match poll(&completion, slack::RELEASE) {
        Polled::Complete if ctx.await_signal(&refused(trap), Duration::ZERO) => Received::Refused,
        Polled::Complete => Received::Succeeded,
        Polled::Pending => Received::Hung,
        Polled::Error(_) => Received::Failed(completion),
    })
}

/// What the receiver of `trap`, on this rank, is told, for messages.
fn receiver_what<H: Harness>(ctx: &RankCtx<'_, H>, trap: &Trap) -> String {
    format!(
        "{}, receiver rank {}, sent {}",
        trap.link.describe(),
        ctx.rank(),
        trap.mismatch.describe(trap.index)
    )
}

/// Receives with the expected headers: the completion must fail, stickily.
fn receive_mismatching<H: Harness>(ctx: &RankCtx<'_, H>, trap: &Trap, route: &H::Route) -> Check
where
    Backend<H>: PointToPointBackend,
{
    let what = receiver_what(ctx, trap);
    match receive_mismatching_frame(ctx, trap, route, &what)? {
        Received::Refused => Ok(()),
        Received::Succeeded => Err(Finding::Violation(format!(
            "{what}: the receiver's completion reported success (expected an error: the received header differs from its header())"
        ))),
        Received::Hung => Err(Finding::Violation(format!(
            "{what}: the receiver neither failed nor completed within {:?} (a hang, expected an error)",
            slack::RELEASE
        ))),
        Received::Failed(completion) => error_is_sticky(ctx, completion, &what),
    }
}

/// Calls of `is_complete` after an error was reported, each of which must
/// report an error again.
const STICKY_CALLS: usize = 64;

/// After an error was reported: [`STICKY_CALLS`] `is_complete` calls, `wait`
/// and `wait_bounded` all report an error again (EXC-6, as P2P-2 requires).
fn error_is_sticky<H: Harness>(ctx: &RankCtx<'_, H>, completion: Handle<H>, what: &str) -> Check {
    for call in 1..=STICKY_CALLS {
        if let Ok(state) = completion.is_complete() {
            return Err(Finding::Violation(format!(
                "{what}: after the header mismatch was reported, is_complete call {call} returned Ok({state}) (the error must be sticky)"
            )));
        }
    }
    if completion.wait_on_complete().is_ok() {
        return Err(Finding::Violation(format!(
            "{what}: after the header mismatch was reported, wait returned Ok (the error must be sticky)"
        )));
    }
    if completion.is_complete().is_ok() {
        return Err(Finding::Violation(format!(
            "{what}: after wait reported the header mismatch again, is_complete returned Ok (the error must be sticky)"
        )));
    }
    let mode = if supported::<H>(CompletionCancellationMode::QuarantineUntilComplete) {
        CompletionCancellationMode::QuarantineUntilComplete
    } else {
        CompletionCancellationMode::NativeCancel
    };
    let policy = BoundedCompletionWait::new(slack::DEADLINE, mode)
        .map_err(|e| Finding::Harness(e.to_string()))?;
    match completion.wait_bounded(ctx, policy) {
        Some(Ok(outcome)) => Err(Finding::Violation(format!(
            "{what}: after the header mismatch was reported, wait_bounded returned Ok({outcome:?}) (the error must be sticky)"
        ))),
        Some(Err(_)) | None => Ok(()),
    }
}

/// Provokes an error through the public API, for the natural forms of EXC-6
/// and CAN-9 (harnesses without fault injection): rank 1 sends a bundle on
/// route `route_id` whose header frames one value as `f16`, rank 0 receives
/// with its own `f32` header, which P2P-2 requires to fail. On the sender,
/// `None` once it sent; on the receiver, its completion once it reported the
/// error, and what it is, for messages. A backend that refuses the frame at
/// the sender leaves no error on a completion (not-supported: `id` needs fault
/// injection there); one whose receiver succeeds or hangs breaks P2P-2
/// (recorded there), and the attempt checked nothing of `id` (inconclusive).
fn provoked_error<H: Harness>(
    ctx: &RankCtx<'_, H>,
    id: &str,
    route_id: u64,
) -> Result<Option<(Handle<H>, String)>, Finding>
where
    Backend<H>: PointToPointBackend,
{
    let trap = Trap {
        link: Link {
            id: route_id,
            source: 1,
            destination: 0,
            shapes: vec![vec![2, 3], vec![1], vec![4]],
        },
        mismatch: Mismatch::Dtype,
        index: (mix(ctx.seed(), route_id, 60) % 3) as usize,
    };
    let ends = open(
        ctx,
        std::slice::from_ref(&trap.link),
        &format!("natural-{route_id}"),
    )?;
    let Some(route) = ends.into_iter().next().flatten() else {
        return Ok(None);
    };
    if ctx.rank() == trap.link.source {
        send_mismatching(ctx, &trap, &route)?;
        return Ok(None);
    }
    let what = receiver_what(ctx, &trap);
    match receive_mismatching_frame(ctx, &trap, &route, &what)? {
        Received::Failed(completion) => Ok(Some((completion, what))),
        Received::Refused => Err(Finding::NotSupported(format!(
            "{what}: the backend refused the mismatching frame when it was sent, so no error reached a \
             completion; {id} needs fault injection here"
        ))),
        outcome @ (Received::Succeeded | Received::Hung) => {
            let seen = if matches!(outcome, Received::Succeeded) {
                "reported success"
            } else {
                "neither failed nor completed"
            };
            let message = format!(
                "{what}: the receiver's completion {seen} (P2P-2 requires an error), so there was no \
                 failed work for {id} to check"
            );
            ctx.attribute("P2P-2", message.clone());
            Err(crate::check::setup(message))
        }
    }
}

/// EXC-6 with no fault injection: once the error provoked by a header
/// mismatch (see [`provoked_error`]) was reported, every later
/// `is_complete`, `wait` and `wait_bounded` reports an error.
fn a_provoked_error_is_sticky<H: Harness>(ctx: &RankCtx<'_, H>) -> Check
where
    Backend<H>: PointToPointBackend,
{
    match provoked_error(ctx, "EXC-6", 500)? {
        Some((completion, what)) => error_is_sticky(ctx, completion, &what),
        None => Ok(()),
    }
}

/// CAN-9 with no fault injection: in each supported mode, work that failed
/// through a header mismatch (see [`provoked_error`]) yields `Err` from
/// `wait_bounded`, never `Completed` or `DeadlineExceeded`. Both ranks go
/// through the modes in the same order, one route each.
fn provoked_failure_is_an_error<H: Harness>(ctx: &RankCtx<'_, H>) -> Check
where
    Backend<H>: PointToPointBackend,
{
    let modes: Vec<CompletionCancellationMode> = [
        CompletionCancellationMode::QuarantineUntilComplete,
        CompletionCancellationMode::NativeCancel,
    ]
    .into_iter()
    .filter(|mode| supported::<H>(*mode))
    .collect();
    if modes.is_empty() {
        return Err(Finding::NotSupported(
            "the backend supports no cancellation mode, so it has no bounded wait to check".into(),
        ));
    }
    // Every mode's route is played to its end on both ranks, whatever an
    // earlier one found, so that no peer is left waiting.
    let mut findings = Findings::default();
    for (index, mode) in modes.into_iter().enumerate() {
        findings.add(
            provoked_error(ctx, "CAN-9", 501 + index as u64).and_then(|provoked| {
                let Some((completion, what)) = provoked else {
                    return Ok(());
                };
                let policy = BoundedCompletionWait::new(slack::RELEASE, mode)
                    .map_err(|e| Finding::Harness(e.to_string()))?;
                match completion.wait_bounded(ctx, policy) {
                    Some(Ok(outcome)) => Err(Finding::Violation(format!(
                        "{what}: after the receiver reported the header mismatch, wait_bounded({:?}, \
                         {mode:?}) returned Ok({outcome:?}); work that failed must yield Err",
                        slack::RELEASE
                    ))),
                    Some(Err(_)) | None => Ok(()),
                }
            }),
        );
    }
    findings.into_check()
}

// ---------------------------------------------------------------------------
// P2P-3

/// Routes of a P2P-3 world, each used for two sends.
fn p2p3_links(seed: u64, n: usize) -> Vec<Link> {
    let pairs = vec![(0, n - 1), (n - 1, 0), distinct_pair(seed, n as u64, 40, n)];
    links(seed, 400, pairs)
}

/// Sends per P2P-3 route.
const ROUNDS: usize = 2;

/// P2P-3: every `send_receive` puts exactly one native message on the wire,
/// carrying every value's `header()` bytes and the payload bytes together;
/// the receiver accepts it and gets the bundle.
fn header_and_payload_travel_together<H: Harness>(ctx: &RankCtx<'_, H>) -> Check
where
    Backend<H>: PointToPointBackend,
{
    let links = p2p3_links(ctx.seed(), ctx.size());
    let ends = open(ctx, &links, "p2p3-open")?;
    let mut findings = Findings::default();
    for round in 0..ROUNDS {
        for (link, end) in links.iter().zip(&ends) {
            let Some(route) = end else { continue };
            findings.add(if ctx.rank() == link.source {
                send_one_message(ctx, link, route, round)
            } else {
                receive_one_bundle(ctx, link, route)
            });
        }
    }
    findings.into_check()
}

/// The receiving side of one P2P-3 send: accepts the bundle, exact.
fn receive_one_bundle<H: Harness>(ctx: &RankCtx<'_, H>, link: &Link, route: &H::Route) -> Check
where
    Backend<H>: PointToPointBackend,
{
    let (completion, outputs) = submit_side(ctx, link, well_formed(ctx, link)?, route)?;
    settle_side(ctx, link, &completion)?;
    // What arrives is P2P-1's; P2P-3 is about what travels on the wire.
    match check_bundle(ctx, link, &outputs) {
        Err(Finding::Violation(wrong)) => {
            ctx.attribute("P2P-1", wrong);
            Ok(())
        }
        other => other,
    }
}

/// The route's wire log, or `NotSupported`.
fn wire_log<H: Harness>(
    ctx: &RankCtx<'_, H>,
    link: &Link,
    route: &H::Route,
) -> Result<Vec<crate::harness::WireRecord>, Finding> {
    ctx.wire_log(route).ok_or_else(|| {
        Finding::NotSupported(format!(
            "the harness keeps no wire log for route {}",
            link.id
        ))
    })
}

/// One send: exactly one new wire record, with the sent headers and payload.
fn send_one_message<H: Harness>(
    ctx: &RankCtx<'_, H>,
    link: &Link,
    route: &H::Route,
    round: usize,
) -> Check
where
    Backend<H>: PointToPointBackend,
{
    let before = wire_log(ctx, link, route)?.len();
    let framed = well_formed(ctx, link)?;
    let headers: Vec<Vec<u8>> = framed.iter().map(|value| value.header().to_vec()).collect();
    let payload_bytes: usize = link.shapes.iter().map(|shape| elements(shape) * 4).sum();
    let (completion, _outputs) = submit_side(ctx, link, framed, route)?;
    settle_side(ctx, link, &completion)?;
    let log = wire_log(ctx, link, route)?;
    let new = log.get(before..).unwrap_or_default();
    let who = format!("{}, send {}", link.describe(), round + 1);
    let [record] = new else {
        return Err(Finding::Violation(format!(
            "{who}: the send produced {} native messages, expected exactly one carrying headers and payload together: {:?}",
            new.len(),
            new.iter()
                .map(|r| format!("{} headers + {} payload bytes", r.headers.len(), r.payload_bytes))
                .collect::<Vec<_>>()
        )));
    };
    if record.headers != headers {
        return Err(Finding::Violation(format!(
            "{who}: the message's headers are not exactly the values' header() bytes: {}",
            header_difference(&record.headers, &headers)
        )));
    }
    if record.payload_bytes != payload_bytes {
        return Err(Finding::Violation(format!(
            "{who}: the message carried {} payload bytes with its headers, expected {payload_bytes}",
            record.payload_bytes
        )));
    }
    Ok(())
}

/// Where the headers on the wire first differ from the sent `header()` bytes.
fn header_difference(got: &[Vec<u8>], sent: &[Vec<u8>]) -> String {
    if got.len() != sent.len() {
        return format!(
            "{} headers on the wire for {} values",
            got.len(),
            sent.len()
        );
    }
    got.iter()
        .zip(sent)
        .enumerate()
        .find(|(_, (g, s))| g != s)
        .map(|(index, (g, s))| {
            let at = g
                .iter()
                .zip(s.iter())
                .position(|(a, b)| a != b)
                .unwrap_or(g.len().min(s.len()));
            format!(
                "value {index}: {} bytes on the wire, {} sent, first difference at byte {at}",
                g.len(),
                s.len()
            )
        })
        .unwrap_or_default()
}
