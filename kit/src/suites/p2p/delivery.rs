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
/// sweep has sizes) last to first with bundles of one value per nonzero size
/// of the sweep, in ascending, descending and mixed size order (an empty
/// tensor cannot be framed): a receiver that places values by protocol
/// class or size rather than by position gets one of them wrong.
pub(crate) fn p2p1_links(seed: u64, n: usize, first_id: u64, sweep: &[usize]) -> Vec<Link> {
    let mut pairs = vec![(0, n - 1), (n - 1, 0)];
    pairs.extend((0..n).map(|i| (i, (i + 1) % n)));
    pairs.push(distinct_pair(seed, n as u64, 20, n));
    let mut links = links(seed, first_id, pairs);
    for order in size_orders(sweep) {
        links.push(Link {
            id: first_id + links.len() as u64,
            source: n - 1,
            destination: 0,
            shapes: order.into_iter().map(|count| vec![count]).collect(),
        });
    }
    links
}

/// The sweep's nonzero sizes in ascending, descending and mixed order (the
/// largest, the smallest, the second largest, ...): one order when there is
/// one size, none when there is none. Where the sweep has sizes around a
/// named boundary (counts above the sweep's fixed 257 besides its largest),
/// those already straddle every protocol class, and the descending and
/// mixed bundles leave out the largest message (4 MiB per rank, which the
/// ascending one carries).
fn size_orders(sweep: &[usize]) -> Vec<Vec<usize>> {
    let mut ascending: Vec<usize> = sweep.iter().copied().filter(|&c| c > 0).collect();
    ascending.sort_unstable();
    if ascending.len() < 2 {
        return [ascending].into_iter().filter(|o| !o.is_empty()).collect();
    }
    let mut others = ascending.clone();
    if others.iter().filter(|&&c| c > 257).count() > 1 {
        others.pop();
    }
    let descending: Vec<usize> = others.iter().rev().copied().collect();
    let mut mixed = Vec::with_capacity(others.len());
    let (mut low, mut high) = (0, others.len());
    while low < high {
        high -= 1;
        mixed.push(others[high]);
        if low < high {
            mixed.push(others[low]);
            low += 1;
        }
    }
    vec![ascending, descending, mixed]
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
            // The sweep's routes (the last ones) are a phase each: a backend
            // may hold a large send in its submission until the receiver
            // waits for it (a rendezvous protocol), so nothing else may be
            // pending between them.
            let swept = size_orders(sweep).len();
            let (table, large) = links.split_at(links.len() - swept);
            let (table_ends, large_ends) = ends.split_at(ends.len() - swept);
            let phases = std::iter::once((table, table_ends))
                .chain(large.chunks(1).zip(large_ends.chunks(1)));
            let mut first = dtype != Dtype::F32;
            for (links, ends) in phases {
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

#[cfg(test)]
mod tests {
    use super::size_orders;

    #[test]
    fn sweep_bundles_come_in_three_size_orders() {
        let orders = size_orders(&[0, 257, 1, 7]);
        assert_eq!(
            orders,
            vec![vec![1, 7, 257], vec![257, 7, 1], vec![257, 1, 7]]
        );
        assert_eq!(size_orders(&[0, 5]), vec![vec![5]]);
        // Around a named boundary, the largest rides in ascending order only.
        let orders = size_orders(&[1, 4095, 4097, 1 << 20]);
        assert_eq!(orders[0], vec![1, 4095, 4097, 1 << 20]);
        assert_eq!(orders[1], vec![4097, 4095, 1]);
        assert_eq!(orders[2], vec![4097, 1, 4095]);
        assert!(size_orders(&[0]).is_empty());
    }
}
