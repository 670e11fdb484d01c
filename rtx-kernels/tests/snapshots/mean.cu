// rtx kernel prelude: what every generated kernel needs, with no header (NVRTC finds none).
#ifndef RTX_KERNEL_PRELUDE
#define RTX_KERNEL_PRELUDE
// f16 and bf16 travel as their 16-bit patterns and are computed in float.
struct rtx_f16 { unsigned short bits; };
struct rtx_bf16 { unsigned short bits; };
// Layout structs of strided elementwise entries (rtx_kernels::kernel::{KernelShape, KernelStrides}).
struct rtx_shape { unsigned int rank; unsigned int vectors; unsigned long long dims[6]; };
struct rtx_strides { long long offset; long long strides[6]; };
union rtx_f32_bits { float f; unsigned int u; };
union rtx_f64_bits { double f; unsigned long long u; };
struct alignas(16) rtx_u4 { unsigned int a, b, c, d; };

// Every entry point starts with RTX_ENTRY(). On Hopper the launcher may start a kernel while
// the one before it in the stream is still finishing (programmatic dependent launch), so that
// the launch and the blocks' start overlap the previous kernel's tail. The entry first lets the
// next kernel launch, then waits until the previous one has finished and its writes are
// visible: no entry touches memory before that. Launched the ordinary way, both are no-ops.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define RTX_ENTRY() asm volatile("griddepcontrol.launch_dependents;\n\tgriddepcontrol.wait;" ::: "memory")
#else
#define RTX_ENTRY()
#endif

// The conversions are the hardware's (cvt, exact or rounded to nearest even) where the GPU has
// them, with NaN mapped to the bit patterns the CPU side (the `half` crate) gives, so every
// device agrees bit for bit; the integer forms after them are the same functions in software.
__device__ __forceinline__ float rtx_f16_to_f32(unsigned short h) {
  const unsigned int sign = ((unsigned int)h & 0x8000u) << 16;
  const unsigned int e = ((unsigned int)h >> 10) & 0x1fu;
  const unsigned int m = (unsigned int)h & 0x3ffu;
  rtx_f32_bits r;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 530
  asm("cvt.f32.f16 %0, %1;" : "=f"(r.f) : "h"(h));
  if (e == 0x1fu && m != 0u) r.u = sign | 0x7f800000u | (m << 13);
#else
  if (e == 0x1fu) {
    r.u = sign | 0x7f800000u | (m << 13);
  } else if (e != 0u) {
    r.u = sign | ((e + 112u) << 23) | (m << 13);
  } else {
    // Zero or subnormal: m * 2^-24 is exact in float.
    r.f = (float)m * 5.9604644775390625e-8f;
    r.u |= sign;
  }
#endif
  return r.f;
}

// Round to nearest, ties to even; NaN stays a (quiet) NaN.
__device__ __forceinline__ unsigned short rtx_f32_to_f16(float f) {
  rtx_f32_bits b;
  b.f = f;
  const unsigned int sign = (b.u >> 16) & 0x8000u;
  const unsigned int ax = b.u & 0x7fffffffu;
  if (ax > 0x7f800000u) return (unsigned short)(sign | 0x7e00u);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 530
  unsigned short h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
#else
  if (ax >= 0x477ff000u) return (unsigned short)(sign | 0x7c00u);
  if (ax < 0x38800000u) {
    if (ax < 0x33000000u) return (unsigned short)sign;
    const unsigned int m = (ax & 0x7fffffu) | 0x800000u;
    const unsigned int s = 126u - (ax >> 23);
    unsigned int r = m >> s;
    const unsigned int rem = m & ((1u << s) - 1u);
    const unsigned int half = 1u << (s - 1u);
    if (rem > half || (rem == half && (r & 1u))) r += 1u;
    return (unsigned short)(sign | r);
  }
  unsigned int r = (ax - 0x38000000u) >> 13;
  const unsigned int rem = ax & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) r += 1u;
  return (unsigned short)(sign | r);
#endif
}

__device__ __forceinline__ float rtx_bf16_to_f32(unsigned short h) {
  rtx_f32_bits r;
  r.u = (unsigned int)h << 16;
  return r.f;
}

