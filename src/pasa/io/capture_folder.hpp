// A capture folder: the Q, K and V a real model fed its attention, as python/pasa_capture.py writes them:
// index.json and, per layer, three .npy files. The problem JSON's
// {"capture": {"dir", "layer", "head"}} (io/problem_json.hpp) reads one layer (and head) of it, so sweeps run
// over (layer, head) as grid axes.
//
// index.json:
//   {"pasa_capture": 1, "model": "name", "layers": [
//     {"name": "blocks.0.attn", "q": "layer000_q.npy", "k": "layer000_k.npy", "v": "layer000_v.npy",
//      "dtype": "float32", "shape": {"B", "Nq", "Nkv", "Sq", "Skv", "D"}, "scale": 0.125, "causal": true}, ...]}
// q is (B, Nq, Sq, D), k and v (B, Nkv, Skv, D) (GQA: query head h reads KV head h / (Nq / Nkv)), after
// RoPE; the .npy files hold float16/32/64 values; dtype is the model's (float16, bfloat16, float32, float64),
// the problem's default storage format. Optional top-level keys: "torch_version", "notes", "created_by".
#pragma once

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "pasa/inputs/tensor.hpp"

namespace pasa {

inline constexpr int kCaptureVersion = 1;

struct CaptureLayer {
  std::string name;             // the module that computed it ("" when unknown)
  std::filesystem::path q, k, v;  // resolved against the folder
  std::string dtype;            // float16, bfloat16, float32 or float64
  std::size_t B = 1, Nq = 1, Nkv = 1, Sq = 1, Skv = 1, D = 1;
  double scale = 0;             // the model's softmax scale (finite, > 0)
  bool causal = false;          // aligned to the end (pasa's Mask::causal); the capture refuses Sq != Skv
};

struct CaptureIndex {
  std::filesystem::path dir;
  std::string model;
  std::vector<CaptureLayer> layers;
};

// Reads and checks <dir>/index.json (keys, types, shapes: Nq a multiple of Nkv, no zeros) and every layer's
// .npy headers (float dtype, the shape the index gives) without reading their data. InputErrors start with
// `where` (e.g. "run.json: /capture/dir") and name the file and JSON pointer ("cap/index.json:/layers/1/scale").
CaptureIndex read_capture_index(const std::filesystem::path& dir, const std::string& where);

// Which part of a layer a problem takes. No head: every head (Nq, Nkv as captured). head h: query head h
// and its KV head h / group (Nq = Nkv = 1). kv_head g: the query heads of KV head g (Nq = group, Nkv = 1,
// so GQA's sharing stays).
struct CaptureSelection {
  std::size_t layer = 0;
  std::optional<std::size_t> head, kv_head;
};

// The storage format named by a capture dtype: float16 -> fp16, bfloat16 -> bf16, float32 -> fp32, float64 -> fp64.
std::string capture_format_name(const std::string& dtype);

struct CapturedQKV {
  Tensor q, k, v;   // the selected heads, values rounded (to nearest even, saturating) to `format`
  double scale = 0;
  bool causal = false;
  std::string format;
};
// Reads the selected layer's .npy data. format: the storage format of the problem ("" = the layer's dtype).
// Out-of-range layer or head indices and non-finite values are InputErrors starting with `where`.
CapturedQKV load_capture(const CaptureIndex&, const CaptureSelection&, const std::string& format,
                         const std::string& where);

}  // namespace pasa
