// pasa-hwcompare: the emulator against a real GPU. Compares the toolkit's attention outputs with a GPU's on the
// same inputs (experiments/gpu/attention_ports.py), and the rounding layer with the GPU's float32 → fp16, bf16,
// fp8 conversions (experiments/gpu/conversions.py). The logic is in study/hardware_compare.hpp.
#include <iostream>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "library_names.hpp"
#include "pasa/core/error.hpp"
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
  CLI11_PARSE(app, argc, argv);
  try {
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
