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
// rtx kernel prelude, second part: integer and bool element types, the conversions of
// rtx_kernels::Element (bit for bit what the CPU backend computes), and wrapping arithmetic.
// Included after prelude.cu by kernels over `T: Num` or `T: Element`, cast kernels and kernels
// that store f64 or i64 values into `T` buffers.
#ifndef RTX_KERNEL_PRELUDE_NUM
#define RTX_KERNEL_PRELUDE_NUM
// Integer and bool element types compute in their own type.
template <> struct rtx_elem<int> {
  typedef int acc;
  static __device__ __forceinline__ int widen(int x) { return x; }
  static __device__ __forceinline__ int narrow(int x) { return x; }
};
template <> struct rtx_elem<long long> {
  typedef long long acc;
  static __device__ __forceinline__ long long widen(long long x) { return x; }
  static __device__ __forceinline__ long long narrow(long long x) { return x; }
};
template <> struct rtx_elem<unsigned char> {
  typedef unsigned char acc;
  static __device__ __forceinline__ unsigned char widen(unsigned char x) { return x; }
  static __device__ __forceinline__ unsigned char narrow(unsigned char x) { return x; }
};
template <> struct rtx_elem<bool> {
  typedef bool acc;
  static __device__ __forceinline__ bool widen(bool x) { return x; }
  static __device__ __forceinline__ bool narrow(bool x) { return x; }
};

// f64 to bf16 as the `half` crate's bf16::from_f64 does it: the low 32 bits of the mantissa
// are dropped first, then the rest rounds to nearest (ties to even).
__device__ __forceinline__ unsigned short rtx_f64_to_bf16(double v) {
  rtx_f64_bits b;
  b.f = v;
  const unsigned int x = (unsigned int)(b.u >> 32);
  const unsigned int sign = x & 0x80000000u;
  const unsigned int exp = x & 0x7ff00000u;
  const unsigned int man = x & 0x000fffffu;
  if (exp == 0x7ff00000u) {
    const unsigned int nan_bit = (man == 0u && (unsigned int)b.u == 0u) ? 0u : 0x40u;
    return (unsigned short)((sign >> 16) | 0x7f80u | nan_bit | (man >> 13));
  }
  const unsigned int half_sign = sign >> 16;
  const int half_exp = (int)(exp >> 20) - 1023 + 127;
  if (half_exp >= 0xff) return (unsigned short)(half_sign | 0x7f80u);
  if (half_exp <= 0) {
    if (7 - half_exp > 21) return (unsigned short)half_sign;
    const unsigned int m = man | 0x00100000u;
    unsigned int half_man = m >> (14 - half_exp);
    const unsigned int round_bit = 1u << (13 - half_exp);
    if ((m & round_bit) != 0u && (m & (3u * round_bit - 1u)) != 0u) half_man += 1u;
    return (unsigned short)(half_sign | half_man);
  }
  const unsigned int bits = half_sign | ((unsigned int)half_exp << 7) | (man >> 13);
  const unsigned int round_bit = 0x00001000u;
  if ((man & round_bit) != 0u && (man & (3u * round_bit - 1u)) != 0u) return (unsigned short)(bits + 1u);
  return (unsigned short)bits;
}

// Element::from_f64: Rust's `as` (round to nearest; integers saturate and NaN becomes 0); f16
// rounds through f32, as the `half` crate does on x86 CPUs with F16C (all since 2013).
template <typename S> __device__ __forceinline__ S rtx_from_f64(double v);
template <> __device__ __forceinline__ float rtx_from_f64<float>(double v) { return (float)v; }
template <> __device__ __forceinline__ double rtx_from_f64<double>(double v) { return v; }
template <> __device__ __forceinline__ rtx_f16 rtx_from_f64<rtx_f16>(double v) {
  rtx_f16 r;
  r.bits = rtx_f32_to_f16((float)v);
  return r;
}
template <> __device__ __forceinline__ rtx_bf16 rtx_from_f64<rtx_bf16>(double v) {
  rtx_bf16 r;
  r.bits = rtx_f64_to_bf16(v);
  return r;
}
template <> __device__ __forceinline__ int rtx_from_f64<int>(double v) {
  if (v != v) return 0;
  if (v <= -2147483648.0) return (-2147483647 - 1);
  if (v >= 2147483647.0) return 2147483647;
  return (int)v;
}
template <> __device__ __forceinline__ long long rtx_from_f64<long long>(double v) {
  if (v != v) return 0ll;
  if (v <= -9223372036854775808.0) return (-9223372036854775807ll - 1ll);
  if (v >= 9223372036854775808.0) return 9223372036854775807ll;
  return (long long)v;
}
template <> __device__ __forceinline__ unsigned char rtx_from_f64<unsigned char>(double v) {
  if (v != v || v <= 0.0) return (unsigned char)0;
  if (v >= 255.0) return (unsigned char)255;
  return (unsigned char)v;
}
template <> __device__ __forceinline__ bool rtx_from_f64<bool>(double v) { return v != 0.0; }

