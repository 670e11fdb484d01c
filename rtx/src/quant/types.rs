//! The ggml element types: their GGUF ids, block sizes and bytes per block, for every type a
//! GGUF file may name (so a file's directory can be checked whatever it holds), and
//! [`GgmlType`], the types rtx can dequantize.
//!
//! Invariant: the table is ggml's own (`GGML_QUANT_SIZES` of the `gguf` Python package, version
//! 0.19.0); a size computed from it is checked for overflow.

use std::fmt;

/// `(GGUF id, name, elements per block, bytes per block)` of every ggml type.
const TABLE: &[(u32, &str, usize, usize)] = &[
    (0, "F32", 1, 4),
    (1, "F16", 1, 2),
    (2, "Q4_0", 32, 18),
    (3, "Q4_1", 32, 20),
    (6, "Q5_0", 32, 22),
    (7, "Q5_1", 32, 24),
    (8, "Q8_0", 32, 34),
    (9, "Q8_1", 32, 40),
    (10, "Q2_K", 256, 84),
    (11, "Q3_K", 256, 110),
    (12, "Q4_K", 256, 144),
    (13, "Q5_K", 256, 176),
    (14, "Q6_K", 256, 210),
    (15, "Q8_K", 256, 292),
    (16, "IQ2_XXS", 256, 66),
    (17, "IQ2_XS", 256, 74),
    (18, "IQ3_XXS", 256, 98),
    (19, "IQ1_S", 256, 50),
    (20, "IQ4_NL", 32, 18),
    (21, "IQ3_S", 256, 110),
    (22, "IQ2_S", 256, 82),
    (23, "IQ4_XS", 256, 136),
    (24, "I8", 1, 1),
    (25, "I16", 1, 2),
    (26, "I32", 1, 4),
    (27, "I64", 1, 8),
    (28, "F64", 1, 8),
    (29, "IQ1_M", 256, 56),
    (30, "BF16", 1, 2),
    (34, "TQ1_0", 256, 54),
    (35, "TQ2_0", 256, 66),
    (39, "MXFP4", 32, 17),
    (40, "NVFP4", 64, 36),
    (41, "Q1_0", 128, 18),
];

/// A ggml type id as the file names it: its name, elements per block and bytes per block, or
/// `None` for an id ggml does not define.
pub(crate) fn layout_of_id(id: u32) -> Option<(&'static str, usize, usize)> {
    TABLE
        .iter()
        .find(|t| t.0 == id)
        .map(|&(_, name, block, bytes)| (name, block, bytes))
}

/// The bytes `numel` elements of type id `id` take: `None` when `numel` is not a whole number
/// of blocks or the size overflows (the caller has checked that the id exists).
pub(crate) fn bytes_of(id: u32, numel: usize) -> Option<usize> {
    let (_, block, bytes) = layout_of_id(id)?;
    if !numel.is_multiple_of(block) {
        return None;
    }
    (numel / block).checked_mul(bytes)
}

/// An element type of quantized (or plain float) data that rtx can dequantize, as ggml and GGUF
/// define it: values are stored in blocks of [`block_size`](GgmlType::block_size) elements,
/// each [`type_size`](GgmlType::type_size) bytes.
///
/// ```
/// use rtx::quant::GgmlType;
/// assert_eq!(GgmlType::from_id(12)?, GgmlType::Q4_K);
/// assert_eq!((GgmlType::Q4_K.block_size(), GgmlType::Q4_K.type_size()), (256, 144));
/// assert!(GgmlType::from_id(11).is_err()); // Q3_K: a ggml type rtx cannot dequantize
/// # Ok::<(), rtx::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[allow(non_camel_case_types)]
pub enum GgmlType {
    /// IEEE binary32.
    F32,
    /// IEEE binary16.
    F16,
    /// bfloat16.
    BF16,
    /// 32 values of 4 bits and one f16 scale: `d * (q - 8)`.
    Q4_0,
    /// 32 values of 4 bits, an f16 scale and an f16 minimum: `d * q + m`.
    Q4_1,
    /// 32 values of 5 bits and one f16 scale: `d * (q - 16)`.
    Q5_0,
    /// 32 values of 5 bits, an f16 scale and an f16 minimum: `d * q + m`.
    Q5_1,
    /// 32 values of 8 bits and one f16 scale: `q * d`.
    Q8_0,
    /// 256 values of 4 bits in 8 sub-blocks with 6-bit scales and minimums.
    Q4_K,
    /// 256 values of 5 bits in 8 sub-blocks with 6-bit scales and minimums.
    Q5_K,
    /// 256 values of 6 bits in 16 sub-blocks with 8-bit scales.
    Q6_K,
}

