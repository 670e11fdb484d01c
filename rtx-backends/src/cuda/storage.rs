//! `CudaStorage<E>`: a tensor's elements in GPU memory, and the copies between host and device
//! and between devices. The buffer is shared between clones and never written after it is
//! filled (ops make fresh storage), so sharing is safe.

use super::alloc::{DeviceBuffer, alloc};
use super::gpu::{Gpu, gpu};
use super::launch::{DevicePtr, submit_driver};
use crate::{BackendError, Result};
use cudarc::driver::result as drv;
use cudarc::driver::sys;
use rtx_kernels::Element;
use std::marker::PhantomData;
use std::ops::Range;
use std::sync::Arc;

/// Elements of type `E` in the memory of one GPU.
pub struct CudaStorage<E> {
    buf: Arc<Buffer>,
    len: usize,
    _e: PhantomData<E>,
}

/// A block and the GPU it lives on (the block itself knows only its allocator).
struct Buffer {
    block: DeviceBuffer,
    gpu: Arc<Gpu>,
}

impl Buffer {
    /// The block's address.
    fn ptr(&self) -> u64 {
        self.block.ptr
    }
}

impl<E> Clone for CudaStorage<E> {
    fn clone(&self) -> Self {
        CudaStorage {
            buf: self.buf.clone(),
            len: self.len,
            _e: PhantomData,
        }
    }
}

impl<E> std::fmt::Debug for CudaStorage<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "CudaStorage<{}>(cuda:{}, {} elements)",
            std::any::type_name::<E>(),
            self.buf.gpu.ordinal,
            self.len
        )
    }
}

/// The memset word that writes a value: its bytes as the shortest repeating unit of 1, 2 or
/// 4 bytes.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Word {
    U8(u8),
    U16(u16),
    U32(u32),
}

/// `value`'s bytes as a repeating memset word, or `None` when they do not repeat with a
/// period of 4 bytes or less.
fn memset_word<E: Element>(value: E) -> Option<Word> {
    let size = std::mem::size_of::<E>();
    let mut bytes = [0u8; 16];
    if size > bytes.len() {
        return None;
    }
    bytes[..size].copy_from_slice(crate::bytes_of(&[value]));
    let repeats = |p: usize| size.is_multiple_of(p) && (p..size).all(|i| bytes[i] == bytes[i - p]);
    if repeats(1) {
        Some(Word::U8(bytes[0]))
    } else if repeats(2) {
        Some(Word::U16(u16::from_ne_bytes([bytes[0], bytes[1]])))
    } else if repeats(4) {
        Some(Word::U32(u32::from_ne_bytes([
            bytes[0], bytes[1], bytes[2], bytes[3],
        ])))
    } else {
        None
    }
}

fn byte_len<E>(n: usize) -> usize {
    n * std::mem::size_of::<E>()
}

impl<E: Element> CudaStorage<E> {
    /// `len` elements of uninitialized memory on GPU `ordinal` (for kernels to fill).
    pub fn uninit(ordinal: usize, len: usize) -> Result<Self> {
        Self::alloc_on(&gpu(ordinal)?, len)
    }

    pub(crate) fn alloc_on(g: &Arc<Gpu>, len: usize) -> Result<Self> {
        let block = alloc(g, &g.alloc, byte_len::<E>(len))?;
        Ok(CudaStorage {
            buf: Arc::new(Buffer {
                block,
                gpu: g.clone(),
            }),
            len,
            _e: PhantomData,
        })
    }

    /// A copy of `data` on GPU `ordinal`.
    pub fn from_slice(ordinal: usize, data: &[E]) -> Result<Self> {
        let g = gpu(ordinal)?;
        let s = Self::alloc_on(&g, data.len())?;
        if !data.is_empty() {
            g.not_capturing("copying host data to the GPU")?;
            g.bind()?;
            // SAFETY: the block holds `data.len()` elements; a copy from pageable host memory
            // returns once the source has been staged, so `data` may go away after it.
            unsafe { drv::memcpy_htod_async(s.buf.ptr(), data, g.stream.cu_stream()) }
                .map_err(|e| g.err("cuMemcpyHtoDAsync", e))?;
        }
        Ok(s)
    }