// Element::from_i64: integers wrap, floats round to nearest (f16 and bf16 through f64).
template <typename S> __device__ __forceinline__ S rtx_from_i64(long long v);
template <> __device__ __forceinline__ float rtx_from_i64<float>(long long v) { return (float)v; }
template <> __device__ __forceinline__ double rtx_from_i64<double>(long long v) { return (double)v; }
template <> __device__ __forceinline__ rtx_f16 rtx_from_i64<rtx_f16>(long long v) { return rtx_from_f64<rtx_f16>((double)v); }
template <> __device__ __forceinline__ rtx_bf16 rtx_from_i64<rtx_bf16>(long long v) { return rtx_from_f64<rtx_bf16>((double)v); }
template <> __device__ __forceinline__ int rtx_from_i64<int>(long long v) { return (int)(unsigned int)(unsigned long long)v; }
template <> __device__ __forceinline__ long long rtx_from_i64<long long>(long long v) { return v; }
template <> __device__ __forceinline__ unsigned char rtx_from_i64<unsigned char>(long long v) { return (unsigned char)(unsigned long long)v; }
template <> __device__ __forceinline__ bool rtx_from_i64<bool>(long long v) { return v != 0ll; }

// Element::to_f64 (exact but for i64 beyond 2^53) and Element::to_i64 (floats truncate and
// saturate, NaN becomes 0).
__device__ __forceinline__ double rtx_to_f64(float x) { return (double)x; }
__device__ __forceinline__ double rtx_to_f64(double x) { return x; }
__device__ __forceinline__ double rtx_to_f64(rtx_f16 x) { return (double)rtx_f16_to_f32(x.bits); }
__device__ __forceinline__ double rtx_to_f64(rtx_bf16 x) { return (double)rtx_bf16_to_f32(x.bits); }
__device__ __forceinline__ double rtx_to_f64(int x) { return (double)x; }
__device__ __forceinline__ double rtx_to_f64(long long x) { return (double)x; }
__device__ __forceinline__ double rtx_to_f64(unsigned char x) { return (double)x; }
__device__ __forceinline__ double rtx_to_f64(bool x) { return x ? 1.0 : 0.0; }
template <typename S> __device__ __forceinline__ long long rtx_to_i64(S x) { return rtx_from_f64<long long>(rtx_to_f64(x)); }
__device__ __forceinline__ long long rtx_to_i64(int x) { return (long long)x; }
__device__ __forceinline__ long long rtx_to_i64(long long x) { return x; }
__device__ __forceinline__ long long rtx_to_i64(unsigned char x) { return (long long)x; }
__device__ __forceinline__ long long rtx_to_i64(bool x) { return x ? 1ll : 0ll; }

// Element::cast: between integer (or bool) types through i64, exactly; otherwise through f64.
template <typename S> struct rtx_is_int { static const bool value = false; };
template <> struct rtx_is_int<int> { static const bool value = true; };
template <> struct rtx_is_int<long long> { static const bool value = true; };
template <> struct rtx_is_int<unsigned char> { static const bool value = true; };
template <> struct rtx_is_int<bool> { static const bool value = true; };
template <typename S, typename D> __device__ __forceinline__ D rtx_cast(S x) {
  if (rtx_is_int<S>::value && rtx_is_int<D>::value) return rtx_from_i64<D>(rtx_to_i64(x));
  return rtx_from_f64<D>(rtx_to_f64(x));
}

