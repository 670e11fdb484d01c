// Host stand-ins for the CUDA built-ins the generated kernels use, so a host C++ compiler can
// check their syntax and types (cuda_syntax.rs). Semantics do not matter here; signatures do.
#include <math.h>
#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static
// Dynamic shared memory (`extern __shared__` on a GPU, which `static` above would contradict).
#define RTX_DYN_SHARED extern
#define __launch_bounds__(threads, blocks)
#define __align__(n) alignas(n)
#define __grid_constant__
struct rtx_stub_dim3 { unsigned int x, y, z; };
extern rtx_stub_dim3 threadIdx, blockIdx, blockDim, gridDim;
inline void __syncthreads() {}
inline void __threadfence() {}
inline float __shfl_down_sync(unsigned, float v, unsigned) { return v; }
inline int __shfl_down_sync(unsigned, int v, unsigned) { return v; }
inline unsigned __shfl_down_sync(unsigned, unsigned v, unsigned) { return v; }
inline float __shfl_xor_sync(unsigned, float v, int) { return v; }
inline int __shfl_xor_sync(unsigned, int v, int) { return v; }
inline unsigned __shfl_xor_sync(unsigned, unsigned v, int) { return v; }
inline float atomicAdd(float* p, float v) { float o = *p; *p += v; return o; }
inline double atomicAdd(double* p, double v) { double o = *p; *p += v; return o; }
inline int atomicAdd(int* p, int v) { int o = *p; *p += v; return o; }
inline unsigned atomicAdd(unsigned* p, unsigned v) { unsigned o = *p; *p += v; return o; }
inline unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) { unsigned long long o = *p; *p += v; return o; }
inline unsigned atomicCAS(unsigned* p, unsigned c, unsigned v) { unsigned o = *p; if (o == c) *p = v; return o; }
inline unsigned int __umulhi(unsigned int a, unsigned int b) { return (unsigned int)(((unsigned long long)a * b) >> 32); }
inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) { return (unsigned long long)(((unsigned __int128)a * b) >> 64); }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dsub_rn(double a, double b) { return a - b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __ddiv_rn(double a, double b) { return a / b; }
