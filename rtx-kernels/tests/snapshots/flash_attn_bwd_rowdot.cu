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

// `flash_attn_bwd_rowdot`: SIMT kernel generated by #[kernel] from Rust.
template <typename S, typename A>
__device__ __forceinline__ void flash_attn_bwd_rowdot_impl(const S* o, const S* dout, A* delta, rtx_strides os, unsigned long long batch, unsigned long long heads, unsigned long long t_q, unsigned long long d) {
  unsigned long long lane = ((unsigned long long)(rtx_linear_tid() & 31u));
  unsigned long long i0 = (4ull * ((((unsigned long long)blockIdx.x) * (((unsigned long long)blockDim.x) / 32ull)) + (((unsigned long long)threadIdx.x) / 32ull)));
  unsigned long long hh = ((unsigned long long)blockIdx.y);
  unsigned long long n = ((unsigned long long)blockIdx.z);
  if ((((n >= batch) || (hh >= heads)) || (i0 >= t_q))) {
    return;
  }
  unsigned long long head = ((n * ((unsigned long long)(os).strides[0ull])) + (hh * ((unsigned long long)(os).strides[1ull])));
  const A rtx_t0 = A(0.0);
  A acc[4];
  #pragma unroll
  for (int rtx_t1 = 0; rtx_t1 < 4; ++rtx_t1) acc[rtx_t1] = rtx_t0;
  #pragma unroll
  for (unsigned long long r = 0ull; r < 4ull; r += 1) {
    if (((i0 + r) < t_q)) {
      unsigned long long at = (head + ((i0 + r) * ((unsigned long long)(os).strides[2ull])));
      unsigned long long c = lane;
      while ((c < d)) {
        acc[r] += (rtx_elem<S>::widen(o[(at + c)]) * rtx_elem<S>::widen(dout[(at + c)]));
        c += 32ull;
      }
    }
  }
  #pragma unroll
  for (unsigned long long r_1 = 0ull; r_1 < 4ull; r_1 += 1) {
    A a = acc[r_1];
    a += rtx_shfl_xor(a, 16u);
    a += rtx_shfl_xor(a, 8u);
    a += rtx_shfl_xor(a, 4u);
    a += rtx_shfl_xor(a, 2u);
    a += rtx_shfl_xor(a, 1u);
    if (((lane == 0ull) && ((i0 + r_1) < t_q))) {
      delta[(((((n * heads) + hh) * t_q) + i0) + r_1)] = a;
    }
  }
}

extern "C" __global__ void flash_attn_bwd_rowdot_f32(const float* o, const float* dout, float* delta, rtx_strides os, unsigned long long batch, unsigned long long heads, unsigned long long t_q, unsigned long long d) {
  RTX_ENTRY();
  flash_attn_bwd_rowdot_impl<float, float>(o, dout, delta, os, batch, heads, t_q, d);
}
extern "C" __global__ void flash_attn_bwd_rowdot_f32__d64(const float* o, const float* dout, float* delta, rtx_strides os, unsigned long long batch, unsigned long long heads, unsigned long long t_q, unsigned long long d) {
  RTX_ENTRY();
  flash_attn_bwd_rowdot_impl<float, float>(o, dout, delta, os, batch, heads, t_q, 64ull);
}
extern "C" __global__ void flash_attn_bwd_rowdot_f32__d128(const float* o, const float* dout, float* delta, rtx_strides os, unsigned long long batch, unsigned long long heads, unsigned long long t_q, unsigned long long d) {
  RTX_ENTRY();
  flash_attn_bwd_rowdot_impl<float, float>(o, dout, delta, os, batch, heads, t_q, 128ull);
}
extern "C" __global__ void flash_attn_bwd_rowdot_f64(const double* o, const double* dout, double* delta, rtx_strides os, unsigned long long batch, unsigned long long heads, unsigned long long t_q, unsigned long long d) {
  RTX_ENTRY();
  flash_attn_bwd_rowdot_impl<double, double>(o, dout, delta, os, batch, heads, t_q, d);
}
extern "C" __global__ void flash_attn_bwd_rowdot_f64__d64(const double* o, const double* dout, double* delta, rtx_strides os, unsigned long long batch, unsigned long long heads, unsigned long long t_q, unsigned long long d) {
  RTX_ENTRY();
  flash_attn_bwd_rowdot_impl<double, double>(o, dout, delta, os, batch, heads, t_q, 64ull);
}
extern "C" __global__ void flash_attn_bwd_rowdot_f64__d128(const double* o, const double* dout, double* delta, rtx_strides os, unsigned long long batch, unsigned long long heads, unsigned long long t_q, unsigned long long d) {
  RTX_ENTRY();
  flash_attn_bwd_rowdot_impl<double, double>(o, dout, delta, os, batch, heads, t_q, 128ull);
}
extern "C" __global__ void flash_attn_bwd_rowdot_f16(const rtx_f16* o, const rtx_f16* dout, float* delta, rtx_strides os, unsigned long long batch, unsigned long long heads, unsigned long long t_q, unsigned long long d) {
  RTX_ENTRY();
  flash_attn_bwd_rowdot_impl<rtx_f16, float>(o, dout, delta, os, batch, heads, t_q, d);
}
extern "C" __global__ void flash_attn_bwd_rowdot_f16__d64(const rtx_f16* o, const rtx_f16* dout, float* delta, rtx_strides os, unsigned long long batch, unsigned long long heads, unsigned long long t_q, unsigned long long d) {
  RTX_ENTRY();
  flash_attn_bwd_rowdot_impl<rtx_f16, float>(o, dout, delta, os, batch, heads, t_q, 64ull);
}
extern "C" __global__ void flash_attn_bwd_rowdot_f16__d128(const rtx_f16* o, const rtx_f16* dout, float* delta, rtx_strides os, unsigned long long batch, unsigned long long heads, unsigned long long t_q, unsigned long long d) {
  RTX_ENTRY();
  flash_attn_bwd_rowdot_impl<rtx_f16, float>(o, dout, delta, os, batch, heads, t_q, 128ull);
}
extern "C" __global__ void flash_attn_bwd_rowdot_bf16(const rtx_bf16* o, const rtx_bf16* dout, float* delta, rtx_strides os, unsigned long long batch, unsigned long long heads, unsigned long long t_q, unsigned long long d) {
  RTX_ENTRY();
  flash_attn_bwd_rowdot_impl<rtx_bf16, float>(o, dout, delta, os, batch, heads, t_q, d);
}
extern "C" __global__ void flash_attn_bwd_rowdot_bf16__d64(const rtx_bf16* o, const rtx_bf16* dout, float* delta, rtx_strides os, unsigned long long batch, unsigned long long heads, unsigned long long t_q, unsigned long long d) {
  RTX_ENTRY();
  flash_attn_bwd_rowdot_impl<rtx_bf16, float>(o, dout, delta, os, batch, heads, t_q, 64ull);
}
extern "C" __global__ void flash_attn_bwd_rowdot_bf16__d128(const rtx_bf16* o, const rtx_bf16* dout, float* delta, rtx_strides os, unsigned long long batch, unsigned long long heads, unsigned long long t_q, unsigned long long d) {
  RTX_ENTRY();
  flash_attn_bwd_rowdot_impl<rtx_bf16, float>(o, dout, delta, os, batch, heads, t_q, 128ull);
}
