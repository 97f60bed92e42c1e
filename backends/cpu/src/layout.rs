//! Row-major layout helpers shared by every operation that works along an axis.

/// A shape seen from one axis: `outer × extent × inner` elements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AxisView {
    pub(crate) outer: usize,
    pub(crate) extent: usize,
    pub(crate) inner: usize,
}

impl AxisView {
    /// Views `shape` around `axis`; `None` when `axis` is out of range.
    pub(crate) fn new(shape: &[usize], axis: usize) -> Option<Self> {
        let extent = *shape.get(axis)?;
        Some(Self {
            outer: shape[..axis].iter().product(),
            extent,
            inner: shape[axis + 1..].iter().product(),
        })
    }
}

/// Concatenates row-major blocks along one axis. Every block shares `outer`
/// and `inner`; `blocks[i]` holds `outer × extent_i × inner` values.
pub(crate) fn concat_axis(outer: usize, inner: usize, blocks: &[(&[f32], usize)]) -> Vec<f32> {
    let total: usize = blocks
        .iter()
        .map(|(_, extent)| extent * inner)
        .sum::<usize>()
        * outer;
    let mut out = Vec::with_capacity(total);
    for o in 0..outer {
        for (data, extent) in blocks {
            let run = extent * inner;
            out.extend_from_slice(&data[o * run..(o + 1) * run]);
        }
    }
    out
}

/// Takes `len` positions starting at `start` along the viewed axis.
pub(crate) fn slice_axis(data: &[f32], view: AxisView, start: usize, len: usize) -> Vec<f32> {
    let mut out = Vec::with_capacity(view.outer * len * view.inner);
    for o in 0..view.outer {
        let base = (o * view.extent + start) * view.inner;
        out.extend_from_slice(&data[base..base + len * view.inner]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn concat_and_slice_along_a_middle_axis_round_trip() {
        // Two blocks of shape [2, e, 2] with e = 1 and 2.
        let a = [0.0, 1.0, 10.0, 11.0];
        let b = [2.0, 3.0, 4.0, 5.0, 12.0, 13.0, 14.0, 15.0];
        let joined = concat_axis(2, 2, &[(&a, 1), (&b, 2)]);
        assert_eq!(
            joined,
            [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0]
        );
        let view = AxisView::new(&[2, 3, 2], 1).unwrap();
        assert_eq!(slice_axis(&joined, view, 0, 1), a);
        assert_eq!(slice_axis(&joined, view, 1, 2), b);
    }

    #[test]
    fn axis_out_of_range_has_no_view() {
        assert_eq!(AxisView::new(&[2, 3], 2), None);
    }
}
