//! The data of the P2P checks (P2P-1, P2P-2, P2P-3), a function of the
//! case seed: directed routes ([`Link`]) between seeded pairs of ranks,
//! their bundles' framable shapes, the exact payload of every value and the
//! receiver's placeholders. No backend is involved (the output-mutation
//! matrix, [`crate::precision`], uses the same data).

use crate::dtype::Dtype;
use crate::suites::seeds::mix_two as mix;

/// One directed route of a script and the shapes of its bundle.
#[derive(Debug, Clone)]
pub(crate) struct Link {
    pub(crate) id: u64,
    pub(super) source: usize,
    pub(super) destination: usize,
    pub(crate) shapes: Vec<Vec<usize>>,
}

impl Link {
    pub(super) fn touches(&self, rank: usize) -> bool {
        rank == self.source || rank == self.destination
    }

    /// This rank's role on the route, for messages.
    pub(super) fn role(&self, rank: usize) -> &'static str {
        if rank == self.source {
            "sender"
        } else {
            "receiver"
        }
    }

    pub(super) fn describe(&self) -> String {
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
pub(super) fn distinct_pair(seed: u64, key: u64, salt: u64, n: usize) -> (usize, usize) {
    let first = (mix(seed, key, salt) % n as u64) as usize;
    let second = (first + 1 + (mix(seed, key, salt + 1) % (n as u64 - 1)) as usize) % n;
    (first, second)
}

/// One link per (source, destination) pair, with ids from `first_id` on and
/// seeded bundles.
pub(super) fn links(seed: u64, first_id: u64, pairs: Vec<(usize, usize)>) -> Vec<Link> {
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

pub(super) fn elements(shape: &[usize]) -> usize {
    shape.iter().product()
}

/// Exact payload of value `index` on route `id`: small integers (and one
/// negative zero) in a range of their own per value, so a swapped, reversed or
/// truncated bundle never compares equal.
pub(crate) fn payload(dtype: Dtype, seed: u64, id: u64, index: usize, shape: &[usize]) -> Vec<f32> {
    let mut values = crate::suites::scenario::elements(dtype, seed, id, index, elements(shape));
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
