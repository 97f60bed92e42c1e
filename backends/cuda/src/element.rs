//! The element types a [`CudaTensor`](crate::CudaTensor) holds (`f32`,
//! `f16`, `bf16`): their sizes, their codes in the kernels
//! (`kernels/commcheck.cu`) and their widening to `f32`. Every layer above
//! the FFI edge names them (the device's data-path boundaries, tensors,
//! the planners of collectives), so they depend on nothing.

/// The element type of a [`CudaTensor`](crate::CudaTensor).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Element {
    /// IEEE 754 binary32.
    #[default]
    F32,
    /// IEEE 754 binary16.
    F16,
    /// bfloat16 (the upper half of a binary32).
    Bf16,
}

impl Element {
    /// Every element type.
    pub const ALL: [Element; 3] = [Element::F32, Element::F16, Element::Bf16];

    /// Its name in messages (`f32`, `f16`, `bf16`).
    pub const fn name(self) -> &'static str {
        match self {
            Self::F32 => "f32",
            Self::F16 => "f16",
            Self::Bf16 => "bf16",
        }
    }

    /// Bytes per element.
    pub const fn size(self) -> usize {
        match self {
            Self::F32 => 4,
            Self::F16 | Self::Bf16 => 2,
        }
    }

    /// Halves (16-bit units, the copy kernels' unit) per element.
    pub(crate) const fn halves(self) -> u64 {
        self.size() as u64 / 2
    }

    /// Its code in the kernels (`COMMCHECK_F32`, `_F16`, `_BF16`).
    pub(crate) const fn code(self) -> u32 {
        match self {
            Self::F32 => 0,
            Self::F16 => 1,
            Self::Bf16 => 2,
        }
    }

    /// Little-endian `bytes` of this type, widened to `f32`.
    pub(crate) fn widen(self, bytes: &[u8]) -> Vec<f32> {
        match self {
            Self::F32 => bytes
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect(),
            Self::F16 => bytes
                .chunks_exact(2)
                .map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32())
                .collect(),
            Self::Bf16 => bytes
                .chunks_exact(2)
                .map(|b| half::bf16::from_le_bytes([b[0], b[1]]).to_f32())
                .collect(),
        }
    }
}

impl std::fmt::Display for Element {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
