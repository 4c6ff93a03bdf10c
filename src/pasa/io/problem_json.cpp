// A ProblemSpec read from and written to JSON through the one JSON reader (json_check.hpp), so errors
// name the JSON path and suggest the nearest key.
#include "pasa/io/problem_json.hpp"

#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "pasa/core/error.hpp"
#include "pasa/io/capture_folder.hpp"
#include "pasa/io/json_check.hpp"
#include "pasa/io/user_tensors.hpp"

namespace pasa {
namespace {

const std::vector<std::string> kGenKeys = {"kind", "x0", "am", "p", "wavelength", "phase_deg", "seq_bias", "noise"};

void read_gen(const nlohmann::json& j, const std::string& path, TensorGen& g) {
  check_keys(j, kGenKeys, path);
  if (j.contains("kind")) g.kind = as_named(j.at("kind"), path + "/kind", gen_kind_by_name);
  read_number(j, "x0", path, g.x0);
  read_number(j, "am", path, g.am);
  read_number(j, "p", path, g.p);
  read_number(j, "wavelength", path, g.wavelength);
  read_number(j, "phase_deg", path, g.phase_deg);
  read_number(j, "seq_bias", path, g.seq_bias);
  read_number(j, "noise", path, g.noise);
}

// A file name (a JSON string), resolved against base_dir when relative.
std::string resolved(const nlohmann::json& v, const std::string& path, const std::filesystem::path& base_dir) {
  const std::filesystem::path f = as_string(v, path);
  if (f.empty()) json_fail(path, "empty file name");
  return (f.is_relative() && !base_dir.empty() ? base_dir / f : f).lexically_normal().string();
}

// {"npy": "file.npy"} (the only key): the file's path, resolved against base_dir when relative.
bool npy_ref(const nlohmann::json& j, const std::string& path, const std::filesystem::path& base_dir,
             std::string& file) {
  if (!j.is_object() || !j.contains("npy")) return false;
  check_keys(j, {"npy"}, path);
  file = resolved(j.at("npy"), path + "/npy", base_dir);
  return true;
}

// {"capture": {"dir", "layer", "head" | "kv_head"}}: a model's Q, K and V from a capture folder
// (io/capture_folder.hpp) instead of generated ones, with the model's shape, scale and causal flag; the
// problem's "format" (when given, else the model's dtype) is the storage format they are rounded to. The
// index and the .npy headers are checked before any data are read.
void read_capture(const nlohmann::json& j, const std::string& root, const std::filesystem::path& base_dir,
                  ProblemSpec& p) {
  const std::string cp = root + "/capture";
  for (const char* k : {"shape", "scale", "causal", "generator", "q", "k", "v"})
    if (j.contains(k))
      json_fail(root + "/" + k, "the capture gives the shape, scale, causal flag and Q, K, V; remove this key");
  const nlohmann::json& c = j.at("capture");
  require_object(c, cp);
  check_keys(c, {"dir", "layer", "head", "kv_head"}, cp);
  if (!c.contains("dir")) json_fail(cp, "missing \"dir\" (the folder pasa_capture wrote)");
  if (!c.contains("layer")) json_fail(cp, "missing \"layer\" (an index into the capture's layers)");
  ProblemSpec::CaptureRef& r = p.capture;
  r.dir = resolved(c.at("dir"), cp + "/dir", base_dir);
  r.layer = as_size(c.at("layer"), cp + "/layer");
  if (c.contains("head")) r.head = as_size(c.at("head"), cp + "/head");
  if (c.contains("kv_head")) r.kv_head = as_size(c.at("kv_head"), cp + "/kv_head");
  if (r.head && r.kv_head) json_fail(cp, "give \"head\" (one query head) or \"kv_head\" (a GQA group), not both");
  const CaptureIndex idx = read_capture_index(r.dir, json_where(cp + "/dir"));
  const std::string where = json_where(r.head ? cp + "/head" : r.kv_head ? cp + "/kv_head" : cp + "/layer");
  if (r.layer >= idx.layers.size())
    json_fail(cp + "/layer", fmt::format("layer {} does not exist: {} holds layers 0 to {}", r.layer, r.dir,
                                         idx.layers.size() - 1));
  const CaptureLayer& l = idx.layers[r.layer];
  CapturedQKV qkv = load_capture(idx, {r.layer, r.head, r.kv_head}, j.contains("format") ? p.format : "", where);
  p.format = qkv.format;
  p.B = l.B;
  p.Nq = qkv.q.shape.N;
  p.Nkv = qkv.k.shape.N;
  p.Sq = l.Sq;
  p.Skv = l.Skv;
  p.D = l.D;
  p.scale = qkv.scale;
  p.causal = qkv.causal;
  p.q_user = std::make_shared<const Tensor>(std::move(qkv.q));
  p.k_user = std::make_shared<const Tensor>(std::move(qkv.k));
  p.v_user = std::make_shared<const Tensor>(std::move(qkv.v));
}

// "kind": "paged" (inputs/paged_problem.hpp): "block_size", "num_blocks", "sequences": [{"q_len", "ctx_len",
// "shared_blocks", "share_from", "block_table"}], "shape": {"Nq", "Nkv", "D"}; the dense problem's lengths and
// masks are refused by name (the sequences give them).
void read_paged(const nlohmann::json& j, const std::string& root, ProblemSpec& p) {
  for (const char* k : {"causal", "kv_len", "pse", "select", "capture", "allow_nonfinite"})
    if (j.contains(k))
      json_fail(root + "/" + k, "not with \"kind\": \"paged\" (each sequence's new tokens are causal over its "
                                "context; its lengths come from \"sequences\")");
  if (auto it = j.find("shape"); it != j.end())
    for (const char* k : {"B", "Sq", "Skv"})
      if (it->contains(k))
        json_fail(root + "/shape/" + k, "not with \"kind\": \"paged\": the sequences' q_len and ctx_len give the lengths");
  PagedLayout l;
  read_size(j, "block_size", root, l.block_size);
  read_size(j, "num_blocks", root, l.num_blocks, 1);  // (omitted: as many as the tables need; 0 is refused)
  if (!j.contains("sequences")) json_fail(root, "missing \"sequences\" (a paged problem's list of sequences)");
  const nlohmann::json& seqs = j.at("sequences");
  const std::string sp = root + "/sequences";
  if (!seqs.is_array()) json_fail(sp, "expected an array of sequences, got " + json_type_text(seqs));
  for (std::size_t s = 0; s < seqs.size(); ++s) {
    const std::string at = fmt::format("{}/{}", sp, s);
    const nlohmann::json& q = seqs[s];
    require_object(q, at);
    check_keys(q, {"q_len", "ctx_len", "shared_blocks", "share_from", "block_table"}, at);
    PagedSequenceSpec ps;
    for (const char* k : {"q_len", "ctx_len"})
      if (!q.contains(k)) json_fail(at, fmt::format("missing \"{}\"", k));
    read_size(q, "q_len", at, ps.q_len);
    read_size(q, "ctx_len", at, ps.ctx_len);
    read_size(q, "shared_blocks", at, ps.shared_blocks);
    if (q.contains("share_from")) ps.share_from = as_size(q.at("share_from"), at + "/share_from");
    if (auto t = q.find("block_table"); t != q.end()) {
      if (!t->is_array() || t->empty())
        json_fail(at + "/block_table", "expected a non-empty array of cache block indices, got " + json_type_text(*t));
      for (std::size_t b = 0; b < t->size(); ++b)
        ps.block_table.push_back(as_size((*t)[b], fmt::format("{}/block_table/{}", at, b)));
    }
    l.seqs.push_back(std::move(ps));
  }
  p.paged = std::move(l);
  p.B = 1;  // (for messages: the batch's query rows and longest context)
  p.Sq = std::max<std::size_t>(1, p.paged->tokens());
  p.Skv = std::max<std::size_t>(1, p.paged->max_ctx_len());
}

}  // namespace

ProblemSpec problem_from_json(const nlohmann::json& j, const std::string& json_path,
                              const std::filesystem::path& base_dir) {
  const std::string& root = json_path;
  check_keys(j, {"shape", "format", "scale", "causal", "kv_len", "seed", "allow_nonfinite", "generator", "q", "k", "v",
                 "pse", "select", "capture", "kind", "block_size", "num_blocks", "sequences"},
             root);
  ProblemSpec p;
  std::string kind = "dense";
  read_string(j, "kind", root, kind);
  if (kind != "dense" && kind != "paged")
    json_fail(root + "/kind", fmt::format("unknown problem kind \"{}\"; known: dense (the default), paged", kind));
  if (kind == "dense")
    for (const char* k : {"block_size", "num_blocks", "sequences"})
      if (j.contains(k)) json_fail(root + "/" + k, "only with \"kind\": \"paged\"");
  if (auto it = j.find("shape"); it != j.end()) {
    const std::string sp = root + "/shape";
    check_keys(*it, {"B", "Nq", "Nkv", "Sq", "Skv", "D"}, sp);
    read_size(*it, "B", sp, p.B);
    read_size(*it, "Nq", sp, p.Nq);
    p.Nkv = p.Nq;
    read_size(*it, "Nkv", sp, p.Nkv);
    read_size(*it, "Sq", sp, p.Sq);
    p.Skv = p.Sq;
    read_size(*it, "Skv", sp, p.Skv);
    read_size(*it, "D", sp, p.D);
  }
  read_string(j, "format", root, p.format);
  read_number(j, "scale", root, p.scale);
  // 0 was once read as "the default", so a sweep row labelled "scale": 0 held 1/sqrt(D) results: a scale is
  // given > 0 or omitted.
  if (j.contains("scale") && !(p.scale > 0))
    json_fail(root + "/scale", fmt::format("must be > 0 (got {}); omit it for 1/sqrt(D)", p.scale));
  read_bool(j, "causal", root, p.causal);
  read_u64(j, "seed", root, p.seed);
  read_bool(j, "allow_nonfinite", root, p.allow_nonfinite);
  if (kind == "paged") read_paged(j, root, p);
  if (j.contains("capture")) read_capture(j, root, base_dir, p);
  const UserTensorDims dims{p.B, p.Nq, p.Sq, p.Skv};
  if (auto it = j.find("kv_len"); it != j.end() && npy_ref(*it, root + "/kv_len", base_dir, p.kv_len_file)) {
    p.kv_len = load_kv_len_npy(p.kv_len_file, dims, json_where(root + "/kv_len/npy"));
  } else if (it != j.end()) {
    if (!it->is_array())
      json_fail(root + "/kv_len", "expected an array or {\"npy\": file}, got " + json_type_text(*it));
    for (std::size_t b = 0; b < it->size(); ++b) p.kv_len.push_back(as_size((*it)[b], fmt::format("{}/kv_len/{}", root, b)));
  }
  TensorGen shared;
  if (auto it = j.find("generator"); it != j.end()) {
    read_gen(*it, root + "/generator", shared);
    // Checked here, so that a mistake in the shared generator is reported where it was written.
    validate(shared, root + "/generator");
  }
  p.q = p.k = p.v = shared;
  const char* names[] = {"q", "k", "v"};
  TensorGen* gens[] = {&p.q, &p.k, &p.v};
  for (int t = 0; t < 3; ++t)
    if (auto it = j.find(names[t]); it != j.end()) read_gen(*it, root + "/" + names[t], *gens[t]);
  if (auto it = j.find("pse"); it != j.end()) {
    if (npy_ref(*it, root + "/pse", base_dir, p.pse_file)) {  // the user's tensor
      p.pse_user = std::make_shared<const Tensor>(load_pse_npy(p.pse_file, dims, json_where(root + "/pse/npy")));
    } else {  // its own generator (not the shared one)
      p.has_pse = true;
      read_gen(*it, root + "/pse", p.pse);
    }
  }
  if (auto it = j.find("select"); it != j.end()) {
    const std::string sp = root + "/select";
    check_keys(*it, {"p", "value", "npy"}, sp);
    if (it->contains("npy")) {
      if (it->contains("p")) json_fail(sp, "give \"p\" (a drawn mask) or \"npy\" (the user's mask), not both");
      p.select_file = resolved(it->at("npy"), sp + "/npy", base_dir);
      p.select_user = std::make_shared<const std::vector<std::uint8_t>>(
          load_select_npy(p.select_file, dims, json_where(sp + "/npy")));
    }
    read_number(*it, "p", sp, p.select_p);
    read_number(*it, "value", sp, p.select_value);
  }
  try {
    validate(p);
  } catch (const InputError& e) {
    // Messages about one generator start with its pointer ("/v/p: ..."); hang them under the root.
    const std::string what = e.what();
    throw InputError(what.starts_with('/') ? root + what : fmt::format("{}: {}", json_where(root), what));
  }
  return p;
}

nlohmann::json to_json(const TensorGen& g) {
  return {{"kind", gen_kind_name(g.kind)}, {"x0", g.x0},           {"am", g.am},
          {"p", g.p},                      {"wavelength", g.wavelength}, {"phase_deg", g.phase_deg},
          {"seq_bias", g.seq_bias},        {"noise", g.noise}};
}

nlohmann::json to_json(const ProblemSpec& p) {
  nlohmann::json j;
  if (p.paged) {
    const PagedLayout& l = *p.paged;
    j = {{"kind", "paged"},
         {"shape", {{"Nq", p.Nq}, {"Nkv", p.Nkv}, {"D", p.D}}},
         {"format", p.format},
         {"seed", p.seed},
         {"q", to_json(p.q)},
         {"k", to_json(p.k)},
         {"v", to_json(p.v)},
         {"block_size", l.block_size},
         {"sequences", nlohmann::json::array()}};
    if (l.num_blocks > 0) j["num_blocks"] = l.num_blocks;
    for (const PagedSequenceSpec& s : l.seqs) {
      nlohmann::json q = {{"q_len", s.q_len}, {"ctx_len", s.ctx_len}, {"shared_blocks", s.shared_blocks}};
      if (s.share_from) q["share_from"] = *s.share_from;
      if (!s.block_table.empty()) q["block_table"] = s.block_table;
      j["sequences"].push_back(std::move(q));
    }
    if (p.scale != 0) j["scale"] = p.scale;  // (0: the default 1/sqrt(D), omitted)
    return j;
  }
  if (!p.capture.dir.empty()) {  // the capture gives shape, scale, causal and the tensors
    j = {{"capture", {{"dir", p.capture.dir}, {"layer", p.capture.layer}}}, {"format", p.format}, {"seed", p.seed}};
    if (p.capture.head) j["capture"]["head"] = *p.capture.head;
    if (p.capture.kv_head) j["capture"]["kv_head"] = *p.capture.kv_head;
  } else {
    j = {{"shape", {{"B", p.B}, {"Nq", p.Nq}, {"Nkv", p.Nkv}, {"Sq", p.Sq}, {"Skv", p.Skv}, {"D", p.D}}},
         {"format", p.format},
         {"causal", p.causal},
         {"seed", p.seed},
         {"q", to_json(p.q)},
         {"k", to_json(p.k)},
         {"v", to_json(p.v)}};
  }
  if (p.scale != 0 && p.capture.dir.empty()) j["scale"] = p.scale;  // (0: the default 1/sqrt(D), omitted)
  if (!p.kv_len_file.empty()) j["kv_len"] = {{"npy", p.kv_len_file}};
  else if (!p.kv_len.empty()) j["kv_len"] = p.kv_len;
  if (p.pse_user) j["pse"] = {{"npy", p.pse_file}};
  else if (p.has_pse) j["pse"] = to_json(p.pse);
  if (p.select_user) j["select"] = {{"npy", p.select_file}, {"value", p.select_value}};
  else if (p.select_p > 0 || p.select_value != ProblemSpec{}.select_value)
    j["select"] = {{"p", p.select_p}, {"value", p.select_value}};
  if (p.allow_nonfinite) j["allow_nonfinite"] = true;
  return j;
}

}  // namespace pasa

namespace pasa {

std::vector<std::pair<std::string, std::filesystem::path>> problem_input_files(const ProblemSpec& p,
                                                                               const std::string& json_path) {
  std::vector<std::pair<std::string, std::filesystem::path>> out;
  const std::string root = json_path.empty() || json_path.back() == ':' ? json_path : json_path + ":";
  if (!p.pse_file.empty()) out.emplace_back(root + "/pse/npy", p.pse_file);
  if (!p.select_file.empty()) out.emplace_back(root + "/select/npy", p.select_file);
  if (!p.kv_len_file.empty()) out.emplace_back(root + "/kv_len/npy", p.kv_len_file);
  if (!p.capture.dir.empty()) {
    const std::filesystem::path dir(p.capture.dir);
    out.emplace_back(root + "/capture/dir", dir / "index.json");
    const CaptureIndex idx = read_capture_index(dir, json_where(root + "/capture/dir"));
    for (std::size_t i = 0; i < idx.layers.size(); ++i)
      for (const auto* f : {&idx.layers[i].q, &idx.layers[i].k, &idx.layers[i].v})
        out.emplace_back(fmt::format("{}/capture (layer {})", root, i), *f);
  }
  return out;
}

}  // namespace pasa