    /// `len` copies of `value` on GPU `ordinal`, written by a device memset when the value's
    /// bytes repeat with a period of 1, 2 or 4 (every 1-, 2- and 4-byte value, and 8-byte
    /// ones such as 0), so filling uploads nothing and can be captured in a CUDA graph. Other
    /// 8-byte values (`1.0f64`, `-1i64`) are copied from the host.
    pub fn filled(ordinal: usize, len: usize, value: E) -> Result<Self> {
        let Some(word) = memset_word(value) else {
            return Self::from_slice(ordinal, &vec![value; len]);
        };
        let g = gpu(ordinal)?;
        let s = Self::alloc_on(&g, len)?;
        let bytes = byte_len::<E>(len);
        if bytes == 0 {
            return Ok(s);
        }
        let ptr = s.buf.ptr();
        submit_driver(&g, "cuMemsetAsync", |g| {
            let stream = g.stream.cu_stream();
            // SAFETY: the block holds `bytes` bytes, a multiple of the word's width (the word
            // repeats with a period dividing the element size); the pattern written is
            // `value`'s bytes, so every element is a valid `E`.
            unsafe {
                match word {
                    Word::U8(b) => drv::memset_d8_async(ptr, b, bytes, stream),
                    Word::U16(h) => sys::cuMemsetD16Async(ptr, h, bytes / 2, stream).result(),
                    Word::U32(w) => sys::cuMemsetD32Async(ptr, w, bytes / 4, stream).result(),
                }
            }
        })?;
        Ok(s)
    }

    /// The elements in `range`, copied to the host (waits for the queued work that writes them).
    pub fn range_to_host(&self, range: Range<usize>) -> Result<Vec<E>> {
        self.check_range("to_vec", &range)?;
        let g = &self.buf.gpu;
        let n = range.len();
        let mut out = vec![E::default(); n];
        if n > 0 {
            g.bind()?;
            // SAFETY: `out` has room for `n` elements and the source range is inside the block;
            // E is plain data (every Element is), so any bytes the GPU wrote are a valid E once
            // kernels write only valid values (bool as 0 or 1).
            unsafe {
                drv::memcpy_dtoh_async(
                    &mut out[..],
                    self.buf.ptr() + byte_len::<E>(range.start) as u64,
                    g.stream.cu_stream(),
                )
            }
            .map_err(|e| g.err("cuMemcpyDtoHAsync", e))?;
            g.synchronize()?;
        }
        Ok(out)
    }

    /// All elements, copied to the host.
    pub fn to_host(&self) -> Result<Vec<E>> {
        self.range_to_host(0..self.len)
    }

    /// Overwrites this buffer with the elements `range` of `src` (on the same GPU, queued on
    /// its stream). The lengths must match.
    pub fn copy_from_range(&self, src: &Self, range: Range<usize>) -> Result<()> {
        src.check_range("copy", &range)?;
        let g = &self.buf.gpu;
        if range.len() != self.len || g.ordinal != src.buf.gpu.ordinal {
            return Err(BackendError::BadArgument {
                op: "copy",
                msg: format!(
                    "{} elements on GPU {} cannot overwrite {} on GPU {}",
                    range.len(),
                    src.buf.gpu.ordinal,
                    self.len,
                    g.ordinal
                ),
            });
        }
        let bytes = byte_len::<E>(range.len());
        if bytes == 0 {
            return Ok(());
        }
        let (to, from) = (
            self.buf.ptr(),
            src.buf.ptr() + byte_len::<E>(range.start) as u64,
        );
        submit_driver(g, "cuMemcpyDtoDAsync", |g| {
            // SAFETY: both ranges lie inside their blocks; one stream orders the copy after the
            // source's writes and before later reads of this buffer.
            unsafe { drv::memcpy_dtod_async(to, from, bytes, g.stream.cu_stream()) }
        })
    }

    /// `parts` one after another in fresh storage on their GPU (all on one GPU, at least one
    /// part).
    pub fn concat(parts: &[Self]) -> Result<Self> {
        let Some(first) = parts.first() else {
            return Err(BackendError::BadArgument {
                op: "concat",
                msg: "no parts to join".into(),
            });
        };
        let g = &first.buf.gpu;
        if let Some(p) = parts.iter().find(|p| p.buf.gpu.ordinal != g.ordinal) {
            return Err(BackendError::BadArgument {
                op: "concat",
                msg: format!("parts on GPUs {} and {}", g.ordinal, p.buf.gpu.ordinal),
            });
        }
        let out = Self::alloc_on(g, parts.iter().map(|p| p.len).sum())?;
        let mut at = out.buf.ptr();
        for p in parts {
            let (bytes, from) = (byte_len::<E>(p.len), p.buf.ptr());
            if bytes > 0 {
                submit_driver(g, "cuMemcpyDtoDAsync", |g| {
                    // SAFETY: each part lands in its own range of the fresh block, in order on
                    // the GPU's one stream.
                    unsafe { drv::memcpy_dtod_async(at, from, bytes, g.stream.cu_stream()) }
                })?;
            }
            at += bytes as u64;
        }
        Ok(out)
    }