impl GgmlType {
    /// Every type rtx dequantizes.
    pub const ALL: [GgmlType; 11] = [
        GgmlType::F32,
        GgmlType::F16,
        GgmlType::BF16,
        GgmlType::Q4_0,
        GgmlType::Q4_1,
        GgmlType::Q5_0,
        GgmlType::Q5_1,
        GgmlType::Q8_0,
        GgmlType::Q4_K,
        GgmlType::Q5_K,
        GgmlType::Q6_K,
    ];

    /// The type's id in GGUF files (ggml's `enum ggml_type`).
    pub fn id(self) -> u32 {
        match self {
            GgmlType::F32 => 0,
            GgmlType::F16 => 1,
            GgmlType::Q4_0 => 2,
            GgmlType::Q4_1 => 3,
            GgmlType::Q5_0 => 6,
            GgmlType::Q5_1 => 7,
            GgmlType::Q8_0 => 8,
            GgmlType::Q4_K => 12,
            GgmlType::Q5_K => 13,
            GgmlType::Q6_K => 14,
            GgmlType::BF16 => 30,
        }
    }

    /// The type of a GGUF id. An id of a ggml type rtx cannot dequantize (`Q3_K`, the `IQ`
    /// types, ...) or of no ggml type at all is an [`Error::BadArgument`](crate::Error) that
    /// names it.
    pub fn from_id(id: u32) -> crate::Result<GgmlType> {
        if let Some(t) = GgmlType::ALL.into_iter().find(|t| t.id() == id) {
            return Ok(t);
        }
        let supported: Vec<&str> = GgmlType::ALL.iter().map(|t| t.name()).collect();
        let msg = match layout_of_id(id) {
            Some((name, ..)) => format!(
                "ggml type {name} (id {id}) cannot be dequantized by rtx; it reads {}",
                supported.join(", ")
            ),
            None => format!("{id} is not a ggml type id"),
        };
        Err(crate::Error::BadArgument {
            op: "GgmlType::from_id",
            msg,
        })
    }

    /// ggml's name of the type (`"Q4_K"`).
    pub fn name(self) -> &'static str {
        match layout_of_id(self.id()) {
            Some((name, ..)) => name,
            None => "?",
        }
    }

    /// Elements per block: 1 for the float types, 32 for `Q4_0` to `Q8_0`, 256 for the K types.
    pub fn block_size(self) -> usize {
        layout_of_id(self.id()).map_or(1, |l| l.1)
    }

    /// Bytes per block.
    pub fn type_size(self) -> usize {
        layout_of_id(self.id()).map_or(1, |l| l.2)
    }

    /// The bytes `numel` elements take, or `None` when `numel` is not a whole number of blocks
    /// (or the size overflows).
    pub fn bytes_for(self, numel: usize) -> Option<usize> {
        bytes_of(self.id(), numel)
    }
}

impl fmt::Display for GgmlType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_round_trips_through_its_id() {
        for t in GgmlType::ALL {
            assert_eq!(GgmlType::from_id(t.id()), Ok(t));
        }
        let e = GgmlType::from_id(99).unwrap_err().to_string();
        assert!(e.contains("99 is not a ggml type id"), "{e}");
        let e = GgmlType::from_id(11).unwrap_err().to_string();
        assert!(e.contains("Q3_K (id 11) cannot be dequantized"), "{e}");
        assert_eq!(GgmlType::Q6_K.bytes_for(512), Some(420));
        assert_eq!(GgmlType::Q8_0.bytes_for(33), None);
        assert_eq!(bytes_of(0, usize::MAX / 2), None);
    }
}
