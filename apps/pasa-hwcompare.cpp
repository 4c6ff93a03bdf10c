// pasa-hwcompare: the emulator against a real GPU. Compares the toolkit's attention outputs with a GPU's on the
// same inputs (experiments/gpu/attention_ports.py), and the rounding layer with the GPU's float32 → fp16, bf16,
// fp8 conversions (experiments/gpu/conversions.py), and a GPU GEMM with the tensor-core model
// (experiments/gpu/tc_probe.py, tc_random.py). The logic is in study/hardware_compare.hpp.
#include <iostream>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "library_names.hpp"
#include "pasa/core/error.hpp"
#include "pasa/io/allocation_json.hpp"
#include "pasa/io/csv.hpp"
#include "pasa/study/hardware_compare.hpp"

int main(int argc, char** argv) {
  CLI::App app{"Compare the emulator with a GPU's outputs (attention) or conversions (all 2^32 float32 inputs)."};
  app.require_subcommand(1);
  pasa::HwAttentionOptions aopt;
  pasa::HwConversionOptions copt;
  std::string a_out, c_out;
  auto* att = app.add_subcommand("attention", "toolkit vs GPU attention outputs, both against the golden");
  att->add_option("--gpu-dir", aopt.gpu_dir, "folder with manifest.json, <case>/{q,k,v}.npy, <case>/out_<label>.npy")
      ->required();
  att->add_option("--configs", aopt.configs_dir, "folder of <label>.json hardware configs (configs/hardware)")
      ->required();
  att->add_option("--out", a_out, "CSV to write, one row per (case, label)")->required();
  att->add_option("--threads", aopt.threads, "worker threads (results do not depend on it)")
      ->capture_default_str()
      ->check(pasa_apps::unsigned_integer(1));
  auto* conv = app.add_subcommand("conversions", "pasa's rounding vs the GPU's float32 conversions");
  conv->add_option("--gpu-dir", copt.gpu_dir, "folder with conv_<fmt>.bin (and conv_range.json)")->required();
  conv->add_option("--out", c_out, "CSV to write: a summary row per format, then up to 20 mismatches")->required();
  conv->add_option("--threads", copt.threads, "worker threads (results do not depend on it)")
      ->capture_default_str()
      ->check(pasa_apps::unsigned_integer(1));
  auto* gm = app.add_subcommand("gemm", "a GPU GEMM's outputs vs the GEMM model; prints one CSV row");
  pasa::HwGemmOptions gopt;
  std::string a_fmt, b_fmt, out_fmt, gemm_json = R"({"model": "tensor_core"})", convert, convert_mode = "rne";
  gm->add_option("--a", gopt.a, "A (batch, M, K) .npy")->required();
  gm->add_option("--b", gopt.b, "Bt (batch, N, K) .npy")->required();
  gm->add_option("--c", gopt.c, "the GPU's C (batch, M, N) .npy")->required();
  gm->add_option("--a-format", a_fmt, "format of A's values")->required();
  gm->add_option("--b-format", b_fmt, "format of Bt's values (default: A's)");
  gm->add_option("--out-format", out_fmt, "format of C")->required();
  gm->add_option("--gemm", gemm_json, "the GEMM model as the allocation's \"gemm\" JSON")->capture_default_str();
  gm->add_option("--convert", convert, "round the inputs to this format first (cuBLAS's float32 -> tf32)");
  gm->add_option("--convert-mode", convert_mode, "rounding of --convert (rne, rz, ...)")->capture_default_str();
  gm->add_option("--mismatches", gopt.max_mismatches, "list the first N differing outputs on stderr");
  app.set_version_flag("--version", "pasa-hwcompare " PASA_VERSION);  // the CMake project version, as pasa.__version__
  CLI11_PARSE(app, argc, argv);
  try {
    if (gm->parsed()) {
      gopt.a_format = pasa::format_by_name(a_fmt);
      gopt.b_format = pasa::format_by_name(b_fmt.empty() ? a_fmt : b_fmt);
      gopt.out_format = pasa::format_by_name(out_fmt);
      gopt.model = pasa::gemm_model_from_json(nlohmann::json::parse(gemm_json), "--gemm");
      if (!convert.empty())
        gopt.convert = {pasa::format_by_name(convert), pasa::RoundOptions{pasa::round_mode_by_name(convert_mode)}};
      const auto r = pasa::compare_gemm(gopt);
      const auto& h = r.ulps;
      std::cout << fmt::format("{},{},{},{},{},{},{}\n", h.elements, h.identical, h.ulp1, h.ulp2_4, h.ulp_over4,
                               h.nan_mismatch, h.max_ulp);
      for (const auto& m : r.mismatches)
        std::cerr << fmt::format("q {} i {} j {}: gpu {:a} model {:a}\n", m.q, m.i, m.j, m.gpu, m.model);
      return 0;
    }
    if (att->parsed()) {
      const auto rows = pasa::compare_attention(aopt);
      pasa::write_file_atomic(a_out, pasa::hw_attention_csv(rows));
      int missing = 0;
      for (const auto& r : rows)
        if (r.status != "ok") {
          std::cerr << fmt::format("case {}, label {}: {}\n", r.case_name, r.label, r.status);
          ++missing;
        }
      std::cout << fmt::format("{}: {} rows, {} with missing GPU outputs\n", a_out, rows.size(), missing);
      return missing ? 3 : 0;
    }
    const auto rows = pasa::compare_conversions(copt);
    pasa::write_file_atomic(c_out, pasa::hw_conversions_csv(rows));
    for (const auto& r : rows)
      std::cout << fmt::format("{}: {} inputs, {} mismatches with overflow {} ({} with {})\n", r.format, r.count,
                               r.mismatches, r.overflow, r.other_mismatches, r.other_overflow);
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "pasa-hwcompare: " << e.what() << "\n";
    return 1;
  }
}