// Arithmetic of `Num` on compute types: floats as they are; integers wrap (through their
// unsigned twin, as signed overflow is undefined in C++) and divide by zero (or MIN by -1)
// into 0.
__device__ __forceinline__ float rtx_add(float a, float b) { return a + b; }
__device__ __forceinline__ double rtx_add(double a, double b) { return a + b; }
__device__ __forceinline__ int rtx_add(int a, int b) { return (int)((unsigned int)a + (unsigned int)b); }
__device__ __forceinline__ long long rtx_add(long long a, long long b) { return (long long)((unsigned long long)a + (unsigned long long)b); }
__device__ __forceinline__ unsigned char rtx_add(unsigned char a, unsigned char b) { return (unsigned char)((unsigned int)a + (unsigned int)b); }
__device__ __forceinline__ float rtx_sub(float a, float b) { return a - b; }
__device__ __forceinline__ double rtx_sub(double a, double b) { return a - b; }
__device__ __forceinline__ int rtx_sub(int a, int b) { return (int)((unsigned int)a - (unsigned int)b); }
__device__ __forceinline__ long long rtx_sub(long long a, long long b) { return (long long)((unsigned long long)a - (unsigned long long)b); }
__device__ __forceinline__ unsigned char rtx_sub(unsigned char a, unsigned char b) { return (unsigned char)((unsigned int)a - (unsigned int)b); }
__device__ __forceinline__ float rtx_mul(float a, float b) { return a * b; }
__device__ __forceinline__ double rtx_mul(double a, double b) { return a * b; }
__device__ __forceinline__ int rtx_mul(int a, int b) { return (int)((unsigned int)a * (unsigned int)b); }
__device__ __forceinline__ long long rtx_mul(long long a, long long b) { return (long long)((unsigned long long)a * (unsigned long long)b); }
__device__ __forceinline__ unsigned char rtx_mul(unsigned char a, unsigned char b) { return (unsigned char)((unsigned int)a * (unsigned int)b); }
__device__ __forceinline__ float rtx_div(float a, float b) { return a / b; }
__device__ __forceinline__ double rtx_div(double a, double b) { return a / b; }
__device__ __forceinline__ int rtx_div(int a, int b) {
  return (b == 0 || (b == -1 && a == (-2147483647 - 1))) ? 0 : a / b;
}
__device__ __forceinline__ long long rtx_div(long long a, long long b) {
  return (b == 0ll || (b == -1ll && a == (-9223372036854775807ll - 1ll))) ? 0ll : a / b;
}
__device__ __forceinline__ unsigned char rtx_div(unsigned char a, unsigned char b) {
  return b == 0 ? (unsigned char)0 : (unsigned char)(a / b);
}
__device__ __forceinline__ float rtx_neg(float a) { return -a; }
__device__ __forceinline__ double rtx_neg(double a) { return -a; }
__device__ __forceinline__ int rtx_neg(int a) { return (int)(0u - (unsigned int)a); }
__device__ __forceinline__ long long rtx_neg(long long a) { return (long long)(0ull - (unsigned long long)a); }
__device__ __forceinline__ unsigned char rtx_neg(unsigned char a) { return (unsigned char)(0u - (unsigned int)a); }
__device__ __forceinline__ int rtx_abs(int a) { return a < 0 ? rtx_neg(a) : a; }
__device__ __forceinline__ long long rtx_abs(long long a) { return a < 0ll ? rtx_neg(a) : a; }
__device__ __forceinline__ unsigned char rtx_abs(unsigned char a) { return a; }

// The identities of max and min (`T::LOWEST`, `T::HIGHEST`).
template <typename A> __device__ __forceinline__ A rtx_lowest();
template <> __device__ __forceinline__ float rtx_lowest<float>() { return -rtx_inf<float>(); }
template <> __device__ __forceinline__ double rtx_lowest<double>() { return -rtx_inf<double>(); }
template <> __device__ __forceinline__ int rtx_lowest<int>() { return (-2147483647 - 1); }
template <> __device__ __forceinline__ long long rtx_lowest<long long>() { return (-9223372036854775807ll - 1ll); }
template <> __device__ __forceinline__ unsigned char rtx_lowest<unsigned char>() { return (unsigned char)0; }
template <> __device__ __forceinline__ bool rtx_lowest<bool>() { return false; }
template <typename A> __device__ __forceinline__ A rtx_highest();
template <> __device__ __forceinline__ float rtx_highest<float>() { return rtx_inf<float>(); }
template <> __device__ __forceinline__ double rtx_highest<double>() { return rtx_inf<double>(); }
template <> __device__ __forceinline__ int rtx_highest<int>() { return 2147483647; }
template <> __device__ __forceinline__ long long rtx_highest<long long>() { return 9223372036854775807ll; }
template <> __device__ __forceinline__ unsigned char rtx_highest<unsigned char>() { return (unsigned char)255; }
template <> __device__ __forceinline__ bool rtx_highest<bool>() { return true; }

