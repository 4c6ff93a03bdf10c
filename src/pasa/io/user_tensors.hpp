// The decode inputs a user brings ([IFA]'s pse and atten_mask, and the per-batch kv_len) from .npy files or
// arrays in memory (the Python module's numpy arrays), checked against the problem's dimensions before any
// data are read. One reader for every front end (problem JSON, pasa-attn options, Python arguments), so a
// tensor means the same everywhere.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "pasa/inputs/tensor.hpp"
#include "pasa/io/npy.hpp"

namespace pasa {

// The dimensions the tensors must match.
struct UserTensorDims {
  std::size_t B = 1, Nq = 1, Sq = 1, Skv = 1;
};

// pse: float16/32/64 values of shape (B or 1, Nq, Sq, Skv), taken exactly (no rounding: store them on a
// format's grid to model an fp16 pse); returned as the Tensor AttentionInputs::pse holds (D = Skv).
Tensor pse_from_array(NpyDtype, const std::vector<std::size_t>& shape, std::span<const unsigned char> bytes,
                      const UserTensorDims&, const std::string& where);
// The select mask (1 = the score is replaced by select_value): bool (or uint8/int 0/1) of shape (B, Sq, Skv),
// or (B, Nq, Sq, Skv) when every head has the same mask (pasa's select mask is one per (b, i, j), as [IFA]'s
// atten_mask; heads that differ are refused, naming the first difference). Returns the (B, Sq, Skv) flags.
std::vector<std::uint8_t> select_from_array(NpyDtype, const std::vector<std::size_t>& shape,
                                            std::span<const unsigned char> bytes, const UserTensorDims&,
                                            const std::string& where);
// kv_len: integers of shape (B,), each in [0, Skv].
std::vector<std::size_t> kv_len_from_array(NpyDtype, const std::vector<std::size_t>& shape,
                                           std::span<const unsigned char> bytes, const UserTensorDims&,
                                           const std::string& where);

// The same from .npy files: the header (dtype and shape) is checked first, then the data are read. Errors
// (InputError) start with `where` (e.g. "decode.json: /pse/npy") and name the file.
Tensor load_pse_npy(const std::filesystem::path&, const UserTensorDims&, const std::string& where);
std::vector<std::uint8_t> load_select_npy(const std::filesystem::path&, const UserTensorDims&, const std::string& where);
std::vector<std::size_t> load_kv_len_npy(const std::filesystem::path&, const UserTensorDims&, const std::string& where);

}  // namespace pasa
