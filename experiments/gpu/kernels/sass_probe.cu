// sass_probe.cu: what the CUDA math functions that attention kernels use compile to (read with
// cuobjdump -sass; mufu_probe.py compiles this file with the default flags, with -ftz=true and with
// --use_fast_math, the flags FlashAttention-2/3 build with). One function per kernel, no other arithmetic.
#include <math.h>

extern "C" __global__ void k_expf(const float* x, float* y) { int i = threadIdx.x; y[i] = expf(x[i]); }
extern "C" __global__ void k_fast_expf(const float* x, float* y) { int i = threadIdx.x; y[i] = __expf(x[i]); }
extern "C" __global__ void k_exp2f(const float* x, float* y) { int i = threadIdx.x; y[i] = exp2f(x[i]); }
extern "C" __global__ void k_ptx_ex2_ftz(const float* x, float* y) {
  int i = threadIdx.x;
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x[i]));
  y[i] = r;
}
extern "C" __global__ void k_ptx_ex2(const float* x, float* y) {
  int i = threadIdx.x;
  float r;
  asm("ex2.approx.f32 %0, %1;" : "=f"(r) : "f"(x[i]));
  y[i] = r;
}
// FlashAttention-2 softmax.h scale_apply_exp2: max_scaled = max * scale (scale = softmax_scale * log2(e)),
// p = exp2f(s * scale - max_scaled): meant to become one FFMA and one MUFU.EX2.
extern "C" __global__ void k_fa2_exp2(const float* s, const float* mx, float scale, float* p) {
  int i = threadIdx.x;
  const float m = mx[i >> 4];
  const float max_scaled = m == -INFINITY ? 0.f : m * scale;
  p[i] = exp2f(s[i] * scale - max_scaled);
}
// FlashAttention-2 rescale of the running sum and output: exp2f((m_prev - m_new) * scale)
extern "C" __global__ void k_fa2_rescale(const float* mprev, const float* mnew, float scale, float* r) {
  int i = threadIdx.x;
  r[i] = exp2f((mprev[i] - mnew[i]) * scale);
}
// the same written with expf on natural-log scores (what a port without the log2 trick gives)
extern "C" __global__ void k_expf_sub(const float* s, const float* mx, float scale, float* p) {
  int i = threadIdx.x;
  p[i] = expf(s[i] * scale - mx[i >> 4] * scale);
}
// the final normalisation: 1/l then multiply (FA2: inv_sum = 1.f / sum), and a plain division
extern "C" __global__ void k_inv(const float* l, float* r) { int i = threadIdx.x; r[i] = 1.f / l[i]; }
extern "C" __global__ void k_div(const float* o, const float* l, float* r) { int i = threadIdx.x; r[i] = o[i] / l[i]; }
extern "C" __global__ void k_ptx_rcp_ftz(const float* x, float* y) {
  int i = threadIdx.x;
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x[i]));
  y[i] = r;
}
extern "C" __global__ void k_logf(const float* x, float* y) { int i = threadIdx.x; y[i] = logf(x[i]); }
extern "C" __global__ void k_fast_logf(const float* x, float* y) { int i = threadIdx.x; y[i] = __logf(x[i]); }
