#include "pasa/numeric/gpu_math.hpp"

#include <zlib.h>

#include <algorithm>
#include <bit>
#include <cfenv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

// The tables, measured on an H200 (experiments/gpu/kernels/mufu_probe.py, lg2_probe.cu; packed by
// pack_mufu_tables.py, which checks each against the probe's sha256): four zlib streams of
// 2^23 little-endian uint32 differences (the first entry, then each entry minus the one before, mod 2^32),
// "PASAMUFU" then per table a 4-byte name and the stream's length. Embedded at build time (CMake defines
// PASA_MUFU_TABLES as the file's path), so that no installed program needs a data file at run time.
asm(".pushsection .rodata\n"
    ".balign 16\n"
    ".globl pasa_mufu_tables_begin\n.hidden pasa_mufu_tables_begin\n"
    ".globl pasa_mufu_tables_end\n.hidden pasa_mufu_tables_end\n"
    "pasa_mufu_tables_begin:\n"
    ".incbin \"" PASA_MUFU_TABLES "\"\n"
    "pasa_mufu_tables_end:\n"
    ".popsection\n");
extern "C" __attribute__((visibility("hidden"))) const unsigned char pasa_mufu_tables_begin[];
extern "C" __attribute__((visibility("hidden"))) const unsigned char pasa_mufu_tables_end[];