    /// The elements in `range` as fresh storage on GPU `ordinal` (this GPU or another).
    pub fn copy_range_to(&self, range: Range<usize>, ordinal: usize) -> Result<Self> {
        self.check_range("to_device", &range)?;
        let src = &self.buf.gpu;
        let dst_gpu = gpu(ordinal)?;
        let out = Self::alloc_on(&dst_gpu, range.len())?;
        let bytes = byte_len::<E>(range.len());
        if bytes == 0 {
            return Ok(out);
        }
        let from = self.buf.ptr() + byte_len::<E>(range.start) as u64;
        if dst_gpu.ordinal == src.ordinal {
            src.bind()?;
            // SAFETY: both ranges lie inside their blocks; same stream, so ordered after the
            // writes of the source.
            unsafe { drv::memcpy_dtod_async(out.buf.ptr(), from, bytes, src.stream.cu_stream()) }
                .map_err(|e| src.err("cuMemcpyDtoDAsync", e))?;
        } else {
            // The source's stream must be done writing before another GPU reads it.
            src.synchronize()?;
            dst_gpu.bind()?;
            // SAFETY: as above; the peer copy is queued on the destination's stream.
            unsafe {
                drv::memcpy_peer_async(
                    dst_gpu.ctx.cu_ctx(),
                    out.buf.ptr(),
                    src.ctx.cu_ctx(),
                    from,
                    bytes,
                    dst_gpu.stream.cu_stream(),
                )
            }
            .map_err(|e| dst_gpu.err("cuMemcpyPeerAsync", e))?;
        }
        Ok(out)
    }

    /// Whether another handle shares this buffer (a clone of this storage): a kernel may
    /// write into the buffer in place only when none does.
    pub fn is_shared(&self) -> bool {
        Arc::strong_count(&self.buf) > 1
    }

    /// The same buffer seen as bytes, for byte-level code such as the NCCL collectives.
    pub fn into_bytes(self) -> CudaStorage<u8> {
        CudaStorage {
            len: byte_len::<E>(self.len),
            buf: self.buf,
            _e: PhantomData,
        }
    }

    /// A byte buffer seen as elements of `E` again.
    ///
    /// # Errors
    /// [`BackendError::BadArgument`] when the byte length is not a multiple of `E`'s size.
    pub fn from_bytes(bytes: CudaStorage<u8>) -> Result<Self> {
        let size = std::mem::size_of::<E>();
        if !bytes.len.is_multiple_of(size) {
            return Err(BackendError::BadArgument {
                op: "CudaStorage::from_bytes",
                msg: format!(
                    "{} bytes are not a whole number of {size}-byte elements",
                    bytes.len
                ),
            });
        }
        Ok(CudaStorage {
            len: bytes.len / size,
            buf: bytes.buf,
            _e: PhantomData,
        })
    }

    /// The number of elements held.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no elements are held.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The CUDA ordinal of the GPU holding the elements.
    pub fn ordinal(&self) -> usize {
        self.buf.gpu.ordinal
    }

    /// The address of element `index`, for a kernel argument.
    pub fn ptr_at(&self, index: usize) -> DevicePtr {
        DevicePtr(self.buf.ptr() + byte_len::<E>(index) as u64)
    }

    /// The address of the first element, for a kernel argument.
    pub fn device_ptr(&self) -> DevicePtr {
        self.ptr_at(0)
    }

    pub(crate) fn gpu(&self) -> &Arc<Gpu> {
        &self.buf.gpu
    }

    fn check_range(&self, op: &'static str, range: &Range<usize>) -> Result<()> {
        if range.start <= range.end && range.end <= self.len {
            Ok(())
        } else {
            Err(BackendError::BadArgument {
                op,
                msg: format!(
                    "elements {range:?} are outside a CUDA buffer of {} elements",
                    self.len
                ),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Word, memset_word};
    use half::bf16;

    #[test]
    fn memset_words_repeat_the_values_bytes() {
        assert_eq!(memset_word(true), Some(Word::U8(1)));
        assert_eq!(memset_word(0.0f64), Some(Word::U8(0)));
        assert_eq!(memset_word(-1i64), Some(Word::U8(0xff)));
        assert_eq!(
            memset_word(bf16::from_f32(1.0)),
            Some(Word::U16(bf16::from_f32(1.0).to_bits()))
        );
        assert_eq!(memset_word(1.0f32), Some(Word::U32(1.0f32.to_bits())));
        assert_eq!(
            memset_word(f32::NEG_INFINITY),
            Some(Word::U32(f32::NEG_INFINITY.to_bits()))
        );
        // 1.0f64's halves differ: no 4-byte word writes it.
        assert_eq!(memset_word(1.0f64), None);
        assert_eq!(memset_word(7i64), None);
    }
}
