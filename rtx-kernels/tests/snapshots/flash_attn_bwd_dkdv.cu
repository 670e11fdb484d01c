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
// rtx tensor-core prelude: the inline PTX behind #[kernel]'s tensor-core intrinsics (sm_80 and
// newer), with no header. Fragment layouts are PTX's (rtx_kernels::kernel::tensor_core
// documents them and emulates each instruction on the CPU).
#ifndef RTX_KERNEL_PRELUDE_MMA
#define RTX_KERNEL_PRELUDE_MMA
// The shared-window address of a generic pointer into shared memory, as ldmatrix and cp.async
// take it (32 bits suffice: the window is smaller than 4 GiB).
__device__ __forceinline__ unsigned int rtx_smem_addr(const void* p) {
  unsigned int a;
  asm("{ .reg .u64 rtx_s; cvta.to.shared.u64 rtx_s, %1; cvt.u32.u64 %0, rtx_s; }" : "=r"(a) : "l"(p));
  return a;
}
// The global-window address of a generic pointer into global memory.
__device__ __forceinline__ unsigned long long rtx_global_addr(const void* p) {
  unsigned long long g;
  asm("cvta.to.global.u64 %0, %1;" : "=l"(g) : "l"(p));
  return g;
}
// Callers pass a tile's address as rtx_smem_addr(tile) + 4 * word, and a source's as
// rtx_global_addr(src) plus the byte offset, so the conversions (opaque to the compiler, as
// inline PTX) are computed once per array rather than once per instruction.
// cp.async of 16 bytes (.cg: cached in L2 only, the tile goes to shared memory anyway): n
// elements of src from index on (at most 16 bytes' worth), the rest of the 16 bytes zeroed.
// With n = 0 nothing is read, and the address given is src itself, in bounds.
template <typename S>
__device__ __forceinline__ void rtx_cp_async16(unsigned int dst, unsigned long long src, unsigned long long index, unsigned long long n) {
  const unsigned long long most = 16ull / sizeof(S);
  const unsigned int bytes = (unsigned int)((n < most ? n : most) * sizeof(S));
  const unsigned long long from = bytes != 0u ? src + index * sizeof(S) : src;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(from), "r"(bytes) : "memory");
}
__device__ __forceinline__ void rtx_cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// PTX takes the count of groups left pending as an immediate.
template <int N> __device__ __forceinline__ void rtx_cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
// ldmatrix: each lane gives one 16-byte row (lanes 8m..8m+7 the rows of matrix m) and receives
// one 32-bit word of each matrix.
__device__ __forceinline__ void rtx_ldmatrix_x1(unsigned int& r0, unsigned int row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n" : "=r"(r0) : "r"(row));
}
__device__ __forceinline__ void rtx_ldmatrix_x2(unsigned int& r0, unsigned int& r1, unsigned int row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n" : "=r"(r0), "=r"(r1) : "r"(row));
}
__device__ __forceinline__ void rtx_ldmatrix_x4(unsigned int& r0, unsigned int& r1, unsigned int& r2, unsigned int& r3, unsigned int row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(row));
}
__device__ __forceinline__ void rtx_ldmatrix_x1_trans(unsigned int& r0, unsigned int row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\n" : "=r"(r0) : "r"(row));
}
__device__ __forceinline__ void rtx_ldmatrix_x2_trans(unsigned int& r0, unsigned int& r1, unsigned int row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n" : "=r"(r0), "=r"(r1) : "r"(row));
}
__device__ __forceinline__ void rtx_ldmatrix_x4_trans(unsigned int& r0, unsigned int& r1, unsigned int& r2, unsigned int& r3, unsigned int row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(row));
}
// D = A B + C on a 16 x 8 x 16 tile, in place on the accumulator (D is C), f32 accumulation;
// the element type of A and B is the storage type S.
template <typename S> struct rtx_mma;
template <> struct rtx_mma<rtx_bf16> {
  static __device__ __forceinline__ void m16n8k16(float& d0, float& d1, float& d2, float& d3, unsigned int a0, unsigned int a1,
                                                  unsigned int a2, unsigned int a3, unsigned int b0, unsigned int b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  }
};
template <> struct rtx_mma<rtx_f16> {
  static __device__ __forceinline__ void m16n8k16(float& d0, float& d1, float& d2, float& d3, unsigned int a0, unsigned int a1,
                                                  unsigned int a2, unsigned int a3, unsigned int b0, unsigned int b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  }
};
// Two compute-type values rounded to S and packed into one word, lo in the low half: one cvt
// of the pair (a NaN becomes the canonical NaN here: packed words only feed mma operands).
template <typename S> __device__ __forceinline__ unsigned int rtx_pack2(float lo, float hi);
template <> __device__ __forceinline__ unsigned int rtx_pack2<rtx_bf16>(float lo, float hi) {
  unsigned int r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
template <> __device__ __forceinline__ unsigned int rtx_pack2<rtx_f16>(float lo, float hi) {
  unsigned int r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
// store2: o[0] = lo and o[1] = hi as one 32-bit store (o is 4-byte aligned: an even index).
template <typename S> __device__ __forceinline__ void rtx_store2(S* o, float lo, float hi) {
  *reinterpret_cast<unsigned int*>(o) = rtx_pack2<S>(lo, hi);
}
// Hopper's warpgroup products (sm_90a). A tile operand is K-major in the 128-byte swizzle:
// rows of 64 16-bit elements (128 bytes), 16-byte chunk c of row r at chunk c ^ (r % 8), 8-row
// groups 1024 bytes apart, the tile on a 1024-byte boundary (the hardware takes the swizzle
// from the address bits). Its descriptor: the start address and the group stride (1024
// bytes) in 16-byte units, the leading offset unused (1), swizzle mode 1 (128 bytes).
__device__ __forceinline__ unsigned long long rtx_wgmma_desc(unsigned int addr) {
  return (unsigned long long)((addr & 0x3FFFFu) >> 4) | (1ull << 16) | (64ull << 32) | (1ull << 62);
}
// The descriptor of an N-major (MN-major) tile in the 128-byte swizzle: K rows of 64-element
// panels, 8-row groups 1024 bytes apart (the stride byte offset), panels `panel` bytes apart
// (the leading byte offset); the instruction's trans-b bit says the tile is N-major.
__device__ __forceinline__ unsigned long long rtx_wgmma_desc_mn(unsigned int addr, unsigned int panel) {
  return (unsigned long long)((addr & 0x3FFFFu) >> 4) | ((unsigned long long)((panel >> 4) & 0x3FFFu) << 16) | (64ull << 32) | (1ull << 62);
}
// Whether the storage type S is bf16 (else f16): the instruction names the type in its text.
template <typename S> struct rtx_is_bf16 { static const bool value = false; };
template <> struct rtx_is_bf16<rtx_bf16> { static const bool value = true; };
__device__ __forceinline__ void rtx_wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void rtx_wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
// Waits until at most N groups are pending, then passes every accumulator register through an
// empty asm, so no read of the accumulator is moved above the wait.
template <int N, typename A, int L> __device__ __forceinline__ void rtx_wgmma_wait(A (&acc)[L]) {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#pragma unroll
  for (int i = 0; i < L; ++i) asm volatile("" : "+f"(acc[i])::"memory");
}
// Makes this thread's earlier shared-memory writes (stores, landed cp.async copies) visible to
// the async proxy, through which wgmma reads its tiles.
__device__ __forceinline__ void rtx_fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
// Hopper's tensor memory accelerator. A tensor map is the 128-byte CUtensorMap the launcher
// encodes (cuTensorMapEncodeTiled); the kernel takes it as a __grid_constant__ parameter, and
// the copy reads it there by its generic address.
struct __align__(64) rtx_tensor_map { unsigned long long opaque[16]; };
__device__ __forceinline__ void rtx_mbarrier_init(unsigned int bar, unsigned int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void rtx_mbarrier_arrive(unsigned int bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void rtx_mbarrier_arrive_expect_tx(unsigned int bar, unsigned int bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
// try_wait suspends the thread for a time the hardware chooses, so the loop spins little.
__device__ __forceinline__ void rtx_mbarrier_wait(unsigned int bar, unsigned int parity) {
  asm volatile(
      "{\n .reg .pred p;\n RTX_MBAR_WAIT:\n"
      " mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
      " @!p bra RTX_MBAR_WAIT;\n}\n" ::"r"(bar), "r"(parity) : "memory");
}
__device__ __forceinline__ void rtx_tma_load_2d(unsigned int dst, const rtx_tensor_map* map, int col, int row, unsigned int bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n"
      ::"r"(dst), "l"((unsigned long long)map), "r"(col), "r"(row), "r"(bar) : "memory");
}
#endif // RTX_KERNEL_PRELUDE_MMA

// `flash_attn_bwd_dkdv`: SIMT kernel generated by #[kernel] from Rust.
#ifndef RTX_DYN_SHARED
#define RTX_DYN_SHARED extern __shared__ __align__(16)
#endif
template <typename S, typename A>
__device__ __forceinline__ void flash_attn_bwd_dkdv_impl(const S* q, const S* k, const S* v, const S* dout, const A* lse, const A* delta, S* dk, S* dv, const unsigned int* key_len, rtx_strides qs, rtx_strides ks, rtx_strides os, unsigned long long batch, unsigned long long heads, unsigned long long t_q, unsigned long long t_k, unsigned long long d, double scale, unsigned int causal, unsigned int padded) {
  RTX_DYN_SHARED unsigned char rtx_dyn_shared[];
  unsigned int (&sk)[4096] = *reinterpret_cast<unsigned int (*)[4096]>(rtx_dyn_shared + (0));
  unsigned int (&sv)[4096] = *reinterpret_cast<unsigned int (*)[4096]>(rtx_dyn_shared + ((((0) + 4096 * sizeof(unsigned int) + 15) & ~15ull)));
  unsigned int (&sq)[4096] = *reinterpret_cast<unsigned int (*)[4096]>(rtx_dyn_shared + (((((((0) + 4096 * sizeof(unsigned int) + 15) & ~15ull)) + 4096 * sizeof(unsigned int) + 15) & ~15ull)));
  unsigned int (&sdo)[4096] = *reinterpret_cast<unsigned int (*)[4096]>(rtx_dyn_shared + ((((((((((0) + 4096 * sizeof(unsigned int) + 15) & ~15ull)) + 4096 * sizeof(unsigned int) + 15) & ~15ull)) + 4096 * sizeof(unsigned int) + 15) & ~15ull)));
  unsigned int tid = ((unsigned int)(((unsigned long long)threadIdx.x)));
  unsigned int lane = (tid % 32u);
  unsigned int warp = (tid / 32u);
  unsigned long long hh = ((unsigned long long)blockIdx.y);
  unsigned long long n = ((unsigned long long)blockIdx.z);
  unsigned long long n0 = (((unsigned long long)blockIdx.x) * 64ull);
  if ((((n >= batch) || (hh >= heads)) || (n0 >= t_k))) {
    return;
  }
  unsigned long long b = ((n * heads) + hh);
  unsigned long long q0 = ((n * ((unsigned long long)(qs).strides[0ull])) + (hh * ((unsigned long long)(qs).strides[1ull])));
  unsigned long long q_rs = ((unsigned long long)(qs).strides[2ull]);
  unsigned long long k0 = ((n * ((unsigned long long)(ks).strides[0ull])) + (hh * ((unsigned long long)(ks).strides[1ull])));
  unsigned long long k_rs = ((unsigned long long)(ks).strides[2ull]);
  unsigned long long o0 = ((n * ((unsigned long long)(os).strides[0ull])) + (hh * ((unsigned long long)(os).strides[1ull])));
  unsigned long long o_rs = ((unsigned long long)(os).strides[2ull]);
  A scale_1 = ((A)(scale));
  A scale2 = (scale_1 * A(1.4426950408889634));
  bool is_causal = (causal != 0u);
  unsigned long long qt = ((d <= 64ull) ? 64ull : 32ull);
  unsigned long long kl = t_k;
  if ((padded != 0u)) {
    kl = rtx_min(kl, ((unsigned long long)(key_len[b])));
  }
  unsigned long long j0 = 0ull;
  if ((is_causal && ((n0 + t_q) > t_k))) {
    j0 = (((n0 + t_q) - t_k) / qt);
  }
  unsigned long long j_end = (((t_q + qt) - 1ull) / qt);
  if ((n0 >= kl)) {
    j_end = 0ull;
  }
  unsigned int cc = (tid % 16u);
  unsigned int cr = (tid / 16u);
  bool c_on = (((unsigned long long)(((cc / 8u) * 64u))) < d);
  bool c_in = (((unsigned long long)((cc * 8u))) < d);
  unsigned int c_dst = ((cr * 64u) + ((cc ^ cr) * 4u));
  if (((j0 < j_end) && c_on)) {
    #pragma unroll
    for (unsigned long long i = 0ull; i < 8ull; i += 1) {
      unsigned long long r = ((unsigned long long)((cr + (8u * ((unsigned int)(i))))));
      unsigned long long len = ((c_in && ((n0 + r) < kl)) ? 8ull : 0ull);
      unsigned long long at = ((k0 + ((n0 + r) * k_rs)) + ((unsigned long long)((cc * 8u))));
      rtx_cp_async16<S>((rtx_smem_addr(sk) + 4u * (unsigned int)(((unsigned long long)((c_dst + (((unsigned int)(i)) * 512u)))))), rtx_global_addr(k), at, len);
      rtx_cp_async16<S>((rtx_smem_addr(sv) + 4u * (unsigned int)(((unsigned long long)((c_dst + (((unsigned int)(i)) * 512u)))))), rtx_global_addr(v), at, len);
    }
    #pragma unroll
    for (unsigned long long i_1 = 0ull; i_1 < 8ull; i_1 += 1) {
      if (((i_1 * 8ull) < qt)) {
        unsigned long long r_1 = ((unsigned long long)((cr + (8u * ((unsigned int)(i_1))))));
        unsigned long long m = ((j0 * qt) + r_1);
        unsigned long long len_1 = ((c_in && (m < t_q)) ? 8ull : 0ull);
        unsigned long long at_1 = ((o0 + (m * o_rs)) + ((unsigned long long)((cc * 8u))));
        rtx_cp_async16<S>((rtx_smem_addr(sdo) + 4u * (unsigned int)(((unsigned long long)((c_dst + (((unsigned int)(i_1)) * 512u)))))), rtx_global_addr(dout), at_1, len_1);
      }
    }
  }
  rtx_cp_async_commit();
  unsigned int quad = (lane / 8u);
  unsigned int r8 = (lane % 8u);
  unsigned int a_row = ((((warp * 16u) + ((quad % 2u) * 8u)) + r8) * 64u);
  unsigned int b_row = ((((quad / 2u) * 8u) + r8) * 64u);
  unsigned int t_row = ((((quad % 2u) * 8u) + r8) * 64u);
  unsigned int g = (lane / 4u);
  unsigned int t4 = (lane % 4u);
  unsigned long long key0 = (n0 + ((unsigned long long)(((warp * 16u) + g))));
  const A rtx_t0 = A(0.0);
  A dka[64];
  #pragma unroll
  for (int rtx_t1 = 0; rtx_t1 < 64; ++rtx_t1) dka[rtx_t1] = rtx_t0;
  const A rtx_t2 = A(0.0);
  A dva[64];
  #pragma unroll
  for (int rtx_t3 = 0; rtx_t3 < 64; ++rtx_t3) dva[rtx_t3] = rtx_t2;
  const A rtx_t4 = A(0.0);
  A st[32];
  #pragma unroll
  for (int rtx_t5 = 0; rtx_t5 < 32; ++rtx_t5) st[rtx_t5] = rtx_t4;
  const A rtx_t6 = A(0.0);
  A dpt[32];
  #pragma unroll
  for (int rtx_t7 = 0; rtx_t7 < 32; ++rtx_t7) dpt[rtx_t7] = rtx_t6;
  const unsigned int rtx_t8 = 0u;
  unsigned int af[4];
  #pragma unroll
  for (int rtx_t9 = 0; rtx_t9 < 4; ++rtx_t9) af[rtx_t9] = rtx_t8;
  const unsigned int rtx_t10 = 0u;
  unsigned int bf[16];
  #pragma unroll
  for (int rtx_t11 = 0; rtx_t11 < 16; ++rtx_t11) bf[rtx_t11] = rtx_t10;
  const unsigned int rtx_t12 = 0u;
  unsigned int tf[4];
  #pragma unroll
  for (int rtx_t13 = 0; rtx_t13 < 4; ++rtx_t13) tf[rtx_t13] = rtx_t12;
  const unsigned int rtx_t14 = 0u;
  unsigned int pf[16];
  #pragma unroll
  for (int rtx_t15 = 0; rtx_t15 < 16; ++rtx_t15) pf[rtx_t15] = rtx_t14;
  const A rtx_t16 = A(0.0);
  A lq[16];
  #pragma unroll
  for (int rtx_t17 = 0; rtx_t17 < 16; ++rtx_t17) lq[rtx_t17] = rtx_t16;
  const A rtx_t18 = A(0.0);
  A dl[16];
  #pragma unroll
  for (int rtx_t19 = 0; rtx_t19 < 16; ++rtx_t19) dl[rtx_t19] = rtx_t18;
  unsigned long long j = j0;
  while ((j < j_end)) {
    unsigned long long m0 = (j * qt);
    bool first = (j == j0);
    if ((!first)) {
      rtx_cp_async_wait<0>();
      __syncthreads();
    }
    if (c_on) {
      #pragma unroll
      for (unsigned long long i_2 = 0ull; i_2 < 8ull; i_2 += 1) {
        if (((i_2 * 8ull) < qt)) {
          unsigned long long r_2 = ((unsigned long long)((cr + (8u * ((unsigned int)(i_2))))));
          unsigned long long len_2 = ((c_in && ((m0 + r_2) < t_q)) ? 8ull : 0ull);
          unsigned long long at_2 = ((q0 + ((m0 + r_2) * q_rs)) + ((unsigned long long)((cc * 8u))));
          rtx_cp_async16<S>((rtx_smem_addr(sq) + 4u * (unsigned int)(((unsigned long long)((c_dst + (((unsigned int)(i_2)) * 512u)))))), rtx_global_addr(q), at_2, len_2);
        }
      }
    }
    rtx_cp_async_commit();
    if (first) {
      rtx_cp_async_wait<1>();
      __syncthreads();
    }
    #pragma unroll
    for (unsigned long long nt = 0ull; nt < 8ull; nt += 1) {
      if (((nt * 8ull) < qt)) {
        #pragma unroll
        for (unsigned long long e = 0ull; e < 2ull; e += 1) {
          unsigned long long m_1 = (((m0 + (nt * 8ull)) + ((unsigned long long)((t4 * 2u)))) + e);
          A l = rtx_inf<A>();
          A dd = A(0.0);
          if ((m_1 < t_q)) {
            l = lse[((b * t_q) + m_1)];
            dd = delta[((b * t_q) + m_1)];
          }
          if ((l == (-rtx_inf<A>()))) {
            l = rtx_inf<A>();
          }
          lq[((nt * 2ull) + e)] = (l * A(1.4426950408889634));
          dl[((nt * 2ull) + e)] = dd;
        }
      }
    }
    #pragma unroll
    for (unsigned long long x = 0ull; x < 32ull; x += 1) {
      dpt[x] = A(0.0);
    }
    #pragma unroll
    for (unsigned long long h = 0ull; h < 2ull; h += 1) {
      if (((h * 64ull) < d)) {
        #pragma unroll
        for (unsigned long long k4 = 0ull; k4 < 4ull; k4 += 1) {
          unsigned long long ks_1 = ((h * 4ull) + k4);
          unsigned int ch = (((2u * ((unsigned int)(ks_1))) + (quad / 2u)) ^ r8);
          rtx_ldmatrix_x4(af[(0ull) + 0ull], af[(0ull) + 1ull], af[(0ull) + 2ull], af[(0ull) + 3ull], (rtx_smem_addr(sv) + 4u * (unsigned int)(((unsigned long long)((a_row + (ch * 4u)))))));
          #pragma unroll
          for (unsigned long long np = 0ull; np < 4ull; np += 1) {
            if (((np * 16ull) < qt)) {
              unsigned int ch_1 = (((2u * ((unsigned int)(ks_1))) + (quad % 2u)) ^ r8);
              rtx_ldmatrix_x4(bf[((np * 4ull)) + 0ull], bf[((np * 4ull)) + 1ull], bf[((np * 4ull)) + 2ull], bf[((np * 4ull)) + 3ull], (rtx_smem_addr(sdo) + 4u * (unsigned int)(((unsigned long long)(((b_row + (((unsigned int)(np)) * 1024u)) + (ch_1 * 4u)))))));
            }
          }
          #pragma unroll
          for (unsigned long long nt_1 = 0ull; nt_1 < 8ull; nt_1 += 1) {
            if (((nt_1 * 8ull) < qt)) {
              rtx_mma<S>::m16n8k16(dpt[((nt_1 * 4ull)) + 0ull], dpt[((nt_1 * 4ull)) + 1ull], dpt[((nt_1 * 4ull)) + 2ull], dpt[((nt_1 * 4ull)) + 3ull], af[(0ull) + 0ull], af[(0ull) + 1ull], af[(0ull) + 2ull], af[(0ull) + 3ull], bf[((nt_1 * 2ull)) + 0ull], bf[((nt_1 * 2ull)) + 1ull]);
            }
          }
        }
      }
    }
    rtx_cp_async_wait<0>();
    __syncthreads();
    #pragma unroll
    for (unsigned long long x_1 = 0ull; x_1 < 32ull; x_1 += 1) {
      st[x_1] = A(0.0);
    }
    #pragma unroll
    for (unsigned long long h_1 = 0ull; h_1 < 2ull; h_1 += 1) {
      if (((h_1 * 64ull) < d)) {
        #pragma unroll
        for (unsigned long long k4_1 = 0ull; k4_1 < 4ull; k4_1 += 1) {
          unsigned long long ks_2 = ((h_1 * 4ull) + k4_1);
          unsigned int ch_2 = (((2u * ((unsigned int)(ks_2))) + (quad / 2u)) ^ r8);
          rtx_ldmatrix_x4(af[(0ull) + 0ull], af[(0ull) + 1ull], af[(0ull) + 2ull], af[(0ull) + 3ull], (rtx_smem_addr(sk) + 4u * (unsigned int)(((unsigned long long)((a_row + (ch_2 * 4u)))))));
          #pragma unroll
          for (unsigned long long np_1 = 0ull; np_1 < 4ull; np_1 += 1) {
            if (((np_1 * 16ull) < qt)) {
              unsigned int ch_3 = (((2u * ((unsigned int)(ks_2))) + (quad % 2u)) ^ r8);
              rtx_ldmatrix_x4(bf[((np_1 * 4ull)) + 0ull], bf[((np_1 * 4ull)) + 1ull], bf[((np_1 * 4ull)) + 2ull], bf[((np_1 * 4ull)) + 3ull], (rtx_smem_addr(sq) + 4u * (unsigned int)(((unsigned long long)(((b_row + (((unsigned int)(np_1)) * 1024u)) + (ch_3 * 4u)))))));
            }
          }
          #pragma unroll
          for (unsigned long long nt_2 = 0ull; nt_2 < 8ull; nt_2 += 1) {
            if (((nt_2 * 8ull) < qt)) {
              rtx_mma<S>::m16n8k16(st[((nt_2 * 4ull)) + 0ull], st[((nt_2 * 4ull)) + 1ull], st[((nt_2 * 4ull)) + 2ull], st[((nt_2 * 4ull)) + 3ull], af[(0ull) + 0ull], af[(0ull) + 1ull], af[(0ull) + 2ull], af[(0ull) + 3ull], bf[((nt_2 * 2ull)) + 0ull], bf[((nt_2 * 2ull)) + 1ull]);
            }
          }
        }
      }
    }
    bool masked = (((n0 + 64ull) > kl) || (is_causal && (((n0 + 63ull) + t_q) > (m0 + t_k))));
    #pragma unroll
    for (unsigned long long nt_3 = 0ull; nt_3 < 8ull; nt_3 += 1) {
      if (((nt_3 * 8ull) < qt)) {
        #pragma unroll
        for (unsigned long long i_3 = 0ull; i_3 < 4ull; i_3 += 1) {
          A p = rtx_exp2(((st[((nt_3 * 4ull) + i_3)] * scale2) - lq[((nt_3 * 2ull) + (i_3 % 2ull))]));
          if (masked) {
            unsigned long long key = (key0 + ((i_3 / 2ull) * 8ull));
            unsigned long long m_2 = (((m0 + (nt_3 * 8ull)) + ((unsigned long long)((t4 * 2u)))) + (i_3 % 2ull));
            if (((key >= kl) || (is_causal && ((key + t_q) > (m_2 + t_k))))) {
              p = A(0.0);
            }
          }
          st[((nt_3 * 4ull) + i_3)] = p;
        }
      }
    }
    #pragma unroll
    for (unsigned long long kk = 0ull; kk < 4ull; kk += 1) {
      if (((kk * 16ull) < qt)) {
        pf[(kk * 4ull)] = rtx_pack2<S>(st[(kk * 8ull)], st[((kk * 8ull) + 1ull)]);
        pf[((kk * 4ull) + 1ull)] = rtx_pack2<S>(st[((kk * 8ull) + 2ull)], st[((kk * 8ull) + 3ull)]);
        pf[((kk * 4ull) + 2ull)] = rtx_pack2<S>(st[((kk * 8ull) + 4ull)], st[((kk * 8ull) + 5ull)]);
        pf[((kk * 4ull) + 3ull)] = rtx_pack2<S>(st[((kk * 8ull) + 6ull)], st[((kk * 8ull) + 7ull)]);
      }
    }
    #pragma unroll
    for (unsigned long long h_2 = 0ull; h_2 < 2ull; h_2 += 1) {
      if (((h_2 * 64ull) < d)) {
        #pragma unroll
        for (unsigned long long kk_1 = 0ull; kk_1 < 4ull; kk_1 += 1) {
          if (((kk_1 * 16ull) < qt)) {
            #pragma unroll
            for (unsigned long long d4 = 0ull; d4 < 4ull; d4 += 1) {
              unsigned long long dp = ((h_2 * 4ull) + d4);
              unsigned int ch_4 = (((2u * ((unsigned int)(dp))) + (quad / 2u)) ^ r8);
              rtx_ldmatrix_x4_trans(tf[(0ull) + 0ull], tf[(0ull) + 1ull], tf[(0ull) + 2ull], tf[(0ull) + 3ull], (rtx_smem_addr(sdo) + 4u * (unsigned int)(((unsigned long long)(((t_row + (((unsigned int)(kk_1)) * 1024u)) + (ch_4 * 4u)))))));
              rtx_mma<S>::m16n8k16(dva[((dp * 8ull)) + 0ull], dva[((dp * 8ull)) + 1ull], dva[((dp * 8ull)) + 2ull], dva[((dp * 8ull)) + 3ull], pf[((kk_1 * 4ull)) + 0ull], pf[((kk_1 * 4ull)) + 1ull], pf[((kk_1 * 4ull)) + 2ull], pf[((kk_1 * 4ull)) + 3ull], tf[(0ull) + 0ull], tf[(0ull) + 1ull]);
              rtx_mma<S>::m16n8k16(dva[(((dp * 8ull) + 4ull)) + 0ull], dva[(((dp * 8ull) + 4ull)) + 1ull], dva[(((dp * 8ull) + 4ull)) + 2ull], dva[(((dp * 8ull) + 4ull)) + 3ull], pf[((kk_1 * 4ull)) + 0ull], pf[((kk_1 * 4ull)) + 1ull], pf[((kk_1 * 4ull)) + 2ull], pf[((kk_1 * 4ull)) + 3ull], tf[(2ull) + 0ull], tf[(2ull) + 1ull]);
            }
          }
        }
      }
    }
    __syncthreads();
    if ((((j + 1ull) < j_end) && c_on)) {
      #pragma unroll
      for (unsigned long long i_4 = 0ull; i_4 < 8ull; i_4 += 1) {
        if (((i_4 * 8ull) < qt)) {
          unsigned long long r_3 = ((unsigned long long)((cr + (8u * ((unsigned int)(i_4))))));
          unsigned long long m_3 = ((m0 + qt) + r_3);
          unsigned long long len_3 = ((c_in && (m_3 < t_q)) ? 8ull : 0ull);
          unsigned long long at_3 = ((o0 + (m_3 * o_rs)) + ((unsigned long long)((cc * 8u))));
          rtx_cp_async16<S>((rtx_smem_addr(sdo) + 4u * (unsigned int)(((unsigned long long)((c_dst + (((unsigned int)(i_4)) * 512u)))))), rtx_global_addr(dout), at_3, len_3);
        }
      }
    }
    rtx_cp_async_commit();
    #pragma unroll
    for (unsigned long long nt_4 = 0ull; nt_4 < 8ull; nt_4 += 1) {
      if (((nt_4 * 8ull) < qt)) {
        #pragma unroll
        for (unsigned long long i_5 = 0ull; i_5 < 4ull; i_5 += 1) {
          st[((nt_4 * 4ull) + i_5)] = (st[((nt_4 * 4ull) + i_5)] * (dpt[((nt_4 * 4ull) + i_5)] - dl[((nt_4 * 2ull) + (i_5 % 2ull))]));
        }
      }
    }
    #pragma unroll
    for (unsigned long long kk_2 = 0ull; kk_2 < 4ull; kk_2 += 1) {
      if (((kk_2 * 16ull) < qt)) {
        pf[(kk_2 * 4ull)] = rtx_pack2<S>(st[(kk_2 * 8ull)], st[((kk_2 * 8ull) + 1ull)]);
        pf[((kk_2 * 4ull) + 1ull)] = rtx_pack2<S>(st[((kk_2 * 8ull) + 2ull)], st[((kk_2 * 8ull) + 3ull)]);
        pf[((kk_2 * 4ull) + 2ull)] = rtx_pack2<S>(st[((kk_2 * 8ull) + 4ull)], st[((kk_2 * 8ull) + 5ull)]);
        pf[((kk_2 * 4ull) + 3ull)] = rtx_pack2<S>(st[((kk_2 * 8ull) + 6ull)], st[((kk_2 * 8ull) + 7ull)]);
      }
    }
    #pragma unroll
    for (unsigned long long h_3 = 0ull; h_3 < 2ull; h_3 += 1) {
      if (((h_3 * 64ull) < d)) {
        #pragma unroll
        for (unsigned long long kk_3 = 0ull; kk_3 < 4ull; kk_3 += 1) {
          if (((kk_3 * 16ull) < qt)) {
            #pragma unroll
            for (unsigned long long d4_1 = 0ull; d4_1 < 4ull; d4_1 += 1) {
              unsigned long long dp_1 = ((h_3 * 4ull) + d4_1);
              unsigned int ch_5 = (((2u * ((unsigned int)(dp_1))) + (quad / 2u)) ^ r8);
              rtx_ldmatrix_x4_trans(tf[(0ull) + 0ull], tf[(0ull) + 1ull], tf[(0ull) + 2ull], tf[(0ull) + 3ull], (rtx_smem_addr(sq) + 4u * (unsigned int)(((unsigned long long)(((t_row + (((unsigned int)(kk_3)) * 1024u)) + (ch_5 * 4u)))))));
              rtx_mma<S>::m16n8k16(dka[((dp_1 * 8ull)) + 0ull], dka[((dp_1 * 8ull)) + 1ull], dka[((dp_1 * 8ull)) + 2ull], dka[((dp_1 * 8ull)) + 3ull], pf[((kk_3 * 4ull)) + 0ull], pf[((kk_3 * 4ull)) + 1ull], pf[((kk_3 * 4ull)) + 2ull], pf[((kk_3 * 4ull)) + 3ull], tf[(0ull) + 0ull], tf[(0ull) + 1ull]);
              rtx_mma<S>::m16n8k16(dka[(((dp_1 * 8ull) + 4ull)) + 0ull], dka[(((dp_1 * 8ull) + 4ull)) + 1ull], dka[(((dp_1 * 8ull) + 4ull)) + 2ull], dka[(((dp_1 * 8ull) + 4ull)) + 3ull], pf[((kk_3 * 4ull)) + 0ull], pf[((kk_3 * 4ull)) + 1ull], pf[((kk_3 * 4ull)) + 2ull], pf[((kk_3 * 4ull)) + 3ull], tf[(2ull) + 0ull], tf[(2ull) + 1ull]);
            }
          }
        }
      }
    }
    j += 1ull;
  }
  #pragma unroll
  for (unsigned long long h_4 = 0ull; h_4 < 2ull; h_4 += 1) {
    unsigned long long key_1 = (key0 + (h_4 * 8ull));
    if ((key_1 < t_k)) {
      #pragma unroll
      for (unsigned long long dt = 0ull; dt < 16ull; dt += 1) {
        if (((dt * 8ull) < d)) {
          unsigned long long at_4 = (((k0 + (key_1 * k_rs)) + (dt * 8ull)) + ((unsigned long long)((t4 * 2u))));
          const unsigned long long rtx_t20 = at_4;
          dk[rtx_t20] = rtx_elem<S>::narrow((dka[((dt * 4ull) + (h_4 * 2ull))] * scale_1));
          const unsigned long long rtx_t21 = (at_4 + 1ull);
          dk[rtx_t21] = rtx_elem<S>::narrow((dka[(((dt * 4ull) + (h_4 * 2ull)) + 1ull)] * scale_1));
          const unsigned long long rtx_t22 = at_4;
          dv[rtx_t22] = rtx_elem<S>::narrow(dva[((dt * 4ull) + (h_4 * 2ull))]);
          const unsigned long long rtx_t23 = (at_4 + 1ull);
          dv[rtx_t23] = rtx_elem<S>::narrow(dva[(((dt * 4ull) + (h_4 * 2ull)) + 1ull)]);
        }
      }
    }
  }
}

extern "C" __global__ void flash_attn_bwd_dkdv_f16(const rtx_f16* q, const rtx_f16* k, const rtx_f16* v, const rtx_f16* dout, const float* lse, const float* delta, rtx_f16* dk, rtx_f16* dv, const unsigned int* key_len, rtx_strides qs, rtx_strides ks, rtx_strides os, unsigned long long batch, unsigned long long heads, unsigned long long t_q, unsigned long long t_k, unsigned long long d, double scale, unsigned int causal, unsigned int padded) {
  RTX_ENTRY();
  flash_attn_bwd_dkdv_impl<rtx_f16, float>(q, k, v, dout, lse, delta, dk, dv, key_len, qs, ks, os, batch, heads, t_q, t_k, d, scale, causal, padded);
}
extern "C" __global__ void flash_attn_bwd_dkdv_f16__d64(const rtx_f16* q, const rtx_f16* k, const rtx_f16* v, const rtx_f16* dout, const float* lse, const float* delta, rtx_f16* dk, rtx_f16* dv, const unsigned int* key_len, rtx_strides qs, rtx_strides ks, rtx_strides os, unsigned long long batch, unsigned long long heads, unsigned long long t_q, unsigned long long t_k, unsigned long long d, double scale, unsigned int causal, unsigned int padded) {
  RTX_ENTRY();
  flash_attn_bwd_dkdv_impl<rtx_f16, float>(q, k, v, dout, lse, delta, dk, dv, key_len, qs, ks, os, batch, heads, t_q, t_k, 64ull, scale, causal, padded);
}
extern "C" __global__ void flash_attn_bwd_dkdv_f16__d128(const rtx_f16* q, const rtx_f16* k, const rtx_f16* v, const rtx_f16* dout, const float* lse, const float* delta, rtx_f16* dk, rtx_f16* dv, const unsigned int* key_len, rtx_strides qs, rtx_strides ks, rtx_strides os, unsigned long long batch, unsigned long long heads, unsigned long long t_q, unsigned long long t_k, unsigned long long d, double scale, unsigned int causal, unsigned int padded) {
  RTX_ENTRY();
  flash_attn_bwd_dkdv_impl<rtx_f16, float>(q, k, v, dout, lse, delta, dk, dv, key_len, qs, ks, os, batch, heads, t_q, t_k, 128ull, scale, causal, padded);
}
extern "C" __global__ void flash_attn_bwd_dkdv_bf16(const rtx_bf16* q, const rtx_bf16* k, const rtx_bf16* v, const rtx_bf16* dout, const float* lse, const float* delta, rtx_bf16* dk, rtx_bf16* dv, const unsigned int* key_len, rtx_strides qs, rtx_strides ks, rtx_strides os, unsigned long long batch, unsigned long long heads, unsigned long long t_q, unsigned long long t_k, unsigned long long d, double scale, unsigned int causal, unsigned int padded) {
  RTX_ENTRY();
  flash_attn_bwd_dkdv_impl<rtx_bf16, float>(q, k, v, dout, lse, delta, dk, dv, key_len, qs, ks, os, batch, heads, t_q, t_k, d, scale, causal, padded);
}
extern "C" __global__ void flash_attn_bwd_dkdv_bf16__d64(const rtx_bf16* q, const rtx_bf16* k, const rtx_bf16* v, const rtx_bf16* dout, const float* lse, const float* delta, rtx_bf16* dk, rtx_bf16* dv, const unsigned int* key_len, rtx_strides qs, rtx_strides ks, rtx_strides os, unsigned long long batch, unsigned long long heads, unsigned long long t_q, unsigned long long t_k, unsigned long long d, double scale, unsigned int causal, unsigned int padded) {
  RTX_ENTRY();
  flash_attn_bwd_dkdv_impl<rtx_bf16, float>(q, k, v, dout, lse, delta, dk, dv, key_len, qs, ks, os, batch, heads, t_q, t_k, 64ull, scale, causal, padded);
}
extern "C" __global__ void flash_attn_bwd_dkdv_bf16__d128(const rtx_bf16* q, const rtx_bf16* k, const rtx_bf16* v, const rtx_bf16* dout, const float* lse, const float* delta, rtx_bf16* dk, rtx_bf16* dv, const unsigned int* key_len, rtx_strides qs, rtx_strides ks, rtx_strides os, unsigned long long batch, unsigned long long heads, unsigned long long t_q, unsigned long long t_k, unsigned long long d, double scale, unsigned int causal, unsigned int padded) {
  RTX_ENTRY();
  flash_attn_bwd_dkdv_impl<rtx_bf16, float>(q, k, v, dout, lse, delta, dk, dv, key_len, qs, ks, os, batch, heads, t_q, t_k, 128ull, scale, causal, padded);
}
