#include "pasa/io/capture_folder.hpp"
#include "pasa/io/input_file.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "pasa/core/error.hpp"
#include "pasa/io/json_check.hpp"
#include "pasa/io/npy.hpp"
#include "pasa/numeric/format.hpp"
#include "pasa/numeric/round.hpp"

namespace pasa {
namespace {

namespace fs = std::filesystem;

std::string shape_str(const std::vector<std::size_t>& s) {
  std::string r = "(";
  for (std::size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + (s.size() == 1 ? ",)" : ")");
}

// InputErrors of f prefixed by `where` (when given).
template <class F>
auto at(const std::string& where, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const InputError& e) {
    if (where.empty()) throw;
    throw InputError(fmt::format("{}: {}", where, e.what()));
  }
}

// A layer's tensor file: a relative name inside the folder (no absolute path, no "..": a capture folder is
// moved and copied as a whole).
fs::path layer_file(const nlohmann::json& l, const char* key, const std::string& path, const fs::path& dir) {
  if (!l.contains(key)) json_fail(path, fmt::format("missing \"{}\" (the tensor's .npy file)", key));
  const std::string name = as_string(l.at(key), path + "/" + key);
  // A NUL would end the name the system opens early (another file), so control characters are refused.
  if (std::any_of(name.begin(), name.end(), [](char ch) { return static_cast<unsigned char>(ch) < 32 || ch == 127; }))
    json_fail(path + "/" + key, "the file name holds a control character");
  const fs::path f = name;
  if (f.empty() || f.is_absolute() || f.lexically_normal().string().starts_with(".."))
    json_fail(path + "/" + key, fmt::format("'{}' is not a file name inside the capture folder", f.string()));
  return (dir / f).lexically_normal();
}

void check_header(const fs::path& f, const std::vector<std::size_t>& want, const char* what) {
  const NpyArray h = read_npy_header(f);
  if (h.dtype != NpyDtype::f16 && h.dtype != NpyDtype::f32 && h.dtype != NpyDtype::f64)
    throw InputError(fmt::format("{}: {} dtype {} not accepted; a capture holds float16, float32 or float64 values",
                                 f.string(), what, npy_descr(h.dtype)));
  if (h.shape != want)
    throw InputError(fmt::format("{}: {} shape {} differs from the index's {}", f.string(), what, shape_str(h.shape),
                                 shape_str(want)));
}

CaptureLayer read_layer(const nlohmann::json& l, const std::string& path, const fs::path& dir) {
  require_object(l, path);
  check_keys(l, {"name", "q", "k", "v", "dtype", "shape", "scale", "causal"}, path);
  CaptureLayer c;
  read_string(l, "name", path, c.name);
  c.q = layer_file(l, "q", path, dir);
  c.k = layer_file(l, "k", path, dir);
  c.v = layer_file(l, "v", path, dir);
  if (!l.contains("dtype")) json_fail(path, "missing \"dtype\" (the model's: float16, bfloat16, float32, float64)");
  c.dtype = as_string(l.at("dtype"), path + "/dtype");
  at(json_where(path + "/dtype"), [&] { return capture_format_name(c.dtype); });
  if (!l.contains("shape")) json_fail(path, "missing \"shape\" {B, Nq, Nkv, Sq, Skv, D}");
  const std::string sp = path + "/shape";
  const nlohmann::json& s = l.at("shape");
  require_object(s, sp);
  check_keys(s, {"B", "Nq", "Nkv", "Sq", "Skv", "D"}, sp);
  for (const char* k : {"B", "Nq", "Nkv", "Sq", "Skv", "D"})
    if (!s.contains(k)) json_fail(sp, fmt::format("missing \"{}\"", k));
  read_size(s, "B", sp, c.B, 1);
  read_size(s, "Nq", sp, c.Nq, 1);
  read_size(s, "Nkv", sp, c.Nkv, 1);
  read_size(s, "Sq", sp, c.Sq, 1);
  read_size(s, "Skv", sp, c.Skv, 1);
  read_size(s, "D", sp, c.D, 1);
  if (c.Nq % c.Nkv != 0) json_fail(sp, fmt::format("Nq = {} is not a multiple of Nkv = {}", c.Nq, c.Nkv));
  if (!l.contains("scale")) json_fail(path, "missing \"scale\" (the model's softmax scale)");
  c.scale = as_number(l.at("scale"), path + "/scale");
  if (!(c.scale > 0)) json_fail(path + "/scale", fmt::format("must be > 0, got {}", c.scale));
  if (!l.contains("causal")) json_fail(path, "missing \"causal\"");
  c.causal = as_bool(l.at("causal"), path + "/causal");
  return c;
}

}  // namespace

std::string capture_format_name(const std::string& dtype) {
  if (dtype == "float16") return "fp16";
  if (dtype == "bfloat16") return "bf16";
  if (dtype == "float32") return "fp32";
  if (dtype == "float64") return "fp64";
  throw InputError(fmt::format("dtype '{}' unknown; expected float16, bfloat16, float32 or float64", dtype));
}

CaptureIndex read_capture_index(const fs::path& dir, const std::string& where) {
  return at(where, [&] {
    const fs::path file = dir / "index.json";
    if (!fs::is_directory(dir)) throw InputError(fmt::format("{}: no such capture folder", dir.string()));
    if (!fs::exists(file))
      throw InputError(fmt::format("{}: no index.json (not a capture folder written by pasa_capture)", dir.string()));
    const nlohmann::json j = read_json_file(file);
    const std::string root = file.string() + ":";
    require_object(j, root);
    check_keys(j, {"pasa_capture", "model", "layers", "torch_version", "notes", "created_by"}, root);
    if (!j.contains("pasa_capture")) json_fail(root, "missing \"pasa_capture\" (the index version)");
    if (as_integer(j.at("pasa_capture"), root + "/pasa_capture") != kCaptureVersion)
      json_fail(root + "/pasa_capture", fmt::format("version {} unknown; this pasa reads version {}",
                                                    j.at("pasa_capture").dump(), kCaptureVersion));
    CaptureIndex idx;
    idx.dir = dir;
    read_string(j, "model", root, idx.model);
    if (!j.contains("layers") || !j.at("layers").is_array() || j.at("layers").empty())
      json_fail(root + "/layers", "expected a non-empty array of layers");
    const nlohmann::json& layers = j.at("layers");
    for (std::size_t i = 0; i < layers.size(); ++i) {
      const std::string lp = fmt::format("{}/layers/{}", root, i);
      CaptureLayer c = read_layer(layers[i], lp, dir);
      at(json_where(lp), [&] {  // the data files' headers, before any data are read
        check_header(c.q, {c.B, c.Nq, c.Sq, c.D}, "q");
        check_header(c.k, {c.B, c.Nkv, c.Skv, c.D}, "k");
        check_header(c.v, {c.B, c.Nkv, c.Skv, c.D}, "v");
        return 0;
      });
      idx.layers.push_back(std::move(c));
    }
    return idx;
  });
}

CapturedQKV load_capture(const CaptureIndex& idx, const CaptureSelection& sel, const std::string& format,
                         const std::string& where) {
  return at(where, [&] {
    if (sel.layer >= idx.layers.size())
      throw InputError(fmt::format("layer {} does not exist: {} holds layers 0 to {}", sel.layer, idx.dir.string(),
                                   idx.layers.size() - 1));
    if (sel.head && sel.kv_head) throw InputError("give \"head\" or \"kv_head\", not both");
    const CaptureLayer& l = idx.layers[sel.layer];
    const std::size_t group = l.Nq / l.Nkv;
    if (sel.head && *sel.head >= l.Nq)
      throw InputError(fmt::format("head {} does not exist: layer {} has Nq = {} query heads", *sel.head, sel.layer, l.Nq));
    if (sel.kv_head && *sel.kv_head >= l.Nkv)
      throw InputError(fmt::format("kv_head {} does not exist: layer {} has Nkv = {} KV heads", *sel.kv_head,
                                   sel.layer, l.Nkv));
    CapturedQKV out;
    out.format = format.empty() ? capture_format_name(l.dtype) : format;
    const Format fmt = format_by_name(out.format);
    out.scale = l.scale;
    out.causal = l.causal;
    // The query heads [q0, q0 + nq) and KV heads [k0, k0 + nkv) taken.
    std::size_t q0 = 0, nq = l.Nq, k0 = 0, nkv = l.Nkv;
    if (sel.head) q0 = *sel.head, nq = 1, k0 = *sel.head / group, nkv = 1;
    if (sel.kv_head) k0 = *sel.kv_head, nkv = 1, q0 = *sel.kv_head * group, nq = group;
    RoundOptions ro;
    ro.overflow = Overflow::saturate;  // as the generators store their draws (inputs stay finite)
    // Only the selected heads' bytes are read (a sweep over (layer, head) reads each head, not each layer,
    // per problem): the data follow the header to the file's end (read_npy_header checked their length).
    auto take = [&](const fs::path& f, std::size_t N, std::size_t S, std::size_t h0, std::size_t nh, const char* what) {
      check_header(f, {l.B, N, S, l.D}, what);  // the file may have changed since the index was read
      const NpyArray h = read_npy_header(f);
      const std::size_t item = npy_itemsize(h.dtype), plane = S * l.D;
      const std::size_t offset = fs::file_size(f) - l.B * N * plane * item;
      std::ifstream in = open_input_file(f);
      Tensor t({l.B, nh, S, l.D}, fmt);
      std::vector<unsigned char> bytes(nh * plane * item);
      for (std::size_t b = 0; b < l.B; ++b) {
        in.seekg(static_cast<std::streamoff>(offset + (b * N + h0) * plane * item));
        in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
        if (!in) throw InputError(fmt::format("{}: read failed (the file changed while it was read?)", f.string()));
        const std::vector<double> vals = npy_values(h.dtype, bytes, nh * plane);
        for (std::size_t e = 0; e < vals.size(); ++e)
          if (!std::isfinite(vals[e]))
            throw InputError(fmt::format("{}: {} element (b={}, head={}, s={}, d={}) is {}", f.string(), what, b,
                                         h0 + e / plane, e % plane / l.D, e % l.D, vals[e]));
        round_span(vals, std::span<double>(t.head(b, 0), nh * plane), fmt, ro);
      }
      return t;
    };
    out.q = take(l.q, l.Nq, l.Sq, q0, nq, "q");
    out.k = take(l.k, l.Nkv, l.Skv, k0, nkv, "k");
    out.v = take(l.v, l.Nkv, l.Skv, k0, nkv, "v");
    return out;
  });
}

}  // namespace pasa
