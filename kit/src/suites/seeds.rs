//! Seeded draws: every random choice of the suites is a function of the
//! case seed and a path of integers, so a case replays exactly. Holds the
//! suites' mixers ([`mix`], [`mix_two`]), draws made with them ([`pick`],
//! [`late_member`]) and the historical `f32` data of the SUM-1, GAT-1,
//! GAT-2 and A2A-1 steps ([`value`]), whose sums are exact in `f32`. No
//! backend is involved: the bottom of the suites' stack.

/// splitmix64 of the case seed and a path of integers (the SUM, GAT and A2A
/// suites' randomness).
pub(crate) fn mix(seed: u64, path: &[u64]) -> u64 {
    path.iter().fold(seed, |state, part| {
        let mut z =
            (state ^ part.wrapping_mul(0x9e37_79b9_7f4a_7c15)).wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    })
}

/// SplitMix64 of the case seed and two integers (the BRD and P2P suites'
/// randomness; its draws differ from [`mix`]'s, so each suite keeps its own).
pub(crate) fn mix_two(seed: u64, a: u64, b: u64) -> u64 {
    let mut z =
        seed ^ a.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ b.wrapping_mul(0xd1b5_4a32_d192_ed69);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A number below `n` (which must be positive) chosen by the seed and `path`.
pub(crate) fn pick(seed: u64, path: &[u64], n: usize) -> usize {
    (mix(seed, path) % n.max(1) as u64) as usize
}

/// Input value of member `rank` at flat `index` in step `step`: an integer
/// of magnitude `(rank + 1) * 1024 - 512 + k` with `k < 1024`, negative
/// on odd ranks. Members' ranges are disjoint (a block in the wrong place
/// shows), the values of one member are distinct over any 1024
/// consecutive indexes (`37 * index` permutes residues mod 1024), and a
/// sum over up to eight members stays far below 2^24, so it is exact in
/// `f32` in any order.
pub(crate) fn value(seed: u64, step: u64, rank: usize, index: usize) -> f32 {
    let offset = mix(seed, &[step, rank as u64]) % 1024;
    let k = (index as u64 % 1024 * 37 + offset) % 1024;
    let magnitude = ((rank as u64 + 1) * 1024 - 512 + k) as f32;
    if rank % 2 == 1 {
        -magnitude
    } else {
        magnitude
    }
}

/// The first `len` input values of member `rank` in step `step`.
pub(crate) fn values(seed: u64, step: u64, rank: usize, len: usize) -> Vec<f32> {
    periodic(len, 1024, |index| value(seed, step, rank, index))
}

/// `len` values of a sequence with period `period`: one period computed,
/// then repeated (quick for the size sweep's long tensors, even unoptimised).
pub(crate) fn periodic(len: usize, period: usize, at: impl Fn(usize) -> f32) -> Vec<f32> {
    let once: Vec<f32> = (0..len.min(period)).map(at).collect();
    let mut out = Vec::with_capacity(len);
    while !once.is_empty() && out.len() < len {
        let take = once.len().min(len - out.len());
        out.extend_from_slice(&once[..take]);
    }
    out
}

/// Seed path component for the late member's choice.
const LATE: u64 = 0x1a7e;

/// The member that joins last in `step`, chosen by the seed.
pub(crate) fn late_member(seed: u64, step: u64, size: usize) -> usize {
    pick(seed, &[step, LATE], size)
}