__device__ __forceinline__ unsigned short rtx_f32_to_bf16(float f) {
  rtx_f32_bits b;
  b.f = f;
  if ((b.u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((b.u >> 16) | 0x40u);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  unsigned short h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
#else
  return (unsigned short)((b.u + 0x7fffu + ((b.u >> 16) & 1u)) >> 16);
#endif
}

// Storage type S -> compute type acc, and back.
template <typename S> struct rtx_elem;
template <> struct rtx_elem<float> {
  typedef float acc;
  static __device__ __forceinline__ float widen(float x) { return x; }
  static __device__ __forceinline__ float narrow(float x) { return x; }
};
template <> struct rtx_elem<double> {
  typedef double acc;
  static __device__ __forceinline__ double widen(double x) { return x; }
  static __device__ __forceinline__ double narrow(double x) { return x; }
};
template <> struct rtx_elem<rtx_f16> {
  typedef float acc;
  static __device__ __forceinline__ float widen(rtx_f16 x) { return rtx_f16_to_f32(x.bits); }
  static __device__ __forceinline__ rtx_f16 narrow(float x) { rtx_f16 r; r.bits = rtx_f32_to_f16(x); return r; }
};
template <> struct rtx_elem<rtx_bf16> {
  typedef float acc;
  static __device__ __forceinline__ float widen(rtx_bf16 x) { return rtx_bf16_to_f32(x.bits); }
  static __device__ __forceinline__ rtx_bf16 narrow(float x) { rtx_bf16 r; r.bits = rtx_f32_to_bf16(x); return r; }
};

// 16 bytes of elements, loaded and stored as one vector access.
template <typename S> union rtx_vec {
  rtx_u4 raw;
  S v[16 / sizeof(S)];
};
template <typename S> __device__ __forceinline__ bool rtx_aligned16(const S* p) {
  return ((unsigned long long)p & 15ull) == 0ull;
}
template <typename S> __device__ __forceinline__ rtx_vec<S> rtx_load_vec(const S* p, unsigned long long v) {
  rtx_vec<S> r;
  r.raw = reinterpret_cast<const rtx_u4*>(p)[v];
  return r;
}
template <typename S> __device__ __forceinline__ void rtx_store_vec(S* p, unsigned long long v, rtx_vec<S> x) {
  reinterpret_cast<rtx_u4*>(p)[v] = x.raw;
}
// N elements of T moved as one access of N * sizeof(T) bytes (strided entries' vector path,
// where bool masks travel beside 16-byte element vectors).
template <int B> struct rtx_raw;
template <> struct rtx_raw<16> { typedef rtx_u4 t; };
template <> struct rtx_raw<8> { typedef unsigned long long t; };
template <> struct rtx_raw<4> { typedef unsigned int t; };
template <> struct rtx_raw<2> { typedef unsigned short t; };
template <> struct rtx_raw<1> { typedef unsigned char t; };
template <typename T, unsigned int N> union rtx_pack {
  typename rtx_raw<sizeof(T) * N>::t raw;
  T v[N];
};
template <typename T, unsigned int N> __device__ __forceinline__ rtx_pack<T, N> rtx_load_pack(const T* p) {
  rtx_pack<T, N> r;
  r.raw = *reinterpret_cast<const typename rtx_raw<sizeof(T) * N>::t*>(p);
  return r;
}
template <typename T, unsigned int N> __device__ __forceinline__ rtx_pack<T, N> rtx_splat_pack(T x) {
  rtx_pack<T, N> r;
  for (unsigned int k = 0; k < N; ++k) r.v[k] = x;
  return r;
}
template <typename T, unsigned int N> __device__ __forceinline__ void rtx_store_pack(T* p, rtx_pack<T, N> x) {
  *reinterpret_cast<typename rtx_raw<sizeof(T) * N>::t*>(p) = x.raw;
}

// Math in the compute type.
__device__ __forceinline__ float rtx_exp(float x) { return expf(x); }
__device__ __forceinline__ double rtx_exp(double x) { return exp(x); }
// One hardware instruction (about 2 ulp); a result below 2^-126 is flushed to zero.
__device__ __forceinline__ float rtx_exp2(float x) {
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}
__device__ __forceinline__ double rtx_exp2(double x) { return exp2(x); }
__device__ __forceinline__ float rtx_ln(float x) { return logf(x); }
__device__ __forceinline__ double rtx_ln(double x) { return log(x); }
__device__ __forceinline__ float rtx_ln_1p(float x) { return log1pf(x); }
__device__ __forceinline__ double rtx_ln_1p(double x) { return log1p(x); }
__device__ __forceinline__ float rtx_sqrt(float x) { return sqrtf(x); }
__device__ __forceinline__ double rtx_sqrt(double x) { return sqrt(x); }
__device__ __forceinline__ float rtx_sin(float x) { return sinf(x); }
__device__ __forceinline__ double rtx_sin(double x) { return sin(x); }
__device__ __forceinline__ float rtx_cos(float x) { return cosf(x); }
__device__ __forceinline__ double rtx_cos(double x) { return cos(x); }
__device__ __forceinline__ float rtx_tanh(float x) { return tanhf(x); }
__device__ __forceinline__ double rtx_tanh(double x) { return tanh(x); }
__device__ __forceinline__ float rtx_erf(float x) { return erff(x); }
__device__ __forceinline__ double rtx_erf(double x) { return erf(x); }
__device__ __forceinline__ float rtx_abs(float x) { return fabsf(x); }
__device__ __forceinline__ double rtx_abs(double x) { return fabs(x); }
__device__ __forceinline__ float rtx_powf(float x, float y) { return powf(x, y); }
__device__ __forceinline__ double rtx_powf(double x, double y) { return pow(x, y); }
__device__ __forceinline__ float rtx_mul_add(float a, float b, float c) { return fmaf(a, b, c); }
__device__ __forceinline__ double rtx_mul_add(double a, double b, double c) { return fma(a, b, c); }
__device__ __forceinline__ float rtx_max(float a, float b) { return fmaxf(a, b); }
__device__ __forceinline__ double rtx_max(double a, double b) { return fmax(a, b); }
__device__ __forceinline__ float rtx_min(float a, float b) { return fminf(a, b); }
__device__ __forceinline__ double rtx_min(double a, double b) { return fmin(a, b); }
template <typename I> __device__ __forceinline__ I rtx_max(I a, I b) { return a < b ? b : a; }
template <typename I> __device__ __forceinline__ I rtx_min(I a, I b) { return b < a ? b : a; }
// Repeated squaring, the same steps as rtx_kernels::kernel::rt::powi.
template <typename A> __device__ __forceinline__ A rtx_powi(A x, int n) {
  A base = x;
  unsigned int e = n < 0 ? 0u - (unsigned int)n : (unsigned int)n;
  A acc = A(1.0);
  while (e > 0u) {
    if (e & 1u) acc = acc * base;
    base = base * base;
    e >>= 1;
  }
  return n < 0 ? A(1.0) / acc : acc;
}
template <typename A> __device__ __forceinline__ A rtx_inf();
template <> __device__ __forceinline__ float rtx_inf<float>() { rtx_f32_bits b; b.u = 0x7f800000u; return b.f; }
template <> __device__ __forceinline__ double rtx_inf<double>() { rtx_f64_bits b; b.u = 0x7ff0000000000000ull; return b.f; }
template <typename A> __device__ __forceinline__ A rtx_nan();
template <> __device__ __forceinline__ float rtx_nan<float>() { rtx_f32_bits b; b.u = 0x7fc00000u; return b.f; }
template <> __device__ __forceinline__ double rtx_nan<double>() { rtx_f64_bits b; b.u = 0x7ff8000000000000ull; return b.f; }

// Threads, warps and atomics.
__device__ __forceinline__ unsigned int rtx_linear_tid() {
  return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}
__device__ __forceinline__ float rtx_shfl_down(float v, unsigned int o) { return __shfl_down_sync(0xffffffffu, v, o); }
__device__ __forceinline__ int rtx_shfl_down(int v, unsigned int o) { return __shfl_down_sync(0xffffffffu, v, o); }
__device__ __forceinline__ unsigned int rtx_shfl_down(unsigned int v, unsigned int o) { return __shfl_down_sync(0xffffffffu, v, o); }
__device__ __forceinline__ unsigned long long rtx_shfl_down(unsigned long long v, unsigned int o) {
  unsigned int lo = __shfl_down_sync(0xffffffffu, (unsigned int)v, o);
  unsigned int hi = __shfl_down_sync(0xffffffffu, (unsigned int)(v >> 32), o);
  return ((unsigned long long)hi << 32) | lo;
}
__device__ __forceinline__ long long rtx_shfl_down(long long v, unsigned int o) {
  return (long long)rtx_shfl_down((unsigned long long)v, o);
}
__device__ __forceinline__ double rtx_shfl_down(double v, unsigned int o) {
  rtx_f64_bits b;
  b.f = v;
  b.u = rtx_shfl_down(b.u, o);
  return b.f;
}
__device__ __forceinline__ float rtx_shfl_xor(float v, unsigned int m) { return __shfl_xor_sync(0xffffffffu, v, (int)m); }
__device__ __forceinline__ int rtx_shfl_xor(int v, unsigned int m) { return __shfl_xor_sync(0xffffffffu, v, (int)m); }
__device__ __forceinline__ unsigned int rtx_shfl_xor(unsigned int v, unsigned int m) { return __shfl_xor_sync(0xffffffffu, v, (int)m); }
__device__ __forceinline__ unsigned long long rtx_shfl_xor(unsigned long long v, unsigned int m) {
  unsigned int lo = __shfl_xor_sync(0xffffffffu, (unsigned int)v, (int)m);
  unsigned int hi = __shfl_xor_sync(0xffffffffu, (unsigned int)(v >> 32), (int)m);
  return ((unsigned long long)hi << 32) | lo;
}
__device__ __forceinline__ long long rtx_shfl_xor(long long v, unsigned int m) {
  return (long long)rtx_shfl_xor((unsigned long long)v, m);
}
__device__ __forceinline__ double rtx_shfl_xor(double v, unsigned int m) {
  rtx_f64_bits b;
  b.f = v;
  b.u = rtx_shfl_xor(b.u, m);
  return b.f;
}
// Each returns the element's value before the add (`let old = atomic_add(..)`).
__device__ __forceinline__ float rtx_atomic_add(float* p, float v) { return atomicAdd(p, v); }
__device__ __forceinline__ double rtx_atomic_add(double* p, double v) { return atomicAdd(p, v); }
__device__ __forceinline__ int rtx_atomic_add(int* p, int v) { return atomicAdd(p, v); }
__device__ __forceinline__ unsigned int rtx_atomic_add(unsigned int* p, unsigned int v) {
  return atomicAdd(p, v);
}
__device__ __forceinline__ unsigned long long rtx_atomic_add(unsigned long long* p,
                                                             unsigned long long v) {
  return atomicAdd(p, v);
}
__device__ __forceinline__ long long rtx_atomic_add(long long* p, long long v) {
  return (long long)atomicAdd((unsigned long long*)p, (unsigned long long)v);
}
// 16-bit floats: compare-and-swap on the aligned 32-bit word holding the element; the old
// value widened.
template <typename H> __device__ __forceinline__ float rtx_atomic_add_16(H* p, float v) {
  unsigned int* w = (unsigned int*)((unsigned long long)p & ~3ull);
  const unsigned int shift = ((unsigned long long)p & 2ull) ? 16u : 0u;
  unsigned int old = *w;
  unsigned int assumed;
  H h;
  do {
    assumed = old;
    h.bits = (unsigned short)(assumed >> shift);
    const H sum = rtx_elem<H>::narrow(rtx_elem<H>::widen(h) + v);
    const unsigned int next = (assumed & ~(0xffffu << shift)) | ((unsigned int)sum.bits << shift);
    old = atomicCAS(w, assumed, next);
  } while (old != assumed);
  return rtx_elem<H>::widen(h);
}
__device__ __forceinline__ float rtx_atomic_add(rtx_f16* p, float v) { return rtx_atomic_add_16(p, v); }
__device__ __forceinline__ float rtx_atomic_add(rtx_bf16* p, float v) { return rtx_atomic_add_16(p, v); }
__device__ __forceinline__ void rtx_thread_fence() { __threadfence(); }
// grid_sync(): every block of a cooperative launch (all resident at once) waits here for the
// others. One arrival counter per module: block 0 adds 2^31 - (blocks - 1) and each other block
// 1, so every barrier flips the counter's top bit and leaves its low bits as they were, and it
// needs no reset between barriers or launches. Thread 0 arrives for its block after the block's
// barrier, with a release add (the block's writes, ordered before it by the barrier, are seen
// by whoever acquires the flip), and polls with acquire loads (the other blocks' writes are
// seen by its block's threads after the second barrier): no full fence either side.
__device__ unsigned int rtx_grid_arrived;
__device__ __forceinline__ void rtx_grid_sync() {
  __syncthreads();
  if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) {
    const unsigned int blocks = gridDim.x * gridDim.y * gridDim.z;
    const bool first = blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0;
    const unsigned int add = first ? 0x80000000u - (blocks - 1u) : 1u;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
    unsigned int old, now;
    asm volatile("atom.add.release.gpu.u32 %0, [%1], %2;"
                 : "=r"(old) : "l"(&rtx_grid_arrived), "r"(add) : "memory");
    do {
      asm volatile("ld.acquire.gpu.u32 %0, [%1];" : "=r"(now) : "l"(&rtx_grid_arrived) : "memory");
    } while (((old ^ now) & 0x80000000u) == 0u);
#else
    __threadfence();
    const unsigned int old = atomicAdd(&rtx_grid_arrived, add);
    while (((old ^ *(volatile unsigned int*)&rtx_grid_arrived) & 0x80000000u) == 0u) {
    }
    __threadfence();
#endif
  }
  __syncthreads();
}
#endif // RTX_KERNEL_PRELUDE

// `mean`: reduction generated by #[kernel] from Rust.
template <typename A>
__device__ __forceinline__ A mean_identity() {
  return A(0.0);
}

template <typename A>
__device__ __forceinline__ A mean_map(A x) {
  return x;
}

template <typename A>
__device__ __forceinline__ A mean_combine(A acc, A x) {
  return (acc + x);
}

template <typename A>
__device__ __forceinline__ A mean_finish(A acc, A n) {
  return (acc / n);
}

// One block per output (grid-stride over outputs); blockDim.x is a multiple of 32, at most 1024.
template <typename S>
__device__ __forceinline__ void mean_reduce(const S* x, S* rtx_out, unsigned long long outer, unsigned long long axis, unsigned long long inner) {
  typedef typename rtx_elem<S>::acc A;
  __shared__ A rtx_part[32];
  const unsigned int rtx_tid = threadIdx.x;
  const unsigned int rtx_lane = rtx_tid & 31u;
  const unsigned int rtx_warp = rtx_tid >> 5;
  const unsigned int rtx_warps = (blockDim.x + 31u) >> 5;
  const unsigned long long rtx_rows = outer * inner;
  for (unsigned long long rtx_row = blockIdx.x; rtx_row < rtx_rows; rtx_row += gridDim.x) {
    const unsigned long long rtx_o = rtx_row / inner;
    const unsigned long long rtx_i = rtx_row % inner;
    const S* rtx_base = x + rtx_o * axis * inner + rtx_i;
    A rtx_acc = mean_identity<A>();
    unsigned long long rtx_from = 0;
    // A contiguous, 16-byte aligned row: 16-byte loads, several in flight per thread.
    if (inner == 1ull && rtx_aligned16(rtx_base)) {
      const unsigned long long rtx_nv = axis / (16 / sizeof(S));
#pragma unroll 4
      for (unsigned long long rtx_v = rtx_tid; rtx_v < rtx_nv; rtx_v += blockDim.x) {
        const rtx_vec<S> rtx_x = rtx_load_vec(rtx_base, rtx_v);
#pragma unroll
        for (unsigned int rtx_j = 0; rtx_j < 16 / sizeof(S); ++rtx_j) {
          rtx_acc = mean_combine<A>(rtx_acc, mean_map<A>(rtx_elem<S>::widen(rtx_x.v[rtx_j])));
        }
      }
      rtx_from = rtx_nv * (16 / sizeof(S));
    }
    for (unsigned long long rtx_k = rtx_from + rtx_tid; rtx_k < axis; rtx_k += blockDim.x) {
      rtx_acc = mean_combine<A>(rtx_acc, mean_map<A>(rtx_elem<S>::widen(rtx_base[rtx_k * inner])));
    }
    for (unsigned int rtx_off = 16u; rtx_off > 0u; rtx_off >>= 1) {
      rtx_acc = mean_combine<A>(rtx_acc, rtx_shfl_down(rtx_acc, rtx_off));
    }
    if (rtx_lane == 0u) rtx_part[rtx_warp] = rtx_acc;
    __syncthreads();
    if (rtx_warp == 0u) {
      rtx_acc = rtx_lane < rtx_warps ? rtx_part[rtx_lane] : mean_identity<A>();
      for (unsigned int rtx_off = 16u; rtx_off > 0u; rtx_off >>= 1) {
        rtx_acc = mean_combine<A>(rtx_acc, rtx_shfl_down(rtx_acc, rtx_off));
      }
      if (rtx_lane == 0u) rtx_out[rtx_row] = rtx_elem<S>::narrow(mean_finish<A>(rtx_acc, (A)axis));
    }
    // rtx_part is reused by the next row.
    __syncthreads();
  }
}

// The block's `acc`s combined in a fixed order (shuffle tree, then the warps' results);
// the result is valid in thread 0. `rtx_warp` holds 32 values; the block size is a
// multiple of 32, at most 1024.
template <typename A>
__device__ __forceinline__ A mean_block(A rtx_acc, A* rtx_warp) {
  const unsigned int rtx_lane = threadIdx.x & 31u;
  const unsigned int rtx_w = threadIdx.x >> 5;
  for (unsigned int rtx_off = 16u; rtx_off > 0u; rtx_off >>= 1) {
    rtx_acc = mean_combine<A>(rtx_acc, rtx_shfl_down(rtx_acc, rtx_off));
  }
  if (rtx_lane == 0u) rtx_warp[rtx_w] = rtx_acc;
  __syncthreads();
  if (rtx_w == 0u) {
    rtx_acc = rtx_lane < ((blockDim.x + 31u) >> 5) ? rtx_warp[rtx_lane] : mean_identity<A>();
    for (unsigned int rtx_off = 16u; rtx_off > 0u; rtx_off >>= 1) {
      rtx_acc = mean_combine<A>(rtx_acc, rtx_shfl_down(rtx_acc, rtx_off));
    }
  }
  return rtx_acc;
}

// Along the middle axis with threads along `inner`: blockDim.x is 32 (neighbouring
// elements of `inner`), blockDim.y (at most 32) splits the axis; grid (ceil(inner / 32),
// up to `outer` with a grid-stride loop over it, chunks of the axis). Block z combines
// elements [z * chunk, (z + 1) * chunk) of the axis: without PART (one chunk, the whole
// axis) it writes the finished outputs; with PART its results in the compute type, to
// rtx_part[(o * gridDim.z + z) * inner + i], for `mean_cols_final` to combine in order.
template <typename S, bool PART>
__device__ __forceinline__ void mean_cols(const S* x, S* rtx_out, typename rtx_elem<S>::acc* rtx_part, unsigned long long outer, unsigned long long axis, unsigned long long inner, unsigned long long chunk) {
  typedef typename rtx_elem<S>::acc A;
  __shared__ A rtx_cols[32][33];
  const unsigned int rtx_tx = threadIdx.x;
  const unsigned int rtx_ty = threadIdx.y;
  const unsigned long long rtx_i = (unsigned long long)blockIdx.x * 32ull + rtx_tx;
  const unsigned long long rtx_begin = (unsigned long long)blockIdx.z * chunk;
  const unsigned long long rtx_end = rtx_begin + chunk < axis ? rtx_begin + chunk : axis;
  for (unsigned long long rtx_o = blockIdx.y; rtx_o < outer; rtx_o += gridDim.y) {
    A rtx_acc = mean_identity<A>();
    if (rtx_i < inner) {
      const S* rtx_base = x + rtx_o * axis * inner + rtx_i;
      // Eight loads in flight per thread (within 32 registers, so that two blocks of
      // 1024 threads share an SM).
#pragma unroll 8
      for (unsigned long long rtx_k = rtx_begin + rtx_ty; rtx_k < rtx_end; rtx_k += blockDim.y) {
        rtx_acc = mean_combine<A>(rtx_acc, mean_map<A>(rtx_elem<S>::widen(rtx_base[rtx_k * inner])));
      }
    }
    rtx_cols[rtx_ty][rtx_tx] = rtx_acc;
    __syncthreads();
    if (rtx_ty == 0u && rtx_i < inner) {
      for (unsigned int rtx_j = 1u; rtx_j < blockDim.y; ++rtx_j) {
        rtx_acc = mean_combine<A>(rtx_acc, rtx_cols[rtx_j][rtx_tx]);
      }
      if (PART) {
        rtx_part[(rtx_o * gridDim.z + blockIdx.z) * inner + rtx_i] = rtx_acc;
      } else {
        rtx_out[rtx_o * inner + rtx_i] = rtx_elem<S>::narrow(mean_finish<A>(rtx_acc, (A)axis));
      }
    }
    // rtx_cols is reused by the next `outer` index.
    __syncthreads();
  }
}

// Stage 2 of a split column reduction: output (o, i) combines its `parts` partial
// results in chunk order, then applies `finish` with the axis length `n`; a thread per
// output (grid-stride), neighbouring threads on neighbouring `i`.
template <typename S>
__device__ __forceinline__ void mean_cols_final(const typename rtx_elem<S>::acc* rtx_part, S* rtx_out, unsigned long long outer, unsigned long long parts, unsigned long long inner, unsigned long long n) {
  typedef typename rtx_elem<S>::acc A;
  const unsigned long long rtx_total = outer * inner;
  const unsigned long long rtx_step = (unsigned long long)gridDim.x * blockDim.x;
  for (unsigned long long rtx_j = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; rtx_j < rtx_total; rtx_j += rtx_step) {
    const unsigned long long rtx_o = rtx_j / inner;
    const A* rtx_p = rtx_part + rtx_o * parts * inner + (rtx_j - rtx_o * inner);
    A rtx_acc = mean_identity<A>();
    for (unsigned long long rtx_c = 0; rtx_c < parts; ++rtx_c) {
      rtx_acc = mean_combine<A>(rtx_acc, rtx_p[rtx_c * inner]);
    }
    rtx_out[rtx_j] = rtx_elem<S>::narrow(mean_finish<A>(rtx_acc, (A)n));
  }
}

// A warp per output, for short rows: warp w of block b reduces outputs b * warps + w,
// stepping by the grid's warps (the same for all lanes of a warp, so the shuffles see
// the whole warp); 16-byte loads along a contiguous aligned row, then a shuffle tree.
// No shared memory or barriers, so many rows are in flight on each SM.
template <typename S>
__device__ __forceinline__ void mean_rows(const S* x, S* rtx_out, unsigned long long outer, unsigned long long axis, unsigned long long inner) {
  typedef typename rtx_elem<S>::acc A;
  const unsigned int rtx_lane = threadIdx.x & 31u;
  const unsigned long long rtx_warps = blockDim.x >> 5;
  const unsigned long long rtx_rows = outer * inner;
  for (unsigned long long rtx_row = (unsigned long long)blockIdx.x * rtx_warps + (threadIdx.x >> 5); rtx_row < rtx_rows; rtx_row += (unsigned long long)gridDim.x * rtx_warps) {
    const unsigned long long rtx_o = rtx_row / inner;
    const unsigned long long rtx_i = rtx_row % inner;
    const S* rtx_base = x + rtx_o * axis * inner + rtx_i;
    A rtx_acc = mean_identity<A>();
    unsigned long long rtx_from = 0;
    if (inner == 1ull && rtx_aligned16(rtx_base)) {
      const unsigned long long rtx_nv = axis / (16 / sizeof(S));
#pragma unroll 4
      for (unsigned long long rtx_v = rtx_lane; rtx_v < rtx_nv; rtx_v += 32ull) {
        const rtx_vec<S> rtx_x = rtx_load_vec(rtx_base, rtx_v);
#pragma unroll
        for (unsigned int rtx_k = 0; rtx_k < 16 / sizeof(S); ++rtx_k) {
          rtx_acc = mean_combine<A>(rtx_acc, mean_map<A>(rtx_elem<S>::widen(rtx_x.v[rtx_k])));
        }
      }
      rtx_from = rtx_nv * (16 / sizeof(S));
    }
    for (unsigned long long rtx_k = rtx_from + rtx_lane; rtx_k < axis; rtx_k += 32ull) {
      rtx_acc = mean_combine<A>(rtx_acc, mean_map<A>(rtx_elem<S>::widen(rtx_base[rtx_k * inner])));
    }
    for (unsigned int rtx_off = 16u; rtx_off > 0u; rtx_off >>= 1) {
      rtx_acc = mean_combine<A>(rtx_acc, rtx_shfl_down(rtx_acc, rtx_off));
    }
    if (rtx_lane == 0u) rtx_out[rtx_row] = rtx_elem<S>::narrow(mean_finish<A>(rtx_acc, (A)axis));
  }
}

// Stage 1 over rows of `n` elements (row blockIdx.y): block b combines, after `map`,
// elements [b * chunk, (b + 1) * chunk) of its row into rtx_part[row * gridDim.x + b],
// in the compute type; 16-byte loads when the chunk is aligned (`chunk` is a multiple of
// 16 elements).
template <typename S>
__device__ __forceinline__ void mean_partial(const S* x, typename rtx_elem<S>::acc* rtx_part, unsigned long long n, unsigned long long chunk) {
  typedef typename rtx_elem<S>::acc A;
  __shared__ A rtx_warp[32];
  const S* rtx_row = x + (unsigned long long)blockIdx.y * n;
  const unsigned long long rtx_begin = (unsigned long long)blockIdx.x * chunk;
  const unsigned long long rtx_end = rtx_begin + chunk < n ? rtx_begin + chunk : n;
  A rtx_acc = mean_identity<A>();
  unsigned long long rtx_rest = rtx_begin;
  if (rtx_begin < rtx_end && rtx_aligned16(rtx_row + rtx_begin)) {
    const unsigned long long rtx_w = 16 / sizeof(S);
    const unsigned long long rtx_nv = (rtx_end - rtx_begin) / rtx_w;
#pragma unroll 4
    for (unsigned long long rtx_v = threadIdx.x; rtx_v < rtx_nv; rtx_v += blockDim.x) {
      const rtx_vec<S> rtx_x = rtx_load_vec(rtx_row + rtx_begin, rtx_v);
#pragma unroll
      for (unsigned int rtx_k = 0; rtx_k < 16 / sizeof(S); ++rtx_k) {
        rtx_acc = mean_combine<A>(rtx_acc, mean_map<A>(rtx_elem<S>::widen(rtx_x.v[rtx_k])));
      }
    }
    rtx_rest = rtx_begin + rtx_nv * rtx_w;
  }
  for (unsigned long long rtx_j = rtx_rest + threadIdx.x; rtx_j < rtx_end; rtx_j += blockDim.x) {
    rtx_acc = mean_combine<A>(rtx_acc, mean_map<A>(rtx_elem<S>::widen(rtx_row[rtx_j])));
  }
  rtx_acc = mean_block<A>(rtx_acc, rtx_warp);
  if (threadIdx.x == 0u) rtx_part[(unsigned long long)blockIdx.y * gridDim.x + blockIdx.x] = rtx_acc;
}

// Stage 2: block r combines the `parts` partial results of row r in order, then applies
// `finish` with the row length `n`.
template <typename S>
__device__ __forceinline__ void mean_final(const typename rtx_elem<S>::acc* rtx_part, S* rtx_out, unsigned long long parts, unsigned long long n) {
  typedef typename rtx_elem<S>::acc A;
  __shared__ A rtx_warp[32];
  const A* rtx_row = rtx_part + (unsigned long long)blockIdx.x * parts;
  A rtx_acc = mean_identity<A>();
  for (unsigned long long rtx_j = threadIdx.x; rtx_j < parts; rtx_j += blockDim.x) {
    rtx_acc = mean_combine<A>(rtx_acc, rtx_row[rtx_j]);
  }
  rtx_acc = mean_block<A>(rtx_acc, rtx_warp);
  if (threadIdx.x == 0u) rtx_out[blockIdx.x] = rtx_elem<S>::narrow(mean_finish<A>(rtx_acc, (A)n));
}

extern "C" __global__ void mean_f32(const float* x, float* rtx_out, unsigned long long outer, unsigned long long axis, unsigned long long inner) {
  RTX_ENTRY();
  mean_reduce<float>(x, rtx_out, outer, axis, inner);
}
extern "C" __global__ void mean_cols_f32(const float* x, float* rtx_out, unsigned long long outer, unsigned long long axis, unsigned long long inner) {
  RTX_ENTRY();
  mean_cols<float, false>(x, rtx_out, 0, outer, axis, inner, axis);
}
extern "C" __global__ void mean_rows_f32(const float* x, float* rtx_out, unsigned long long outer, unsigned long long axis, unsigned long long inner) {
  RTX_ENTRY();
  mean_rows<float>(x, rtx_out, outer, axis, inner);
}
extern "C" __global__ void mean_partial_f32(const float* x, float* rtx_part, unsigned long long n, unsigned long long chunk) {
  RTX_ENTRY();
  mean_partial<float>(x, rtx_part, n, chunk);
}
extern "C" __global__ void mean_final_f32(const float* rtx_part, float* rtx_out, unsigned long long parts, unsigned long long n) {
  RTX_ENTRY();
  mean_final<float>(rtx_part, rtx_out, parts, n);
}
extern "C" __global__ void mean_cols_partial_f32(const float* x, float* rtx_part, unsigned long long outer, unsigned long long axis, unsigned long long inner, unsigned long long chunk) {
  RTX_ENTRY();
  mean_cols<float, true>(x, 0, rtx_part, outer, axis, inner, chunk);
}
extern "C" __global__ void mean_cols_final_f32(const float* rtx_part, float* rtx_out, unsigned long long outer, unsigned long long parts, unsigned long long inner, unsigned long long n) {
  RTX_ENTRY();
  mean_cols_final<float>(rtx_part, rtx_out, outer, parts, inner, n);
}
extern "C" __global__ void mean_f64(const double* x, double* rtx_out, unsigned long long outer, unsigned long long axis, unsigned long long inner) {
  RTX_ENTRY();
  mean_reduce<double>(x, rtx_out, outer, axis, inner);
}
extern "C" __global__ void mean_cols_f64(const double* x, double* rtx_out, unsigned long long outer, unsigned long long axis, unsigned long long inner) {
  RTX_ENTRY();
  mean_cols<double, false>(x, rtx_out, 0, outer, axis, inner, axis);
}
extern "C" __global__ void mean_rows_f64(const double* x, double* rtx_out, unsigned long long outer, unsigned long long axis, unsigned long long inner) {
  RTX_ENTRY();
  mean_rows<double>(x, rtx_out, outer, axis, inner);
}
extern "C" __global__ void mean_partial_f64(const double* x, double* rtx_part, unsigned long long n, unsigned long long chunk) {
  RTX_ENTRY();
  mean_partial<double>(x, rtx_part, n, chunk);
}
extern "C" __global__ void mean_final_f64(const double* rtx_part, double* rtx_out, unsigned long long parts, unsigned long long n) {
  RTX_ENTRY();
  mean_final<double>(rtx_part, rtx_out, parts, n);
}
extern "C" __global__ void mean_cols_partial_f64(const double* x, double* rtx_part, unsigned long long outer, unsigned long long axis, unsigned long long inner, unsigned long long chunk) {
  RTX_ENTRY();
  mean_cols<double, true>(x, 0, rtx_part, outer, axis, inner, chunk);
}
extern "C" __global__ void mean_cols_final_f64(const double* rtx_part, double* rtx_out, unsigned long long outer, unsigned long long parts, unsigned long long inner, unsigned long long n) {
  RTX_ENTRY();
  mean_cols_final<double>(rtx_part, rtx_out, outer, parts, inner, n);
}
extern "C" __global__ void mean_f16(const rtx_f16* x, rtx_f16* rtx_out, unsigned long long outer, unsigned long long axis, unsigned long long inner) {
  RTX_ENTRY();
  mean_reduce<rtx_f16>(x, rtx_out, outer, axis, inner);
}
extern "C" __global__ void mean_cols_f16(const rtx_f16* x, rtx_f16* rtx_out, unsigned long long outer, unsigned long long axis, unsigned long long inner) {
  RTX_ENTRY();
  mean_cols<rtx_f16, false>(x, rtx_out, 0, outer, axis, inner, axis);
}
extern "C" __global__ void mean_rows_f16(const rtx_f16* x, rtx_f16* rtx_out, unsigned long long outer, unsigned long long axis, unsigned long long inner) {
  RTX_ENTRY();
  mean_rows<rtx_f16>(x, rtx_out, outer, axis, inner);
}
extern "C" __global__ void mean_partial_f16(const rtx_f16* x, float* rtx_part, unsigned long long n, unsigned long long chunk) {
  RTX_ENTRY();
  mean_partial<rtx_f16>(x, rtx_part, n, chunk);
}
extern "C" __global__ void mean_final_f16(const float* rtx_part, rtx_f16* rtx_out, unsigned long long parts, unsigned long long n) {
  RTX_ENTRY();
  mean_final<rtx_f16>(rtx_part, rtx_out, parts, n);
}
extern "C" __global__ void mean_cols_partial_f16(const rtx_f16* x, float* rtx_part, unsigned long long outer, unsigned long long axis, unsigned long long inner, unsigned long long chunk) {
  RTX_ENTRY();
  mean_cols<rtx_f16, true>(x, 0, rtx_part, outer, axis, inner, chunk);
}
extern "C" __global__ void mean_cols_final_f16(const float* rtx_part, rtx_f16* rtx_out, unsigned long long outer, unsigned long long parts, unsigned long long inner, unsigned long long n) {
  RTX_ENTRY();
  mean_cols_final<rtx_f16>(rtx_part, rtx_out, outer, parts, inner, n);
}
extern "C" __global__ void mean_bf16(const rtx_bf16* x, rtx_bf16* rtx_out, unsigned long long outer, unsigned long long axis, unsigned long long inner) {
  RTX_ENTRY();
  mean_reduce<rtx_bf16>(x, rtx_out, outer, axis, inner);
}
extern "C" __global__ void mean_cols_bf16(const rtx_bf16* x, rtx_bf16* rtx_out, unsigned long long outer, unsigned long long axis, unsigned long long inner) {
  RTX_ENTRY();
  mean_cols<rtx_bf16, false>(x, rtx_out, 0, outer, axis, inner, axis);
}
extern "C" __global__ void mean_rows_bf16(const rtx_bf16* x, rtx_bf16* rtx_out, unsigned long long outer, unsigned long long axis, unsigned long long inner) {
  RTX_ENTRY();
  mean_rows<rtx_bf16>(x, rtx_out, outer, axis, inner);
}
extern "C" __global__ void mean_partial_bf16(const rtx_bf16* x, float* rtx_part, unsigned long long n, unsigned long long chunk) {
  RTX_ENTRY();
  mean_partial<rtx_bf16>(x, rtx_part, n, chunk);
}
extern "C" __global__ void mean_final_bf16(const float* rtx_part, rtx_bf16* rtx_out, unsigned long long parts, unsigned long long n) {
  RTX_ENTRY();
  mean_final<rtx_bf16>(rtx_part, rtx_out, parts, n);
}
extern "C" __global__ void mean_cols_partial_bf16(const rtx_bf16* x, float* rtx_part, unsigned long long outer, unsigned long long axis, unsigned long long inner, unsigned long long chunk) {
  RTX_ENTRY();
  mean_cols<rtx_bf16, true>(x, 0, rtx_part, outer, axis, inner, chunk);
}
extern "C" __global__ void mean_cols_final_bf16(const float* rtx_part, rtx_bf16* rtx_out, unsigned long long outer, unsigned long long parts, unsigned long long inner, unsigned long long n) {
  RTX_ENTRY();
  mean_cols_final<rtx_bf16>(rtx_part, rtx_out, outer, parts, inner, n);
}
