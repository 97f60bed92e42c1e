//! Element types the value checks run on, and host values of each.
//!
//! eredu's runtime moves `F32`, `F16` and `Bf16` activations
//! (`PipelineActivationDtype`, `checkpoint::TensorDtype`); a harness offers
//! the ones its backend builds ([`crate::Harness::dtypes`], `F32` alone by
//! default) and builds and reads them with [`crate::Harness::tensor_of`] and
//! [`crate::Harness::read_as`]. The 16-bit types are [`half`]'s.
//!
//! The kit computes every expected value in `f32`: each value it uses is
//! exactly representable in the dtype of its step, so widening to `f32` and
//! narrowing back are exact, and comparing the widened values bit for bit
//! is comparing the dtype's own bits.

use half::slice::HalfFloatSliceExt;
use half::{bf16, f16};

/// An element type of the value checks.
#[derive(
    Debug,
    Default,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Dtype {
    /// IEEE 754 binary32.
    #[default]
    F32,
    /// IEEE 754 binary16.
    F16,
    /// bfloat16 (the upper half of a binary32).
    Bf16,
}

impl Dtype {
    /// Every dtype the kit knows, in report order.
    pub const ALL: [Dtype; 3] = [Dtype::F32, Dtype::F16, Dtype::Bf16];

    /// Its name in reports and messages (`f32`, `f16`, `bf16`).
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

    /// Significand precision in bits, the implicit bit included (24, 11, 8).
    pub const fn precision(self) -> u32 {
        match self {
            Self::F32 => 24,
            Self::F16 => 11,
            Self::Bf16 => 8,
        }
    }

    /// The unit roundoff `u = 2^-p`: the largest relative error of rounding
    /// one real number to the nearest value of the dtype.
    pub fn unit_roundoff(self) -> f64 {
        (-(self.precision() as f64)).exp2()
    }

    /// The eredu name of the dtype.
    pub fn eredu(self) -> eredu_core::checkpoint::TensorDtype {
        use eredu_core::checkpoint::TensorDtype;
        match self {
            Self::F32 => TensorDtype::F32,
            Self::F16 => TensorDtype::F16,
            Self::Bf16 => TensorDtype::Bf16,
        }
    }

    /// `value` rounded to the nearest value of the dtype, widened back.
    pub fn round(self, value: f32) -> f32 {
        match self {
            Self::F32 => value,
            Self::F16 => f16::from_f32(value).to_f32(),
            Self::Bf16 => bf16::from_f32(value).to_f32(),
        }
    }

    /// Whether `value` is exactly a value of the dtype (NaN payloads aside).
    pub fn represents(self, value: f32) -> bool {
        value.is_nan() || self.round(value).to_bits() == value.to_bits()
    }

    /// The largest finite value.
    pub fn max(self) -> f32 {
        match self {
            Self::F32 => f32::MAX,
            Self::F16 => f16::MAX.to_f32(),
            Self::Bf16 => bf16::MAX.to_f32(),
        }
    }

    /// The smallest positive normal value.
    pub fn min_positive(self) -> f32 {
        match self {
            Self::F32 => f32::MIN_POSITIVE,
            Self::F16 => f16::MIN_POSITIVE.to_f32(),
            Self::Bf16 => bf16::MIN_POSITIVE.to_f32(),
        }
    }
}

impl std::fmt::Display for Dtype {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Dtype {
    type Err = String;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|dtype| dtype.name() == name)
            .ok_or_else(|| format!("unknown dtype {name:?} (expected one of f32, f16, bf16)"))
    }
}

/// Host values of one dtype: what a harness builds a tensor from and what it
/// reads one back as.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum HostValues {
    /// `f32` values.
    F32(Vec<f32>),
    /// `f16` values.
    F16(Vec<f16>),
    /// `bf16` values.
    Bf16(Vec<bf16>),
}

impl HostValues {
    /// `values` narrowed to `dtype` (each rounded to the nearest value).
    pub fn narrow(dtype: Dtype, values: &[f32]) -> Self {
        match dtype {
            Dtype::F32 => Self::F32(values.to_vec()),
            Dtype::F16 => {
                let mut halves = vec![f16::ZERO; values.len()];
                halves.convert_from_f32_slice(values);
                Self::F16(halves)
            }
            Dtype::Bf16 => Self::Bf16(values.iter().map(|&v| bf16::from_f32(v)).collect()),
        }
    }