namespace pasa::gpu {

namespace {

constexpr std::size_t kEntries = std::size_t{1} << 23;

struct Table {
  std::once_flag once;
  std::vector<std::uint32_t> v;
};

// Table `name` of the embedded file, decompressed on first use (32 MiB each).
const std::vector<std::uint32_t>& table(const char* name) {
  static Table ex2p, ex2n, lg2m, rcpm;
  Table& t = std::strcmp(name, "EX2P") == 0   ? ex2p
             : std::strcmp(name, "EX2N") == 0 ? ex2n
             : std::strcmp(name, "RCPM") == 0 ? rcpm
                                              : lg2m;
  std::call_once(t.once, [&] {
    const unsigned char* p = pasa_mufu_tables_begin;
    const unsigned char* end = pasa_mufu_tables_end;
    if (end - p < 8 || std::memcmp(p, "PASAMUFU", 8) != 0) throw std::logic_error("gpu_math: bad embedded tables");
    p += 8;
    while (end - p >= 8) {
      std::uint32_t len = 0;
      std::memcpy(&len, p + 4, 4);
      if (std::memcmp(p, name, 4) == 0) {
        t.v.resize(kEntries);
        uLongf out = kEntries * 4;
        if (uncompress(reinterpret_cast<Bytef*>(t.v.data()), &out, p + 8, len) != Z_OK || out != kEntries * 4)
          throw std::logic_error(std::string("gpu_math: cannot inflate table ") + name);
        for (std::size_t i = 1; i < kEntries; ++i) t.v[i] += t.v[i - 1];  // (mod 2^32, as written)
        return;
      }
      p += 8 + len;
    }
    throw std::logic_error(std::string("gpu_math: no table ") + name);
  });
  return t.v;
}

inline std::uint32_t bits(float x) { return std::bit_cast<std::uint32_t>(x); }
inline float from_bits(std::uint32_t b) { return std::bit_cast<float>(b); }

}  // namespace

float ex2_approx_ftz(float x) {
  if (std::isnan(x)) return from_bits(0x7fffffff);  // (the canonical NaN the unit returns)
  const std::uint32_t b = bits(x);
  if ((b & 0x7f800000u) == 0) return 1.0f;  // ±0 and subnormals (flushed to zero first)
  if (x >= 128.0f) return std::numeric_limits<float>::infinity();
  if (x < -126.0f) return 0.0f;  // (2^-126 and above: the table gives it; below flushed, ftz)
  // |x| = n + f with f's 23 leading fraction bits (the exact product by 2^23, cut toward zero).
  const double a = std::fabs(static_cast<double>(x));
  const double n = std::floor(a);
  const auto f = static_cast<std::size_t>((a - n) * 8388608.0);
  const int e = static_cast<int>(n);
  const std::uint32_t t = x < 0 ? table("EX2N")[f] : table("EX2P")[f];
  const float r = std::ldexp(from_bits(t), x < 0 ? -e : e);
  return r < 0x1p-126f ? 0.0f : r;  // a subnormal result is flushed
}

float rcp_approx_ftz(float x) {
  if (std::isnan(x)) return from_bits(0x7fffffff);
  const std::uint32_t b = bits(x), sign = b & 0x80000000u;
  if (std::isinf(x)) return from_bits(sign);                      // ±inf → ±0
  if ((b & 0x7f800000u) == 0) return from_bits(sign | 0x7f800000u);  // ±0, subnormals (flushed) → ±inf
  const int E = static_cast<int>((b >> 23) & 0xffu) - 127;
  const std::uint32_t r = table("RCPM")[b & 0x7fffffu];  // rcp(1.m) in (0.5, 1]
  const int e = static_cast<int>(r >> 23) - E;              // the result's biased exponent
  if (e <= 0) return from_bits(sign);                       // below 2^-126: flushed
  return from_bits(sign | (r - static_cast<std::uint32_t>(E) * 0x800000u));
}

float ex2_poly3(float x) {
  constexpr float kRound = 12582912.0f;  // 2^23 + 2^22: adding it leaves floor(x) in the low bits (ulp 1)
  const float xc = std::isnan(x) ? -127.0f : std::max(x, -127.0f);  // max.f32: a NaN operand gives the other
  // add.rm.ftz: the input flushed, then the exact sum t = s + e (Fast2Sum: |kRound| >= |x|) toward −inf.
  const double xf = (bits(xc) & 0x7f800000u) == 0 ? 0.0 : static_cast<double>(xc);
  const double s = xf + static_cast<double>(kRound), e = xf - (s - static_cast<double>(kRound));
  float r = static_cast<float>(s);
  if (static_cast<double>(r) > s || (static_cast<double>(r) == s && e < 0))
    r = std::nextafter(r, -std::numeric_limits<float>::infinity());
  const float back = r - kRound;
  const float f = xc - back;
  const float p = std::fma(std::fma(std::fma(0.077119089663028717041015625f, f, 0.227564394474029541015625f), f,
                                    0.695146143436431884765625f),
                           f, 1.0f);
  // (a NaN from the GPU's FFMA is the canonical 0x7fffffff: only x = +inf, outside the kernel's x <= 127, gets one)
  const std::uint32_t pb = std::isnan(p) ? 0x7fffffffu : bits(p);
  return from_bits(pb + (bits(r) << 23));  // (mod 2^32, as add.s32)
}

float lg2_approx_ftz(float x) {
  if (std::isnan(x)) return from_bits(0x7fffffff);
  if (x == std::numeric_limits<float>::infinity()) return x;
  if (!(x >= 1.0f)) throw std::domain_error("gpu_math: lg2.approx is modelled for x >= 1 only (measured there)");
  const std::uint32_t b = bits(x);
  const int e = static_cast<int>(b >> 23) - 127;
  const float L = from_bits(table("LG2M")[b & 0x7fffffu]);
  // RZ(e + L) to float: the exact sum in double (both fit), then toward zero (positive here).
  const double s = static_cast<double>(e) + static_cast<double>(L);
  float r = static_cast<float>(s);
  if (static_cast<double>(r) > s) r = std::nextafter(r, 0.0f);
  return r;
}

float exp2f(float x) {
  // results/hardware/kernels/sass.txt, k_exp2f: FSETP.GEU x, -126; @!P0 FMUL x, 0.5; MUFU.EX2; @!P0 FMUL r, r.
  if (x < -126.0f) {
    const float r = ex2_approx_ftz(x * 0.5f);
    return r * r;
  }
  return ex2_approx_ftz(x);
}

float fma_rm(float a, float b, float c) {
  // The exact a·b + c in double (two floats' product is exact; the sum is exact too when the exponents are
  // close, as in expf's use with a saturated t in [0, 1]), then rounded toward −inf to float.
  const double s = static_cast<double>(a) * static_cast<double>(b) + static_cast<double>(c);
  float r = static_cast<float>(s);
  if (static_cast<double>(r) > s) r = std::nextafter(r, -std::numeric_limits<float>::infinity());
  return r;
}

float expf(float x) {
  // The PTX of k_expf (sass.txt): t = sat(fma(x, 0x3BBB989D, 0.5)); j = fma.rm(t, 252, 0x4B400001);
  // r = fma(x, log2e_lo, fma(x, log2e, −(j + 0xCB40007F))); result = ex2(r) · float(bits(j) << 23).
  const float t = std::clamp(std::fma(x, from_bits(0x3BBB989Du), 0.5f), 0.0f, 1.0f);
  const float j = fma_rm(t, from_bits(0x437C0000u), from_bits(0x4B400001u));
  const float k = j + from_bits(0xCB40007Fu);
  const float r = std::fma(x, from_bits(0x32A57060u), std::fma(x, from_bits(0x3FB8AA3Bu), -k));
  return ex2_approx_ftz(r) * from_bits(bits(j) << 23);
}

float logf(float x) {
  // The PTX of k_logf (sass.txt), step by step.
  const bool small = x < from_bits(0x00800000u);
  const float f1 = small ? x * from_bits(0x4B000000u) : x;
  const float f7 = small ? from_bits(0xC1B80000u) : 0.0f;
  // (the PTX's 32-bit integer arithmetic, modulo 2^32: unsigned here, so that no input overflows a signed int)
  const std::uint32_t r2 = bits(f1);
  const std::uint32_t r4 = (r2 - 1059760811u) & 0xff800000u;
  const float f8 = from_bits(r2 - r4);
  const float f9 = static_cast<float>(static_cast<std::int32_t>(r4));  // cvt.rn.f32.s32
  const float f11 = std::fma(f9, from_bits(0x34000000u), f7);
  const float f12 = f8 + from_bits(0xBF800000u);
  float acc = std::fma(from_bits(0xBE055027u), f12, from_bits(0x3E1039F6u));
  for (std::uint32_t k : {0xBDF8CDCCu, 0x3E0F2955u, 0xBE2AD8B9u, 0x3E4CED0Bu, 0xBE7FFF22u, 0x3EAAAA78u, 0xBF000000u})
    acc = std::fma(acc, f12, from_bits(k));
  const float f30 = f12 * acc;
  const float f31 = std::fma(f30, f12, f12);
  float r = std::fma(f11, from_bits(0x3F317218u), f31);
  if (r2 >= 2139095040u)  // inf, NaN, negative: IEEE's answer
    r = std::fma(f1, std::numeric_limits<float>::infinity(), std::numeric_limits<float>::infinity());
  return f1 == 0.0f ? -std::numeric_limits<float>::infinity() : r;
}

float fast_logf(float x) {
  // sass.txt k_fast_logf: |x| < FLT_MIN: x·2^24 and −24 after; MUFU.LG2; FMUL by ln2 (0x3F317218).
  return lg2_approx_ftz(x) * from_bits(0x3F317218u);
}

}  // namespace pasa::gpu
