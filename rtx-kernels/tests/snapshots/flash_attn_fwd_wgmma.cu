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

// `flash_attn_fwd_wgmma`: SIMT kernel generated by #[kernel] from Rust.
#ifndef RTX_DYN_SHARED
#define RTX_DYN_SHARED extern __shared__ __align__(1024)
#endif
template <typename S, typename A>
__device__ __forceinline__ void flash_attn_fwd_wgmma_impl(const S* q, const S* k, const S* v, S* o, A* lse, const unsigned int* key_len, rtx_strides qs, rtx_strides ks, rtx_strides os, unsigned long long batch, unsigned long long heads, unsigned long long t_q, unsigned long long t_k, unsigned long long d, double scale, unsigned int causal, unsigned int padded, unsigned long long warpgroups, unsigned long long stages) {
  RTX_DYN_SHARED unsigned char rtx_dyn_shared[];
  unsigned int (&sm)[40960] = *reinterpret_cast<unsigned int (*)[40960]>(rtx_dyn_shared + (0));
  unsigned int threads = ((unsigned int)((128ull * warpgroups)));
  unsigned int tid = ((unsigned int)(((unsigned long long)threadIdx.x)));
  unsigned int wg = (tid / 128u);
  unsigned int t = (tid % 128u);
  unsigned int lane = (t % 32u);
  unsigned int warp = (t / 32u);
  unsigned long long hh = ((unsigned long long)blockIdx.y);
  unsigned long long n = ((unsigned long long)blockIdx.z);
  unsigned long long bq = (64ull * warpgroups);
  unsigned long long kw = (64ull * d);
  unsigned long long v_at = (stages * kw);
  unsigned long long q_at = ((2ull * stages) * kw);
  unsigned long long q_panel = (32ull * bq);
  unsigned long long bx = ((causal != 0u) ? ((((unsigned long long)gridDim.x) - 1ull) - ((unsigned long long)blockIdx.x)) : ((unsigned long long)blockIdx.x));
  unsigned long long m0 = (bx * bq);
  if ((((n >= batch) || (hh >= heads)) || (m0 >= t_q))) {
    return;
  }
  unsigned long long b = ((n * heads) + hh);
  unsigned long long q0 = ((n * ((unsigned long long)(qs).strides[0ull])) + (hh * ((unsigned long long)(qs).strides[1ull])));
  unsigned long long q_rs = ((unsigned long long)(qs).strides[2ull]);
  unsigned long long k0 = ((n * ((unsigned long long)(ks).strides[0ull])) + (hh * ((unsigned long long)(ks).strides[1ull])));
  unsigned long long k_rs = ((unsigned long long)(ks).strides[2ull]);
  A scale_1 = ((A)(scale));
  A scale2 = (scale_1 * A(1.4426950408889634));
  bool is_causal = (causal != 0u);
  unsigned long long kl = t_k;
  if ((padded != 0u)) {
    kl = rtx_min(kl, ((unsigned long long)(key_len[b])));
  }
  unsigned long long n_end = kl;
  if (is_causal) {
    unsigned long long lim = (rtx_min((m0 + bq), t_q) + t_k);
    n_end = ((lim > t_q) ? rtx_min(n_end, (lim - t_q)) : 0ull);
  }
  unsigned long long tiles = ((n_end + 127ull) / 128ull);
  unsigned int cpr = ((unsigned int)((d / 8ull)));
  unsigned int cc = (tid % cpr);
  unsigned int cr = (tid / cpr);
  unsigned int rstep = (threads / cpr);
  unsigned int passes = (128u / rstep);
  unsigned int q_passes = (((unsigned int)(bq)) / rstep);
  unsigned int c_row = ((cr * 32u) + (((cc % 8u) ^ (cr % 8u)) * 4u));
  unsigned int c_dst = (((cc / 8u) * 4096u) + c_row);
  unsigned int q_dst = ((((unsigned int)(q_at)) + ((cc / 8u) * ((unsigned int)(q_panel)))) + c_row);
  unsigned long long q_src = ((q0 + ((m0 + ((unsigned long long)(cr))) * q_rs)) + ((unsigned long long)((cc * 8u))));
  unsigned long long k_at = ((k0 + (((unsigned long long)(cr)) * k_rs)) + ((unsigned long long)((cc * 8u))));
  unsigned long long q_pass = (((unsigned long long)(rstep)) * q_rs);
  unsigned long long k_pass = (((unsigned long long)(rstep)) * k_rs);
  #pragma unroll
  for (unsigned long long i = 0ull; i < 16ull; i += 1) {
    unsigned int r = (cr + (((unsigned int)(i)) * rstep));
    unsigned long long dst = ((unsigned long long)((c_dst + ((((unsigned int)(i)) * rstep) * 32u))));
    if ((((unsigned int)(i)) < q_passes)) {
      unsigned long long lq = (((m0 + ((unsigned long long)(r))) < t_q) ? 8ull : 0ull);
      unsigned long long qd = ((unsigned long long)((q_dst + ((((unsigned int)(i)) * rstep) * 32u))));
      rtx_cp_async16<S>((rtx_smem_addr(sm) + 4u * (unsigned int)(qd)), rtx_global_addr(q), (q_src + (i * q_pass)), lq);
    }
    if ((((unsigned int)(i)) < passes)) {
      unsigned long long len = ((((unsigned long long)(r)) < n_end) ? 8ull : 0ull);
      rtx_cp_async16<S>((rtx_smem_addr(sm) + 4u * (unsigned int)(dst)), rtx_global_addr(k), (k_at + (i * k_pass)), len);
      rtx_cp_async16<S>((rtx_smem_addr(sm) + 4u * (unsigned int)((v_at + dst))), rtx_global_addr(v), (k_at + (i * k_pass)), len);
    }
  }
  rtx_cp_async_commit();
  unsigned int g = (lane / 4u);
  unsigned int t4 = (lane % 4u);
  unsigned long long row0 = (m0 + ((unsigned long long)((((wg * 64u) + (warp * 16u)) + g))));
  unsigned long long q_tile = (q_at + (((unsigned long long)(wg)) * 2048ull));
  const A rtx_t0 = A(0.0);
  A acc[64];
  #pragma unroll
  for (int rtx_t1 = 0; rtx_t1 < 64; ++rtx_t1) acc[rtx_t1] = rtx_t0;
  const A rtx_t2 = A(0.0);
  A s[64];
  #pragma unroll
  for (int rtx_t3 = 0; rtx_t3 < 64; ++rtx_t3) s[rtx_t3] = rtx_t2;
  const unsigned int rtx_t4 = 0u;
  unsigned int pf[32];
  #pragma unroll
  for (int rtx_t5 = 0; rtx_t5 < 32; ++rtx_t5) pf[rtx_t5] = rtx_t4;
  const A rtx_t6 = (-rtx_inf<A>());
  A row_max[2];
  #pragma unroll
  for (int rtx_t7 = 0; rtx_t7 < 2; ++rtx_t7) row_max[rtx_t7] = rtx_t6;
  const A rtx_t8 = A(0.0);
  A row_sum[2];
  #pragma unroll
  for (int rtx_t9 = 0; rtx_t9 < 2; ++rtx_t9) row_sum[rtx_t9] = rtx_t8;
  const A rtx_t10 = A(0.0);
  A alpha[2];
  #pragma unroll
  for (int rtx_t11 = 0; rtx_t11 < 2; ++rtx_t11) alpha[rtx_t11] = rtx_t10;
  const unsigned long long rtx_t12 = 0ull;
  unsigned long long lim_1[2];
  #pragma unroll
  for (int rtx_t13 = 0; rtx_t13 < 2; ++rtx_t13) lim_1[rtx_t13] = rtx_t12;
  unsigned long long j = 0ull;
  while ((j < tiles)) {
    unsigned long long n0 = (j * 128ull);
    unsigned long long kb = ((j % stages) * kw);
    unsigned long long c = ((j + stages) - 1ull);
    bool early = ((stages == 2ull) && (j == 0ull));
    if ((!early)) {
      rtx_cp_async_wait<0>();
      rtx_fence_proxy_async();
      __syncthreads();
    }
    if (((c < tiles) && (c > 0ull))) {
      unsigned long long nb = ((c % stages) * kw);
      unsigned long long k_next = (k_at + ((c * 128ull) * k_rs));
      #pragma unroll
      for (unsigned long long i_1 = 0ull; i_1 < 16ull; i_1 += 1) {
        if ((((unsigned int)(i_1)) < passes)) {
          unsigned long long r_1 = ((c * 128ull) + ((unsigned long long)((cr + (((unsigned int)(i_1)) * rstep)))));
          unsigned long long dst_1 = (nb + ((unsigned long long)((c_dst + ((((unsigned int)(i_1)) * rstep) * 32u)))));
          unsigned long long len_1 = ((r_1 < n_end) ? 8ull : 0ull);
          rtx_cp_async16<S>((rtx_smem_addr(sm) + 4u * (unsigned int)(dst_1)), rtx_global_addr(k), (k_next + (i_1 * k_pass)), len_1);
          rtx_cp_async16<S>((rtx_smem_addr(sm) + 4u * (unsigned int)((v_at + dst_1))), rtx_global_addr(v), (k_next + (i_1 * k_pass)), len_1);
        }
      }
    }
    rtx_cp_async_commit();
    if (early) {
      rtx_cp_async_wait<1>();
      rtx_fence_proxy_async();
      __syncthreads();
    }
    if ((stages == 1ull)) {
      rtx_cp_async_wait<0>();
      rtx_fence_proxy_async();
      __syncthreads();
    }
    #pragma unroll
    for (unsigned long long x = 0ull; x < 64ull; x += 1) {
      s[x] = A(0.0);
    }
    rtx_wgmma_fence();
    #pragma unroll
    for (unsigned long long kk = 0ull; kk < 8ull; kk += 1) {
      if (((kk * 16ull) < d)) {
        unsigned int step = ((unsigned int)((((kk / 4ull) * 4096ull) + ((kk % 4ull) * 8ull))));
        unsigned long long q_step = (((kk / 4ull) * q_panel) + ((kk % 4ull) * 8ull));
        { const unsigned long long rtx_da = rtx_wgmma_desc((rtx_smem_addr(sm) + 4u * (unsigned int)((q_tile + q_step)))), rtx_db = rtx_wgmma_desc((rtx_smem_addr(sm) + 4u * (unsigned int)((kb + ((unsigned long long)(step)))))); if (rtx_is_bf16<S>::value) { asm volatile("{ .reg .pred p; setp.ne.b32 p, %66, 0; wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 0, 0; }\n" : "+f"(s[(0ull) + 0ull]), "+f"(s[(0ull) + 1ull]), "+f"(s[(0ull) + 2ull]), "+f"(s[(0ull) + 3ull]), "+f"(s[(0ull) + 4ull]), "+f"(s[(0ull) + 5ull]), "+f"(s[(0ull) + 6ull]), "+f"(s[(0ull) + 7ull]), "+f"(s[(0ull) + 8ull]), "+f"(s[(0ull) + 9ull]), "+f"(s[(0ull) + 10ull]), "+f"(s[(0ull) + 11ull]), "+f"(s[(0ull) + 12ull]), "+f"(s[(0ull) + 13ull]), "+f"(s[(0ull) + 14ull]), "+f"(s[(0ull) + 15ull]), "+f"(s[(0ull) + 16ull]), "+f"(s[(0ull) + 17ull]), "+f"(s[(0ull) + 18ull]), "+f"(s[(0ull) + 19ull]), "+f"(s[(0ull) + 20ull]), "+f"(s[(0ull) + 21ull]), "+f"(s[(0ull) + 22ull]), "+f"(s[(0ull) + 23ull]), "+f"(s[(0ull) + 24ull]), "+f"(s[(0ull) + 25ull]), "+f"(s[(0ull) + 26ull]), "+f"(s[(0ull) + 27ull]), "+f"(s[(0ull) + 28ull]), "+f"(s[(0ull) + 29ull]), "+f"(s[(0ull) + 30ull]), "+f"(s[(0ull) + 31ull]), "+f"(s[(0ull) + 32ull]), "+f"(s[(0ull) + 33ull]), "+f"(s[(0ull) + 34ull]), "+f"(s[(0ull) + 35ull]), "+f"(s[(0ull) + 36ull]), "+f"(s[(0ull) + 37ull]), "+f"(s[(0ull) + 38ull]), "+f"(s[(0ull) + 39ull]), "+f"(s[(0ull) + 40ull]), "+f"(s[(0ull) + 41ull]), "+f"(s[(0ull) + 42ull]), "+f"(s[(0ull) + 43ull]), "+f"(s[(0ull) + 44ull]), "+f"(s[(0ull) + 45ull]), "+f"(s[(0ull) + 46ull]), "+f"(s[(0ull) + 47ull]), "+f"(s[(0ull) + 48ull]), "+f"(s[(0ull) + 49ull]), "+f"(s[(0ull) + 50ull]), "+f"(s[(0ull) + 51ull]), "+f"(s[(0ull) + 52ull]), "+f"(s[(0ull) + 53ull]), "+f"(s[(0ull) + 54ull]), "+f"(s[(0ull) + 55ull]), "+f"(s[(0ull) + 56ull]), "+f"(s[(0ull) + 57ull]), "+f"(s[(0ull) + 58ull]), "+f"(s[(0ull) + 59ull]), "+f"(s[(0ull) + 60ull]), "+f"(s[(0ull) + 61ull]), "+f"(s[(0ull) + 62ull]), "+f"(s[(0ull) + 63ull]) : "l"(rtx_da), "l"(rtx_db), "r"(1) : "memory"); } else { asm volatile("{ .reg .pred p; setp.ne.b32 p, %66, 0; wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 0, 0; }\n" : "+f"(s[(0ull) + 0ull]), "+f"(s[(0ull) + 1ull]), "+f"(s[(0ull) + 2ull]), "+f"(s[(0ull) + 3ull]), "+f"(s[(0ull) + 4ull]), "+f"(s[(0ull) + 5ull]), "+f"(s[(0ull) + 6ull]), "+f"(s[(0ull) + 7ull]), "+f"(s[(0ull) + 8ull]), "+f"(s[(0ull) + 9ull]), "+f"(s[(0ull) + 10ull]), "+f"(s[(0ull) + 11ull]), "+f"(s[(0ull) + 12ull]), "+f"(s[(0ull) + 13ull]), "+f"(s[(0ull) + 14ull]), "+f"(s[(0ull) + 15ull]), "+f"(s[(0ull) + 16ull]), "+f"(s[(0ull) + 17ull]), "+f"(s[(0ull) + 18ull]), "+f"(s[(0ull) + 19ull]), "+f"(s[(0ull) + 20ull]), "+f"(s[(0ull) + 21ull]), "+f"(s[(0ull) + 22ull]), "+f"(s[(0ull) + 23ull]), "+f"(s[(0ull) + 24ull]), "+f"(s[(0ull) + 25ull]), "+f"(s[(0ull) + 26ull]), "+f"(s[(0ull) + 27ull]), "+f"(s[(0ull) + 28ull]), "+f"(s[(0ull) + 29ull]), "+f"(s[(0ull) + 30ull]), "+f"(s[(0ull) + 31ull]), "+f"(s[(0ull) + 32ull]), "+f"(s[(0ull) + 33ull]), "+f"(s[(0ull) + 34ull]), "+f"(s[(0ull) + 35ull]), "+f"(s[(0ull) + 36ull]), "+f"(s[(0ull) + 37ull]), "+f"(s[(0ull) + 38ull]), "+f"(s[(0ull) + 39ull]), "+f"(s[(0ull) + 40ull]), "+f"(s[(0ull) + 41ull]), "+f"(s[(0ull) + 42ull]), "+f"(s[(0ull) + 43ull]), "+f"(s[(0ull) + 44ull]), "+f"(s[(0ull) + 45ull]), "+f"(s[(0ull) + 46ull]), "+f"(s[(0ull) + 47ull]), "+f"(s[(0ull) + 48ull]), "+f"(s[(0ull) + 49ull]), "+f"(s[(0ull) + 50ull]), "+f"(s[(0ull) + 51ull]), "+f"(s[(0ull) + 52ull]), "+f"(s[(0ull) + 53ull]), "+f"(s[(0ull) + 54ull]), "+f"(s[(0ull) + 55ull]), "+f"(s[(0ull) + 56ull]), "+f"(s[(0ull) + 57ull]), "+f"(s[(0ull) + 58ull]), "+f"(s[(0ull) + 59ull]), "+f"(s[(0ull) + 60ull]), "+f"(s[(0ull) + 61ull]), "+f"(s[(0ull) + 62ull]), "+f"(s[(0ull) + 63ull]) : "l"(rtx_da), "l"(rtx_db), "r"(1) : "memory"); } };
      }
    }
    rtx_wgmma_commit();
    rtx_wgmma_wait<0>(s);
    if ((((n0 + 128ull) > kl) || (is_causal && (((n0 + 127ull) + t_q) > (m0 + t_k))))) {
      #pragma unroll
      for (unsigned long long h = 0ull; h < 2ull; h += 1) {
        unsigned long long seen = (((row0 + (8ull * h)) + t_k) + 1ull);
        lim_1[h] = ((!is_causal) ? kl : ((seen > t_q) ? rtx_min(kl, (seen - t_q)) : 0ull));
      }
      #pragma unroll
      for (unsigned long long i_2 = 0ull; i_2 < 64ull; i_2 += 1) {
        unsigned long long col = (((n0 + (8ull * (i_2 / 4ull))) + ((unsigned long long)((t4 * 2u)))) + (i_2 % 2ull));
        if ((col >= lim_1[((i_2 / 2ull) % 2ull)])) {
          s[i_2] = (-rtx_inf<A>());
        }
      }
    }
    #pragma unroll
    for (unsigned long long h_1 = 0ull; h_1 < 2ull; h_1 += 1) {
      A mx = row_max[h_1];
      #pragma unroll
      for (unsigned long long nt = 0ull; nt < 16ull; nt += 1) {
        mx = rtx_max(rtx_max(mx, s[((nt * 4ull) + (h_1 * 2ull))]), s[(((nt * 4ull) + (h_1 * 2ull)) + 1ull)]);
      }
      mx = rtx_max(mx, rtx_shfl_xor(mx, 1u));
      mx = rtx_max(mx, rtx_shfl_xor(mx, 2u));
      A base = ((mx == (-rtx_inf<A>())) ? A(0.0) : (mx * scale2));
      alpha[h_1] = rtx_exp2(((row_max[h_1] * scale2) - base));
      row_max[h_1] = mx;
      A sum = A(0.0);
      #pragma unroll
      for (unsigned long long nt_1 = 0ull; nt_1 < 16ull; nt_1 += 1) {
        #pragma unroll
        for (unsigned long long e = 0ull; e < 2ull; e += 1) {
          A p = rtx_exp2(((s[(((nt_1 * 4ull) + (h_1 * 2ull)) + e)] * scale2) - base));
          s[(((nt_1 * 4ull) + (h_1 * 2ull)) + e)] = p;
          sum += p;
        }
      }
      row_sum[h_1] = ((row_sum[h_1] * alpha[h_1]) + sum);
    }
    #pragma unroll
    for (unsigned long long kk_1 = 0ull; kk_1 < 8ull; kk_1 += 1) {
      #pragma unroll
      for (unsigned long long r_2 = 0ull; r_2 < 4ull; r_2 += 1) {
        pf[((kk_1 * 4ull) + r_2)] = rtx_pack2<S>(s[((kk_1 * 8ull) + (2ull * r_2))], s[(((kk_1 * 8ull) + (2ull * r_2)) + 1ull)]);
      }
    }
    #pragma unroll
    for (unsigned long long x_1 = 0ull; x_1 < 64ull; x_1 += 1) {
      if (((8ull * (x_1 / 4ull)) < d)) {
        acc[x_1] *= alpha[((x_1 / 2ull) % 2ull)];
      }
    }
    rtx_wgmma_fence();
    #pragma unroll
    for (unsigned long long kk_2 = 0ull; kk_2 < 8ull; kk_2 += 1) {
      unsigned long long vw = ((v_at + kb) + (kk_2 * 512ull));
      if ((d == 128ull)) {
        { const unsigned long long rtx_db = rtx_wgmma_desc_mn((rtx_smem_addr(sm) + 4u * (unsigned int)(vw)), 4u * (unsigned int)(4096ull)); if (rtx_is_bf16<S>::value) { asm volatile("{ .reg .pred p; setp.ne.b32 p, %69, 0; wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, p, 1, 1, 1; }\n" : "+f"(acc[(0ull) + 0ull]), "+f"(acc[(0ull) + 1ull]), "+f"(acc[(0ull) + 2ull]), "+f"(acc[(0ull) + 3ull]), "+f"(acc[(0ull) + 4ull]), "+f"(acc[(0ull) + 5ull]), "+f"(acc[(0ull) + 6ull]), "+f"(acc[(0ull) + 7ull]), "+f"(acc[(0ull) + 8ull]), "+f"(acc[(0ull) + 9ull]), "+f"(acc[(0ull) + 10ull]), "+f"(acc[(0ull) + 11ull]), "+f"(acc[(0ull) + 12ull]), "+f"(acc[(0ull) + 13ull]), "+f"(acc[(0ull) + 14ull]), "+f"(acc[(0ull) + 15ull]), "+f"(acc[(0ull) + 16ull]), "+f"(acc[(0ull) + 17ull]), "+f"(acc[(0ull) + 18ull]), "+f"(acc[(0ull) + 19ull]), "+f"(acc[(0ull) + 20ull]), "+f"(acc[(0ull) + 21ull]), "+f"(acc[(0ull) + 22ull]), "+f"(acc[(0ull) + 23ull]), "+f"(acc[(0ull) + 24ull]), "+f"(acc[(0ull) + 25ull]), "+f"(acc[(0ull) + 26ull]), "+f"(acc[(0ull) + 27ull]), "+f"(acc[(0ull) + 28ull]), "+f"(acc[(0ull) + 29ull]), "+f"(acc[(0ull) + 30ull]), "+f"(acc[(0ull) + 31ull]), "+f"(acc[(0ull) + 32ull]), "+f"(acc[(0ull) + 33ull]), "+f"(acc[(0ull) + 34ull]), "+f"(acc[(0ull) + 35ull]), "+f"(acc[(0ull) + 36ull]), "+f"(acc[(0ull) + 37ull]), "+f"(acc[(0ull) + 38ull]), "+f"(acc[(0ull) + 39ull]), "+f"(acc[(0ull) + 40ull]), "+f"(acc[(0ull) + 41ull]), "+f"(acc[(0ull) + 42ull]), "+f"(acc[(0ull) + 43ull]), "+f"(acc[(0ull) + 44ull]), "+f"(acc[(0ull) + 45ull]), "+f"(acc[(0ull) + 46ull]), "+f"(acc[(0ull) + 47ull]), "+f"(acc[(0ull) + 48ull]), "+f"(acc[(0ull) + 49ull]), "+f"(acc[(0ull) + 50ull]), "+f"(acc[(0ull) + 51ull]), "+f"(acc[(0ull) + 52ull]), "+f"(acc[(0ull) + 53ull]), "+f"(acc[(0ull) + 54ull]), "+f"(acc[(0ull) + 55ull]), "+f"(acc[(0ull) + 56ull]), "+f"(acc[(0ull) + 57ull]), "+f"(acc[(0ull) + 58ull]), "+f"(acc[(0ull) + 59ull]), "+f"(acc[(0ull) + 60ull]), "+f"(acc[(0ull) + 61ull]), "+f"(acc[(0ull) + 62ull]), "+f"(acc[(0ull) + 63ull]) : "r"(pf[((kk_2 * 4ull)) + 0ull]), "r"(pf[((kk_2 * 4ull)) + 1ull]), "r"(pf[((kk_2 * 4ull)) + 2ull]), "r"(pf[((kk_2 * 4ull)) + 3ull]), "l"(rtx_db), "r"(1) : "memory"); } else { asm volatile("{ .reg .pred p; setp.ne.b32 p, %69, 0; wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, p, 1, 1, 1; }\n" : "+f"(acc[(0ull) + 0ull]), "+f"(acc[(0ull) + 1ull]), "+f"(acc[(0ull) + 2ull]), "+f"(acc[(0ull) + 3ull]), "+f"(acc[(0ull) + 4ull]), "+f"(acc[(0ull) + 5ull]), "+f"(acc[(0ull) + 6ull]), "+f"(acc[(0ull) + 7ull]), "+f"(acc[(0ull) + 8ull]), "+f"(acc[(0ull) + 9ull]), "+f"(acc[(0ull) + 10ull]), "+f"(acc[(0ull) + 11ull]), "+f"(acc[(0ull) + 12ull]), "+f"(acc[(0ull) + 13ull]), "+f"(acc[(0ull) + 14ull]), "+f"(acc[(0ull) + 15ull]), "+f"(acc[(0ull) + 16ull]), "+f"(acc[(0ull) + 17ull]), "+f"(acc[(0ull) + 18ull]), "+f"(acc[(0ull) + 19ull]), "+f"(acc[(0ull) + 20ull]), "+f"(acc[(0ull) + 21ull]), "+f"(acc[(0ull) + 22ull]), "+f"(acc[(0ull) + 23ull]), "+f"(acc[(0ull) + 24ull]), "+f"(acc[(0ull) + 25ull]), "+f"(acc[(0ull) + 26ull]), "+f"(acc[(0ull) + 27ull]), "+f"(acc[(0ull) + 28ull]), "+f"(acc[(0ull) + 29ull]), "+f"(acc[(0ull) + 30ull]), "+f"(acc[(0ull) + 31ull]), "+f"(acc[(0ull) + 32ull]), "+f"(acc[(0ull) + 33ull]), "+f"(acc[(0ull) + 34ull]), "+f"(acc[(0ull) + 35ull]), "+f"(acc[(0ull) + 36ull]), "+f"(acc[(0ull) + 37ull]), "+f"(acc[(0ull) + 38ull]), "+f"(acc[(0ull) + 39ull]), "+f"(acc[(0ull) + 40ull]), "+f"(acc[(0ull) + 41ull]), "+f"(acc[(0ull) + 42ull]), "+f"(acc[(0ull) + 43ull]), "+f"(acc[(0ull) + 44ull]), "+f"(acc[(0ull) + 45ull]), "+f"(acc[(0ull) + 46ull]), "+f"(acc[(0ull) + 47ull]), "+f"(acc[(0ull) + 48ull]), "+f"(acc[(0ull) + 49ull]), "+f"(acc[(0ull) + 50ull]), "+f"(acc[(0ull) + 51ull]), "+f"(acc[(0ull) + 52ull]), "+f"(acc[(0ull) + 53ull]), "+f"(acc[(0ull) + 54ull]), "+f"(acc[(0ull) + 55ull]), "+f"(acc[(0ull) + 56ull]), "+f"(acc[(0ull) + 57ull]), "+f"(acc[(0ull) + 58ull]), "+f"(acc[(0ull) + 59ull]), "+f"(acc[(0ull) + 60ull]), "+f"(acc[(0ull) + 61ull]), "+f"(acc[(0ull) + 62ull]), "+f"(acc[(0ull) + 63ull]) : "r"(pf[((kk_2 * 4ull)) + 0ull]), "r"(pf[((kk_2 * 4ull)) + 1ull]), "r"(pf[((kk_2 * 4ull)) + 2ull]), "r"(pf[((kk_2 * 4ull)) + 3ull]), "l"(rtx_db), "r"(1) : "memory"); } };
      } else {
        { const unsigned long long rtx_db = rtx_wgmma_desc_mn((rtx_smem_addr(sm) + 4u * (unsigned int)(vw)), 4u * (unsigned int)(4096ull)); if (rtx_is_bf16<S>::value) { asm volatile("{ .reg .pred p; setp.ne.b32 p, %37, 0; wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, p, 1, 1, 1; }\n" : "+f"(acc[(0ull) + 0ull]), "+f"(acc[(0ull) + 1ull]), "+f"(acc[(0ull) + 2ull]), "+f"(acc[(0ull) + 3ull]), "+f"(acc[(0ull) + 4ull]), "+f"(acc[(0ull) + 5ull]), "+f"(acc[(0ull) + 6ull]), "+f"(acc[(0ull) + 7ull]), "+f"(acc[(0ull) + 8ull]), "+f"(acc[(0ull) + 9ull]), "+f"(acc[(0ull) + 10ull]), "+f"(acc[(0ull) + 11ull]), "+f"(acc[(0ull) + 12ull]), "+f"(acc[(0ull) + 13ull]), "+f"(acc[(0ull) + 14ull]), "+f"(acc[(0ull) + 15ull]), "+f"(acc[(0ull) + 16ull]), "+f"(acc[(0ull) + 17ull]), "+f"(acc[(0ull) + 18ull]), "+f"(acc[(0ull) + 19ull]), "+f"(acc[(0ull) + 20ull]), "+f"(acc[(0ull) + 21ull]), "+f"(acc[(0ull) + 22ull]), "+f"(acc[(0ull) + 23ull]), "+f"(acc[(0ull) + 24ull]), "+f"(acc[(0ull) + 25ull]), "+f"(acc[(0ull) + 26ull]), "+f"(acc[(0ull) + 27ull]), "+f"(acc[(0ull) + 28ull]), "+f"(acc[(0ull) + 29ull]), "+f"(acc[(0ull) + 30ull]), "+f"(acc[(0ull) + 31ull]) : "r"(pf[((kk_2 * 4ull)) + 0ull]), "r"(pf[((kk_2 * 4ull)) + 1ull]), "r"(pf[((kk_2 * 4ull)) + 2ull]), "r"(pf[((kk_2 * 4ull)) + 3ull]), "l"(rtx_db), "r"(1) : "memory"); } else { asm volatile("{ .reg .pred p; setp.ne.b32 p, %37, 0; wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, p, 1, 1, 1; }\n" : "+f"(acc[(0ull) + 0ull]), "+f"(acc[(0ull) + 1ull]), "+f"(acc[(0ull) + 2ull]), "+f"(acc[(0ull) + 3ull]), "+f"(acc[(0ull) + 4ull]), "+f"(acc[(0ull) + 5ull]), "+f"(acc[(0ull) + 6ull]), "+f"(acc[(0ull) + 7ull]), "+f"(acc[(0ull) + 8ull]), "+f"(acc[(0ull) + 9ull]), "+f"(acc[(0ull) + 10ull]), "+f"(acc[(0ull) + 11ull]), "+f"(acc[(0ull) + 12ull]), "+f"(acc[(0ull) + 13ull]), "+f"(acc[(0ull) + 14ull]), "+f"(acc[(0ull) + 15ull]), "+f"(acc[(0ull) + 16ull]), "+f"(acc[(0ull) + 17ull]), "+f"(acc[(0ull) + 18ull]), "+f"(acc[(0ull) + 19ull]), "+f"(acc[(0ull) + 20ull]), "+f"(acc[(0ull) + 21ull]), "+f"(acc[(0ull) + 22ull]), "+f"(acc[(0ull) + 23ull]), "+f"(acc[(0ull) + 24ull]), "+f"(acc[(0ull) + 25ull]), "+f"(acc[(0ull) + 26ull]), "+f"(acc[(0ull) + 27ull]), "+f"(acc[(0ull) + 28ull]), "+f"(acc[(0ull) + 29ull]), "+f"(acc[(0ull) + 30ull]), "+f"(acc[(0ull) + 31ull]) : "r"(pf[((kk_2 * 4ull)) + 0ull]), "r"(pf[((kk_2 * 4ull)) + 1ull]), "r"(pf[((kk_2 * 4ull)) + 2ull]), "r"(pf[((kk_2 * 4ull)) + 3ull]), "l"(rtx_db), "r"(1) : "memory"); } };
      }
    }
    rtx_wgmma_commit();
    rtx_wgmma_wait<0>(acc);
    j += 1ull;
  }
  rtx_cp_async_wait<0>();
  unsigned long long o0 = ((n * ((unsigned long long)(os).strides[0ull])) + (hh * ((unsigned long long)(os).strides[1ull])));
  unsigned long long o_rs = ((unsigned long long)(os).strides[2ull]);
  #pragma unroll
  for (unsigned long long h_2 = 0ull; h_2 < 2ull; h_2 += 1) {
    A l = row_sum[h_2];
    l += rtx_shfl_xor(l, 1u);
    l += rtx_shfl_xor(l, 2u);
    unsigned long long row = (row0 + (h_2 * 8ull));
    A inv = ((l > A(0.0)) ? (A(1.0) / l) : A(0.0));
    if ((row < t_q)) {
      unsigned long long o_row = ((o0 + (row * o_rs)) + ((unsigned long long)((t4 * 2u))));
      #pragma unroll
      for (unsigned long long nt_2 = 0ull; nt_2 < 16ull; nt_2 += 1) {
        if (((nt_2 * 8ull) < d)) {
          A lo = (acc[((nt_2 * 4ull) + (h_2 * 2ull))] * inv);
          A hi = (acc[(((nt_2 * 4ull) + (h_2 * 2ull)) + 1ull)] * inv);
          rtx_store2<S>(o + ((o_row + (nt_2 * 8ull))), lo, hi);
        }
      }
      if ((t4 == 0u)) {
        lse[((b * t_q) + row)] = ((l > A(0.0)) ? ((row_max[h_2] * scale_1) + rtx_ln(l)) : (-rtx_inf<A>()));
      }
    }
  }
}

