//! Tensor maps for Hopper's tensor memory accelerator: a kernel's [`TensorMap`] parameter
//! (a 2-D view of one of its buffers) encoded, with the buffer's device address, as the
//! 128-byte `CUtensorMap` the kernel's `cp.async.bulk.tensor` reads from its parameters.
//!
//! Invariant: every map is encoded as the native emulation reads it (`rtx_kernels::kernel::
//! tma`): row-major, boxes of `box_rows` rows by 128 bytes, the 128-byte swizzle, elements
//! outside the view read as zeros.

use super::launch::{DevicePtr, KernelArg, sealed};
use crate::{BackendError, Result};
use cudarc::driver::sys::{
    CUresult, CUtensorMap, CUtensorMapDataType, CUtensorMapFloatOOBfill, CUtensorMapInterleave,
    CUtensorMapL2promotion, CUtensorMapSwizzle, cuTensorMapEncodeTiled,
};
use rtx_kernels::DType;
use rtx_kernels::kernel::{TMA_BOX_ROW_BYTES, TensorMap};

/// A `CUtensorMap`, as a launch argument (128 bytes, 64-byte aligned as the driver wants it).
#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
pub struct EncodedTensorMap([u64; 16]);

impl sealed::Sealed for EncodedTensorMap {}
impl KernelArg for EncodedTensorMap {
    fn push_words(&self, words: &mut Vec<u64>) {
        words.extend_from_slice(&self.0);
    }
}

/// Encodes `map` over the buffer at `ptr` of `dtype` elements (f16 or bf16).
pub fn encode(map: &TensorMap, ptr: DevicePtr, dtype: DType) -> Result<EncodedTensorMap> {
    let bad = |msg: String| BackendError::BadArgument {
        op: "tensor map",
        msg,
    };
    let data_type = match dtype {
        DType::BF16 => CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
        DType::F16 => CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
        d => {
            return Err(bad(format!(
                "tensor maps view f16 or bf16 buffers, not {d:?}"
            )));
        }
    };
    if !ptr.0.is_multiple_of(16) {
        return Err(bad(format!(
            "the buffer at {:#x} does not start on a 16-byte boundary",
            ptr.0
        )));
    }
    let elem = dtype.size_in_bytes() as u64;
    let dims = [map.cols as u64, map.rows as u64];
    let strides = [map.row_stride as u64 * elem];
    let boxes = [(TMA_BOX_ROW_BYTES as u64 / elem) as u32, map.box_rows];
    let element_strides = [1u32, 1];
    let mut out = CUtensorMap { opaque: [0; 16] };
    // SAFETY: every pointer is to a live local of the length the rank (2) implies; the driver
    // only reads `ptr`'s value, which it stores in the map.
    let r = unsafe {
        cuTensorMapEncodeTiled(
            &mut out,
            data_type,
            2,
            ptr.0 as *mut std::ffi::c_void,
            dims.as_ptr(),
            strides.as_ptr(),
            boxes.as_ptr(),
            element_strides.as_ptr(),
            CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
            CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B,
            CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        )
    };
    if r != CUresult::CUDA_SUCCESS {
        return Err(bad(format!(
            "cuTensorMapEncodeTiled refused {map:?} over the buffer at {:#x}: {r:?}",
            ptr.0
        )));
    }
    Ok(EncodedTensorMap(out.opaque))
}
