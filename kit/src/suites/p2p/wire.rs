//! P2P-3: every `send_receive` puts exactly one native message on the wire,
//! carrying every value's `header()` bytes and the payload bytes together
//! (wire-log instrument); the receiver accepts it and gets the bundle.

use eredu_runtime::backend::PointToPointBackend;

use super::bundle::{check_bundle, open, settle_side, submit_side, well_formed, Findings};
use super::routes::{distinct_pair, elements, links, Link};
use crate::check::{Check, Finding};
use crate::harness::{Backend, Harness};
use crate::world::RankCtx;

/// Routes of a P2P-3 world, each used for two sends; with `large` (elements
/// past the harness's protocol boundaries), one more whose bundle carries a
/// value that large, where a backend whose protocol switches with message
/// size takes its other path (rendezvous, chunks).
fn p2p3_links(seed: u64, n: usize, large: Option<usize>) -> Vec<Link> {
    let pairs = vec![(0, n - 1), (n - 1, 0), distinct_pair(seed, n as u64, 40, n)];
    let mut links = links(seed, 400, pairs);
    if let Some(elements) = large {
        let (source, destination) = distinct_pair(seed, n as u64, 41, n);
        links.push(Link {
            id: 410,
            source,
            destination,
            shapes: vec![vec![2, 3], vec![elements]],
        });
    }
    links
}

/// Sends per P2P-3 route.
const ROUNDS: usize = 2;

/// P2P-3: every `send_receive` puts exactly one native message on the wire,
/// carrying every value's `header()` bytes and the payload bytes together;
/// the receiver accepts it and gets the bundle.
pub(super) fn header_and_payload_travel_together<H: Harness>(ctx: &RankCtx<'_, H>) -> Check
where
    Backend<H>: PointToPointBackend,
{
    let large = crate::suites::scenario::past_boundaries(ctx.harness()).map(|large| large.elements);
    let links = p2p3_links(ctx.seed(), ctx.size(), large);
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
