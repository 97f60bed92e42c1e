//! P2P-1: in every dtype, on routes between various pairs and with the size
//! sweep, the destination receives the exact ordered bundle (values bit for
//! bit, shapes), and the sender's output is what it sent.

use eredu_runtime::backend::PointToPointBackend;

use super::bundle::{check_bundle, open, settle_side, submit_side, well_formed};
use super::routes::{distinct_pair, links, Link};
use crate::check::{Check, Finding};
use crate::dtype::Dtype;
use crate::harness::{Backend, Harness};
use crate::suites::choreography::run;
use crate::suites::values::{each_dtype, Refused};
use crate::world::RankCtx;

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
pub(super) fn bundles_arrive_exact_and_in_order<H: Harness>(ctx: &RankCtx<'_, H>) -> Check
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