// Warp shuffles of the one-byte compute types, through int.
__device__ __forceinline__ unsigned char rtx_shfl_down(unsigned char v, unsigned int o) { return (unsigned char)rtx_shfl_down((int)v, o); }
__device__ __forceinline__ bool rtx_shfl_down(bool v, unsigned int o) { return rtx_shfl_down((int)v, o) != 0; }
__device__ __forceinline__ unsigned char rtx_shfl_xor(unsigned char v, unsigned int m) { return (unsigned char)rtx_shfl_xor((int)v, m); }
__device__ __forceinline__ bool rtx_shfl_xor(bool v, unsigned int m) { return rtx_shfl_xor((int)v, m) != 0; }
#endif // RTX_KERNEL_PRELUDE_NUM

// `concat_rows_into`: SIMT kernel generated by #[kernel] from Rust.
template <typename S, typename A>
__device__ __forceinline__ void concat_rows_into_impl(const S* part, rtx_strides ps, S* out, rtx_shape shape, unsigned long long axis, unsigned long long start, unsigned long long total, unsigned long long n) {
  unsigned long long rank = ((unsigned long long)(shape).rank);
  unsigned long long last = (rank - 1ull);
  unsigned int inner = ((unsigned int)(((shape).dims[last])));
  unsigned long long istride = ((unsigned long long)(ps).strides[last]);
  unsigned long long row_stride = ((axis == last) ? total : ((shape).dims[last]));
  unsigned long long slot = ((axis == last) ? start : 0ull);
  unsigned int thread = ((unsigned int)(((((unsigned long long)blockIdx.x) * ((unsigned long long)blockDim.x)) + ((unsigned long long)threadIdx.x))));
  unsigned int threads = ((unsigned int)((((unsigned long long)blockDim.x) * ((unsigned long long)gridDim.x))));
  if ((inner >= 32u)) {
    unsigned int w = rtx_min(((inner + 31u) / 32u), 8u);
    unsigned int seg = (32u * w);
    unsigned int segs = (((inner + seg) - 1u) / seg);
    unsigned int units = ((((unsigned int)(n)) / inner) * segs);
    unsigned int lane = ((unsigned int)(((unsigned long long)(rtx_linear_tid() & 31u))));
    unsigned int q = (thread / 32u);
    while ((q < units)) {
      unsigned int row = (q / segs);
      unsigned int c0 = (((q - (row * segs)) * seg) + lane);
      unsigned int rem = row;
      unsigned long long src = ((unsigned long long)(ps).offset);
      unsigned long long dst = slot;
      unsigned long long stride = row_stride;
      {
        const unsigned long long rtx_t0 = rank;
        for (unsigned long long j = 1ull; j < rtx_t0; j += 1) {
          unsigned long long d = (last - j);
          unsigned int dim = ((unsigned int)(((shape).dims[d])));
          unsigned int c = (rem % dim);
          rem /= dim;
          src += (((unsigned long long)(c)) * ((unsigned long long)(ps).strides[d]));
          if ((d == axis)) {
            dst += ((start + ((unsigned long long)(c))) * stride);
            stride *= total;
          } else {
            dst += (((unsigned long long)(c)) * stride);
            stride *= ((unsigned long long)(dim));
          }
        }
      }
      #pragma unroll
      for (unsigned int j_1 = 0u; j_1 < 8u; j_1 += 1) {
        unsigned int c_1 = (c0 + (32u * j_1));
        if (((j_1 < w) && (c_1 < inner))) {
          const unsigned long long rtx_t1 = (dst + ((unsigned long long)(c_1)));
          out[rtx_t1] = rtx_elem<S>::narrow(rtx_elem<S>::widen(part[(src + (((unsigned long long)(c_1)) * istride))]));
        }
      }
      q += (threads / 32u);
    }
  } else {
    unsigned int p = thread;
    while ((p < ((unsigned int)(n)))) {
      unsigned int rem_1 = p;
      unsigned long long src_1 = ((unsigned long long)(ps).offset);
      unsigned long long dst_1 = 0ull;
      unsigned long long stride_1 = 1ull;
      {
        const unsigned long long rtx_t2 = rank;
        for (unsigned long long j_2 = 0ull; j_2 < rtx_t2; j_2 += 1) {
          unsigned long long d_1 = (last - j_2);
          unsigned int dim_1 = ((unsigned int)(((shape).dims[d_1])));
          unsigned int c_2 = (rem_1 % dim_1);
          rem_1 /= dim_1;
          src_1 += (((unsigned long long)(c_2)) * ((unsigned long long)(ps).strides[d_1]));
          if ((d_1 == axis)) {
            dst_1 += ((start + ((unsigned long long)(c_2))) * stride_1);
            stride_1 *= total;
          } else {
            dst_1 += (((unsigned long long)(c_2)) * stride_1);
            stride_1 *= ((unsigned long long)(dim_1));
          }
        }
      }
      const unsigned long long rtx_t3 = dst_1;
      out[rtx_t3] = rtx_elem<S>::narrow(rtx_elem<S>::widen(part[src_1]));
      p += threads;
    }
  }
}