extern "C" __global__ void __launch_bounds__(256, 1) flash_attn_fwd_wgmma_f16(const rtx_f16* q, const rtx_f16* k, const rtx_f16* v, rtx_f16* o, float* lse, const unsigned int* key_len, rtx_strides qs, rtx_strides ks, rtx_strides os, unsigned long long batch, unsigned long long heads, unsigned long long t_q, unsigned long long t_k, unsigned long long d, double scale, unsigned int causal, unsigned int padded, unsigned long long warpgroups, unsigned long long stages) {
  RTX_ENTRY();
  flash_attn_fwd_wgmma_impl<rtx_f16, float>(q, k, v, o, lse, key_len, qs, ks, os, batch, heads, t_q, t_k, d, scale, causal, padded, warpgroups, stages);
}
extern "C" __global__ void __launch_bounds__(128, 3) flash_attn_fwd_wgmma_f16__d64_warpgroups1(const rtx_f16* q, const rtx_f16* k, const rtx_f16* v, rtx_f16* o, float* lse, const unsigned int* key_len, rtx_strides qs, rtx_strides ks, rtx_strides os, unsigned long long batch, unsigned long long heads, unsigned long long t_q, unsigned long long t_k, unsigned long long d, double scale, unsigned int causal, unsigned int padded, unsigned long long warpgroups, unsigned long long stages) {
  RTX_ENTRY();
  flash_attn_fwd_wgmma_impl<rtx_f16, float>(q, k, v, o, lse, key_len, qs, ks, os, batch, heads, t_q, t_k, 64ull, scale, causal, padded, 1ull, stages);
}
extern "C" __global__ void __launch_bounds__(256, 1) flash_attn_fwd_wgmma_f16__d64_warpgroups2(const rtx_f16* q, const rtx_f16* k, const rtx_f16* v, rtx_f16* o, float* lse, const unsigned int* key_len, rtx_strides qs, rtx_strides ks, rtx_strides os, unsigned long long batch, unsigned long long heads, unsigned long long t_q, unsigned long long t_k, unsigned long long d, double scale, unsigned int causal, unsigned int padded, unsigned long long warpgroups, unsigned long long stages) {
  RTX_ENTRY();
  flash_attn_fwd_wgmma_impl<rtx_f16, float>(q, k, v, o, lse, key_len, qs, ks, os, batch, heads, t_q, t_k, 64ull, scale, causal, padded, 2ull, stages);
}
extern "C" __global__ void __launch_bounds__(256, 1) flash_attn_fwd_wgmma_f16__d128_warpgroups1(const rtx_f16* q, const rtx_f16* k, const rtx_f16* v, rtx_f16* o, float* lse, const unsigned int* key_len, rtx_strides qs, rtx_strides ks, rtx_strides os, unsigned long long batch, unsigned long long heads, unsigned long long t_q, unsigned long long t_k, unsigned long long d, double scale, unsigned int causal, unsigned int padded, unsigned long long warpgroups, unsigned long long stages) {
  RTX_ENTRY();
  flash_attn_fwd_wgmma_impl<rtx_f16, float>(q, k, v, o, lse, key_len, qs, ks, os, batch, heads, t_q, t_k, 128ull, scale, causal, padded, 1ull, stages);
}
extern "C" __global__ void __launch_bounds__(256, 1) flash_attn_fwd_wgmma_f16__d128_warpgroups2(const rtx_f16* q, const rtx_f16* k, const rtx_f16* v, rtx_f16* o, float* lse, const unsigned int* key_len, rtx_strides qs, rtx_strides ks, rtx_strides os, unsigned long long batch, unsigned long long heads, unsigned long long t_q, unsigned long long t_k, unsigned long long d, double scale, unsigned int causal, unsigned int padded, unsigned long long warpgroups, unsigned long long stages) {
  RTX_ENTRY();
  flash_attn_fwd_wgmma_impl<rtx_f16, float>(q, k, v, o, lse, key_len, qs, ks, os, batch, heads, t_q, t_k, 128ull, scale, causal, padded, 2ull, stages);
}
extern "C" __global__ void __launch_bounds__(256, 1) flash_attn_fwd_wgmma_bf16(const rtx_bf16* q, const rtx_bf16* k, const rtx_bf16* v, rtx_bf16* o, float* lse, const unsigned int* key_len, rtx_strides qs, rtx_strides ks, rtx_strides os, unsigned long long batch, unsigned long long heads, unsigned long long t_q, unsigned long long t_k, unsigned long long d, double scale, unsigned int causal, unsigned int padded, unsigned long long warpgroups, unsigned long long stages) {
  RTX_ENTRY();
  flash_attn_fwd_wgmma_impl<rtx_bf16, float>(q, k, v, o, lse, key_len, qs, ks, os, batch, heads, t_q, t_k, d, scale, causal, padded, warpgroups, stages);
}
extern "C" __global__ void __launch_bounds__(128, 3) flash_attn_fwd_wgmma_bf16__d64_warpgroups1(const rtx_bf16* q, const rtx_bf16* k, const rtx_bf16* v, rtx_bf16* o, float* lse, const unsigned int* key_len, rtx_strides qs, rtx_strides ks, rtx_strides os, unsigned long long batch, unsigned long long heads, unsigned long long t_q, unsigned long long t_k, unsigned long long d, double scale, unsigned int causal, unsigned int padded, unsigned long long warpgroups, unsigned long long stages) {
  RTX_ENTRY();
  flash_attn_fwd_wgmma_impl<rtx_bf16, float>(q, k, v, o, lse, key_len, qs, ks, os, batch, heads, t_q, t_k, 64ull, scale, causal, padded, 1ull, stages);
}
extern "C" __global__ void __launch_bounds__(256, 1) flash_attn_fwd_wgmma_bf16__d64_warpgroups2(const rtx_bf16* q, const rtx_bf16* k, const rtx_bf16* v, rtx_bf16* o, float* lse, const unsigned int* key_len, rtx_strides qs, rtx_strides ks, rtx_strides os, unsigned long long batch, unsigned long long heads, unsigned long long t_q, unsigned long long t_k, unsigned long long d, double scale, unsigned int causal, unsigned int padded, unsigned long long warpgroups, unsigned long long stages) {
  RTX_ENTRY();
  flash_attn_fwd_wgmma_impl<rtx_bf16, float>(q, k, v, o, lse, key_len, qs, ks, os, batch, heads, t_q, t_k, 64ull, scale, causal, padded, 2ull, stages);
}
extern "C" __global__ void __launch_bounds__(256, 1) flash_attn_fwd_wgmma_bf16__d128_warpgroups1(const rtx_bf16* q, const rtx_bf16* k, const rtx_bf16* v, rtx_bf16* o, float* lse, const unsigned int* key_len, rtx_strides qs, rtx_strides ks, rtx_strides os, unsigned long long batch, unsigned long long heads, unsigned long long t_q, unsigned long long t_k, unsigned long long d, double scale, unsigned int causal, unsigned int padded, unsigned long long warpgroups, unsigned long long stages) {
  RTX_ENTRY();
  flash_attn_fwd_wgmma_impl<rtx_bf16, float>(q, k, v, o, lse, key_len, qs, ks, os, batch, heads, t_q, t_k, 128ull, scale, causal, padded, 1ull, stages);
}
extern "C" __global__ void __launch_bounds__(256, 1) flash_attn_fwd_wgmma_bf16__d128_warpgroups2(const rtx_bf16* q, const rtx_bf16* k, const rtx_bf16* v, rtx_bf16* o, float* lse, const unsigned int* key_len, rtx_strides qs, rtx_strides ks, rtx_strides os, unsigned long long batch, unsigned long long heads, unsigned long long t_q, unsigned long long t_k, unsigned long long d, double scale, unsigned int causal, unsigned int padded, unsigned long long warpgroups, unsigned long long stages) {
  RTX_ENTRY();
  flash_attn_fwd_wgmma_impl<rtx_bf16, float>(q, k, v, o, lse, key_len, qs, ks, os, batch, heads, t_q, t_k, 128ull, scale, causal, padded, 2ull, stages);
}
