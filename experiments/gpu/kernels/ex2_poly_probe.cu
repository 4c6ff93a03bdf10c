// ex2_poly_probe.cu: FlashAttention-4's software exp2 (flash_attn/cute/utils.py ex2_emulation, POLY_EX2[3],
// Dao-AILab/flash-attention 0251105a) as the PTX it emits, on every float32 bit pattern, so that the CPU model
// (pasa::gpu::ex2_poly3) is checked against a GPU rather than against its own reading of the source.
// The instructions are those of the kernel's scalar path (add_round_down is add.rm.ftz.f32; the packed f32x2
// forms of sm100 are the same IEEE operations two at a time; combine_int_frac_ex2 is shl.b32 + add.s32).
#include <stdint.h>

extern "C" __global__ void ex2_poly3_all(uint32_t base, uint32_t n, uint32_t* out) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float x = __uint_as_float(base + i);
  float y;
  asm("{\n\t"
      ".reg .f32 xc, r, back, f, p;\n\t"
      ".reg .s32 ri, pi, e, o;\n\t"
      "max.f32 xc, %1, 0fC2FE0000;\n\t"         // fmax(x, -127)
      "add.rm.ftz.f32 r, xc, 0f4B400000;\n\t"  // + (2^23 + 2^22), toward -inf
      "sub.rn.f32 back, r, 0f4B400000;\n\t"
      "sub.rn.f32 f, xc, back;\n\t"
      "fma.rn.f32 p, 0f3D9DF09D, f, 0f3E6906A4;\n\t"  // c3 = 0.077119089663028717041015625, c2
      "fma.rn.f32 p, p, f, 0f3F31F519;\n\t"          // c1 = 0.695146143436431884765625
      "fma.rn.f32 p, p, f, 0f3F800000;\n\t"          // + 1
      "mov.b32 ri, r;\n\t"
      "mov.b32 pi, p;\n\t"
      "shl.b32 e, ri, 23;\n\t"
      "add.s32 o, e, pi;\n\t"
      "mov.b32 %0, o;\n\t"
      "}"
      : "=f"(y)
      : "f"(x));
  out[i] = __float_as_uint(y);
}