extern "C" __global__ void concat_rows_into_f32(const float* part, rtx_strides ps, float* out, rtx_shape shape, unsigned long long axis, unsigned long long start, unsigned long long total, unsigned long long n) {
  RTX_ENTRY();
  concat_rows_into_impl<float, float>(part, ps, out, shape, axis, start, total, n);
}
extern "C" __global__ void concat_rows_into_f64(const double* part, rtx_strides ps, double* out, rtx_shape shape, unsigned long long axis, unsigned long long start, unsigned long long total, unsigned long long n) {
  RTX_ENTRY();
  concat_rows_into_impl<double, double>(part, ps, out, shape, axis, start, total, n);
}
extern "C" __global__ void concat_rows_into_f16(const rtx_f16* part, rtx_strides ps, rtx_f16* out, rtx_shape shape, unsigned long long axis, unsigned long long start, unsigned long long total, unsigned long long n) {
  RTX_ENTRY();
  concat_rows_into_impl<rtx_f16, float>(part, ps, out, shape, axis, start, total, n);
}
extern "C" __global__ void concat_rows_into_bf16(const rtx_bf16* part, rtx_strides ps, rtx_bf16* out, rtx_shape shape, unsigned long long axis, unsigned long long start, unsigned long long total, unsigned long long n) {
  RTX_ENTRY();
  concat_rows_into_impl<rtx_bf16, float>(part, ps, out, shape, axis, start, total, n);
}
extern "C" __global__ void concat_rows_into_i32(const int* part, rtx_strides ps, int* out, rtx_shape shape, unsigned long long axis, unsigned long long start, unsigned long long total, unsigned long long n) {
  RTX_ENTRY();
  concat_rows_into_impl<int, int>(part, ps, out, shape, axis, start, total, n);
}
extern "C" __global__ void concat_rows_into_i64(const long long* part, rtx_strides ps, long long* out, rtx_shape shape, unsigned long long axis, unsigned long long start, unsigned long long total, unsigned long long n) {
  RTX_ENTRY();
  concat_rows_into_impl<long long, long long>(part, ps, out, shape, axis, start, total, n);
}
extern "C" __global__ void concat_rows_into_u8(const unsigned char* part, rtx_strides ps, unsigned char* out, rtx_shape shape, unsigned long long axis, unsigned long long start, unsigned long long total, unsigned long long n) {
  RTX_ENTRY();
  concat_rows_into_impl<unsigned char, unsigned char>(part, ps, out, shape, axis, start, total, n);
}
extern "C" __global__ void concat_rows_into_bool(const bool* part, rtx_strides ps, bool* out, rtx_shape shape, unsigned long long axis, unsigned long long start, unsigned long long total, unsigned long long n) {
  RTX_ENTRY();
  concat_rows_into_impl<bool, bool>(part, ps, out, shape, axis, start, total, n);
}