    /// Whether `other` holds the same dtype and the same values, bit for
    /// bit (`-0.0` differs from `0.0`, and a NaN equals a NaN of the same
    /// bits).
    pub fn same_bits(&self, other: &HostValues) -> bool {
        fn same<T: Copy, B: PartialEq>(a: &[T], b: &[T], bits: impl Fn(T) -> B) -> bool {
            a.len() == b.len() && a.iter().zip(b).all(|(&x, &y)| bits(x) == bits(y))
        }
        match (self, other) {
            (Self::F32(a), Self::F32(b)) => same(a, b, f32::to_bits),
            (Self::F16(a), Self::F16(b)) => same(a, b, f16::to_bits),
            (Self::Bf16(a), Self::Bf16(b)) => same(a, b, bf16::to_bits),
            _ => false,
        }
    }

    /// The values' dtype.
    pub fn dtype(&self) -> Dtype {
        match self {
            Self::F32(_) => Dtype::F32,
            Self::F16(_) => Dtype::F16,
            Self::Bf16(_) => Dtype::Bf16,
        }
    }

    /// How many values.
    pub fn len(&self) -> usize {
        match self {
            Self::F32(values) => values.len(),
            Self::F16(values) => values.len(),
            Self::Bf16(values) => values.len(),
        }
    }

    /// Whether there are no values.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The values widened to `f32` (exact for every dtype).
    pub fn widen(&self) -> Vec<f32> {
        match self {
            Self::F32(values) => values.clone(),
            Self::F16(values) => values.to_f32_vec(),
            Self::Bf16(values) => values.iter().map(|v| v.to_f32()).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn narrowing_and_widening_a_slice_is_converting_each_value() {
        let mut state = 0x2545_f491_u32;
        let mut values: Vec<f32> = [0x7fc0_0000, 0xff81_2345, 0x3380_0000, 0x477f_f000]
            .into_iter()
            .map(f32::from_bits)
            .collect();
        for _ in 0..5000 {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            values.push(f32::from_bits(state));
        }
        let HostValues::F16(halves) = HostValues::narrow(Dtype::F16, &values) else {
            panic!("not f16");
        };
        for (value, half) in values.iter().zip(&halves) {
            assert_eq!(f16::from_f32(*value).to_bits(), half.to_bits());
        }
        let widened = HostValues::F16(halves.clone()).widen();
        for (half, wide) in halves.iter().zip(&widened) {
            assert_eq!(half.to_f32().to_bits(), wide.to_bits());
        }
    }

    #[test]
    fn names_round_trip_and_sizes_are_the_element_widths() {
        for dtype in Dtype::ALL {
            assert_eq!(dtype.name().parse::<Dtype>(), Ok(dtype));
            assert_eq!(dtype.eredu(), dtype.eredu());
        }
        assert!("f64".parse::<Dtype>().is_err());
        assert_eq!(
            Dtype::ALL.map(Dtype::size),
            [4, 2, 2],
            "element sizes of f32, f16, bf16"
        );
    }

    #[test]
    fn same_bits_tells_signed_zeros_and_dtypes_apart() {
        let values = [0.0, 1.5, -2.0];
        for dtype in Dtype::ALL {
            let built = HostValues::narrow(dtype, &values);
            assert!(built.same_bits(&built.clone()), "{dtype}");
            assert!(
                !built.same_bits(&HostValues::narrow(dtype, &[-0.0, 1.5, -2.0])),
                "{dtype}"
            );
            assert!(
                !built.same_bits(&HostValues::narrow(dtype, &values[..2])),
                "{dtype}"
            );
        }
        assert!(!HostValues::narrow(Dtype::F16, &values)
            .same_bits(&HostValues::narrow(Dtype::Bf16, &values)));
    }

    #[test]
    fn narrowing_representable_values_is_exact() {
        for dtype in Dtype::ALL {
            let values = [-0.0, 0.5, -3.25, dtype.max(), dtype.min_positive(), 1024.0];
            for value in values {
                assert!(dtype.represents(value), "{dtype} {value}");
            }
            let widened = HostValues::narrow(dtype, &values).widen();
            assert_eq!(
                widened.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                values.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
            );
        }
        assert!(!Dtype::Bf16.represents(257.0));
        assert!(!Dtype::F16.represents(2049.0));
    }
}
