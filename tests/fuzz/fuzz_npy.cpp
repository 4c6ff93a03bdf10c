// libFuzzer target: the .npy reader (header parser, shape and size checks) and the decoding of its data
// into an attention tensor. Any exception other than InputError, any sanitizer report, hang or memory blow-up
// is a finding (docs/building-and-testing.md "Fuzzing").
#include <cstddef>
#include <cstdint>
#include <span>

#include "pasa/core/error.hpp"
#include "pasa/io/npy.hpp"
#include "pasa/io/tensor_io.hpp"
#include "pasa/numeric/format.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const pasa::NpyArray a = pasa::parse_npy(std::span<const unsigned char>(data, size), "fuzz.npy");
    // Bit patterns need a format of their width; float data may also be rounded to one.
    const pasa::Format bits = pasa::format_by_name(a.dtype == pasa::NpyDtype::u8 ? "fp8_e4m3fn" : "bf16");
    const bool is_bits = a.dtype == pasa::NpyDtype::u8 || a.dtype == pasa::NpyDtype::u16;
    (void)pasa::tensor_from_npy(a, is_bits ? &bits : nullptr, "fuzz.npy");
    if (!is_bits) (void)pasa::tensor_from_npy(a, &bits, "fuzz.npy");
  } catch (const pasa::InputError&) {
  }
  return 0;
}
