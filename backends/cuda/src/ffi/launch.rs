//! Kernel launches: one [`Launch`] variant per kernel of
//! `kernels/commcheck.cu`, and [`launch`], which passes its arguments in
//! the kernel's parameter order.

use crate::error::CudaError;
use cudarc::driver::{CudaFunction, CudaStream, LaunchConfig, PushKernelArg};

/// A kernel launch with its arguments, one variant per kernel of
/// `kernels/commcheck.cu`, fields in the kernel's parameter order. Every
/// address is a live device (or mapped host) address its caller retains
/// until the stream's work has completed.
#[derive(Debug, Clone, Copy)]
pub enum Launch {
    /// `commcheck_all_reduce_sum`.
    AllReduceSum {
        /// Address of a [`RankAddresses`](super::RankAddresses) (device or mapped host memory).
        ranks: u64,
        /// How many ranks.
        count: u32,
        /// First element of this rank's share.
        begin: u64,
        /// One past its last element.
        end: u64,
        /// The element type's kernel code (`Element::code`).
        element: u32,
    },
    /// `commcheck_copy_segments`.
    CopySegments {
        /// Address of a segment table: a `u64` count, then the [`Segment`](super::Segment)s.
        table: u64,
        /// Halves (16-bit units) in all segments, if known (sizes the grid;
        /// 0: the largest grid).
        elements: u64,
    },
    /// `commcheck_receive`.
    Receive {
        /// Address of a word holding the message's address.
        plan: u64,
        /// Where the value starts in the message.
        offset: u64,
        /// Header bytes at its front.
        header_len: u64,
        /// The expected header bytes.
        expected: u64,
        /// Where the payload goes.
        payload: u64,
        /// Payload halves (16-bit units: two per `f32`).
        len: u64,
    },
    /// `commcheck_frame`.
    Frame {
        /// The header bytes.
        header: u64,
        /// How many.
        header_len: u64,
        /// The payload.
        payload: u64,
        /// Payload halves (16-bit units: two per `f32`).
        len: u64,
        /// The message buffer.
        message: u64,
    },
    /// `commcheck_elementwise`.
    Elementwise {
        /// Left operand.
        a: u64,
        /// Right operand (unused when scaling).
        b: u64,
        /// Output.
        out: u64,
        /// Floats.
        len: u64,
        /// 0 add, 1 subtract, 2 multiply, 3 scale.
        op: u32,
        /// The scale factor.
        factor: f32,
    },
    /// `commcheck_matmul`.
    Matmul {
        /// Left operand, m×k.
        a: u64,
        /// Right operand, k×n.
        b: u64,
        /// Output, m×n.
        out: u64,
        /// Rows.
        m: u64,
        /// Inner extent.
        k: u64,
        /// Columns.
        n: u64,
    },
    /// `commcheck_spin`.
    Spin {
        /// Clock cycles to spin.
        cycles: u64,
    },
    /// `commcheck_fault`.
    Fault {
        /// The code to write.
        code: i32,
    },
}

impl Launch {
    /// The kernel's name in `kernels/commcheck.cu`.
    pub fn kernel(&self) -> &'static str {
        match self {
            Self::AllReduceSum { .. } => "commcheck_all_reduce_sum",
            Self::CopySegments { .. } => "commcheck_copy_segments",
            Self::Receive { .. } => "commcheck_receive",
            Self::Frame { .. } => "commcheck_frame",
            Self::Elementwise { .. } => "commcheck_elementwise",
            Self::Matmul { .. } => "commcheck_matmul",
            Self::Spin { .. } => "commcheck_spin",
            Self::Fault { .. } => "commcheck_fault",
        }
    }

    /// Elements the launch walks (sizes its grid).
    pub fn elements(&self) -> u64 {
        match *self {
            Self::AllReduceSum {
                begin,
                end,
                element: 0,
                ..
            } => end.saturating_sub(begin).div_ceil(4),
            Self::AllReduceSum { begin, end, .. } => end.saturating_sub(begin),
            Self::CopySegments { elements: 0, .. } => u64::MAX,
            Self::CopySegments { elements, .. } => elements,
            Self::Receive {
                len, header_len, ..
            } => len.max(header_len),
            Self::Frame {
                len, header_len, ..
            } => len.max(header_len),
            Self::Elementwise { len, .. } => len,
            Self::Matmul { m, n, .. } => m.saturating_mul(n),
            Self::Spin { .. } | Self::Fault { .. } => 1,
        }
    }
}

/// One kernel argument.
#[derive(Debug, Clone, Copy)]
enum Arg {
    U64(u64),
    U32(u32),
    I32(i32),
    F32(f32),
}

/// Launches `launch` (whose kernel is `function`) on `stream`, with the
/// cancel and error words appended where the kernel takes them. The caller
/// keeps every address live until the stream's work has completed.
pub fn launch(
    stream: &CudaStream,
    function: &CudaFunction,
    config: LaunchConfig,
    launch: Launch,
    cancel: u64,
    error: u64,
) -> Result<(), CudaError> {
    use Arg::{F32, I32, U32, U64};
    let args: Vec<Arg> = match launch {
        Launch::AllReduceSum {
            ranks,
            count,
            begin,
            end,
            element,
        } => vec![
            U64(ranks),
            U32(count),
            U64(begin),
            U64(end),
            U32(element),
            U64(cancel),
            U64(error),
        ],
        Launch::CopySegments { table, .. } => vec![U64(table), U64(cancel), U64(error)],
        Launch::Receive {
            plan,
            offset,
            header_len,
            expected,
            payload,
            len,
        } => vec![
            U64(plan),
            U64(offset),
            U64(header_len),
            U64(expected),
            U64(payload),
            U64(len),
            U64(cancel),
            U64(error),
        ],
        Launch::Frame {
            header,
            header_len,
            payload,
            len,
            message,
        } => vec![
            U64(header),
            U64(header_len),
            U64(payload),
            U64(len),
            U64(message),
            U64(cancel),
            U64(error),
        ],
        Launch::Elementwise {
            a,
            b,
            out,
            len,
            op,
            factor,
        } => vec![
            U64(a),
            U64(b),
            U64(out),
            U64(len),
            U32(op),
            F32(factor),
            U64(cancel),
            U64(error),
        ],
        Launch::Matmul { a, b, out, m, k, n } => vec![
            U64(a),
            U64(b),
            U64(out),
            U64(m),
            U64(k),
            U64(n),
            U64(cancel),
            U64(error),
        ],
        Launch::Spin { cycles } => vec![U64(cycles), U64(cancel), U64(error)],
        Launch::Fault { code } => vec![U64(error), I32(code)],
    };
    let mut builder = stream.launch_builder(function);
    for arg in &args {
        match arg {
            U64(value) => builder.arg(value),
            U32(value) => builder.arg(value),
            I32(value) => builder.arg(value),
            F32(value) => builder.arg(value),
        };
    }
    // SAFETY: `args` lists exactly the parameters of `launch.kernel()` in
    // `kernels/commcheck.cu`, in order and with their C types (pointers as
    // 64-bit addresses); `function` is that kernel (the device looks it up
    // by `Launch::kernel`); `args` outlives the launch call, which copies
    // the values; the addresses are live allocations the caller retains
    // until the work completes.
    unsafe { builder.launch(config) }
        .map(|_| ())
        .map_err(CudaError::driver("cuLaunchKernel"))
}
