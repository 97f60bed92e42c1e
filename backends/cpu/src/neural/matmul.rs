//! Matrix multiplication with broadcast batches, the one long kernel: it
//! looks at the running work's cancel token every few rows ([`crate::cancel`]),
//! so a `NativeCancel` teardown stops it within a matmul row or so.

use super::reads::{broadcast_values, lazy};
use super::shape::broadcast_shape;
use crate::cancel;
use crate::error::CpuError;
use crate::executor::CpuExecutor;
use crate::tensor::{element_count, CpuTensor};

/// Multiply-adds a long kernel performs between two looks at the running
/// work's cancel token (a few tens of microseconds of work).
const CANCEL_CHECK_WORK: usize = 1 << 16;

pub(super) fn matmul(
    lhs: &CpuTensor,
    rhs: &CpuTensor,
    context: &CpuExecutor,
) -> Result<CpuTensor, CpuError> {
    let (left, right) = (lhs.dims(), rhs.dims());
    let shapes_fit =
        left.len() >= 2 && right.len() >= 2 && left[left.len() - 1] == right[right.len() - 2];
    if !shapes_fit {
        return Err(CpuError::invalid(
            "matmul",
            "operands of rank >= 2 shaped [..., m, k] and [..., k, n]",
            format!("shapes {left:?} and {right:?}"),
        ));
    }
    let (m, k, n) = (
        left[left.len() - 2],
        left[left.len() - 1],
        right[right.len() - 1],
    );
    let mut shape = broadcast_shape("matmul", &left[..left.len() - 2], &right[..right.len() - 2])?;
    let batch = element_count("matmul", &shape)?;
    shape.extend([m, n]);
    element_count("matmul", &shape)?;
    let operand = |rows: i32, columns: i32| {
        let mut extents: Vec<usize> = shape[..shape.len() - 2]
            .iter()
            .map(|&dim| dim.max(0) as usize)
            .collect();
        extents.extend([rows.max(0) as usize, columns.max(0) as usize]);
        extents
    };
    let (left_extents, right_extents) = (operand(m, k), operand(k, n));
    let (m, k, n) = (m as usize, k as usize, n as usize);
    let (lhs, rhs) = (lhs.clone(), rhs.clone());
    lazy("matmul", context.ledger(), shape, move || {
        let left = broadcast_values("matmul", &lhs, &left_extents)?;
        let right = broadcast_values("matmul", &rhs, &right_extents)?;
        let mut output = vec![0.0; batch * m * n];
        if m * n * k == 0 {
            return Ok(output);
        }
        // Rows between two looks at the running work's cancel token.
        let rows_per_check = (CANCEL_CHECK_WORK / (n * k)).max(1);
        let mut rows = 0usize;
        for ((out, a), b) in output
            .chunks_exact_mut(m * n)
            .zip(left.chunks_exact(m * k))
            .zip(right.chunks_exact(k * n))
        {
            for (out_row, a_row) in out.chunks_exact_mut(n).zip(a.chunks_exact(k)) {
                if rows % rows_per_check == 0 {
                    cancel::checkpoint()?;
                }
                rows += 1;
                for (&a_value, b_row) in a_row.iter().zip(b.chunks_exact(n)) {
                    for (out_value, &b_value) in out_row.iter_mut().zip(b_row) {
                        *out_value += a_value * b_value;
                    }
                }
            }
        }
        Ok(output)
    })
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use crate::tensor::CpuTensor;
    use eredu_nn::Tensor;

    #[test]
    fn matmul_multiplies_matrices() {
        let ctx = ctx();
        let lhs = tensor(&ctx, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
        let rhs = tensor(&ctx, &[7.0, 8.0, 9.0, 10.0, 11.0, 12.0], &[3, 2]);
        check(
            &CpuTensor::matmul(&lhs, &rhs, &ctx).expect("matmul"),
            &ctx,
            &[2, 2],
            &[58.0, 64.0, 139.0, 154.0],
        );
    }

    #[test]
    fn matmul_broadcasts_batches() {
        let ctx = ctx();
        let lhs = tensor(&ctx, &[1.0, 2.0, 3.0, 4.0], &[2, 1, 2]);
        let rhs = tensor(&ctx, &[5.0, 6.0], &[2, 1]);
        check(
            &CpuTensor::matmul(&lhs, &rhs, &ctx).expect("matmul"),
            &ctx,
            &[2, 1, 1],
            &[17.0, 39.0],
        );
        let message = error(CpuTensor::matmul(&lhs, &lhs, &ctx));
        assert!(message.contains("matmul") && message.contains("[2, 1, 2]"));
        assert!(error(CpuTensor::matmul(&iota(&ctx, &[2]), &rhs, &ctx)).contains("rank >= 2"));
    }
}
