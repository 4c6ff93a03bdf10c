// pasa-hwcompare: the emulator against a real GPU. Compares the toolkit's attention outputs with a GPU's on the
// same inputs (experiments/gpu/attention_ports.py), and the rounding layer with the GPU's float32 → fp16, bf16,
// fp8 conversions (experiments/gpu/conversions.py), and a GPU GEMM with the tensor-core model
// (experiments/gpu/tc_probe.py, tc_random.py). The logic is in study/hardware_compare.hpp.
#include <iostream>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common_options.hpp"
#include "library_names.hpp"
#include "pasa/core/error.hpp"
#include "pasa/core/memory.hpp"
#include "pasa/io/allocation_json.hpp"
#include "pasa/io/tensor_io.hpp"
#include "pasa/study/kernel_bridge.hpp"
#include "pasa/io/csv.hpp"
#include "pasa/study/hardware_compare.hpp"

int main(int argc, char** argv) {
  CLI::App app{"Compare the emulator with a GPU's outputs (attention) or conversions (all 2^32 float32 inputs)."};
  app.require_subcommand(1);
  pasa::HwAttentionOptions aopt;
  pasa::HwConversionOptions copt;
  std::string a_out, c_out, max_memory;
  pasa_apps::add_max_memory(app, max_memory);
  auto* att = app.add_subcommand("attention", "toolkit vs GPU attention outputs, both against the golden");
  att->add_option("--gpu-dir", aopt.gpu_dir, "folder with manifest.json, <case>/{q,k,v}.npy, <case>/out_<label>.npy")
      ->required();
  att->add_option("--configs", aopt.configs_dir, "folder of <label>.json hardware configs (configs/hardware)")
      ->required();
  att->add_option("--out", a_out, "CSV to write, one row per (case, label)")->required();
  pasa_apps::add_threads(*att, aopt.threads);
  auto* conv = app.add_subcommand("conversions", "pasa's rounding vs the GPU's float32 conversions");
  conv->add_option("--gpu-dir", copt.gpu_dir, "folder with conv_<fmt>.bin (and conv_range.json)")->required();
  conv->add_option("--out", c_out, "CSV to write: a summary row per format, then up to 20 mismatches")->required();
  pasa_apps::add_threads(*conv, copt.threads);
  auto* gm = app.add_subcommand("gemm", "a GPU GEMM's outputs vs the GEMM model; prints one CSV row: elements, "
                                        "identical, ulp_1, ulp_2_4, ulp_over_4, nan_mismatch, max_ulp (ulps of the "
                                        "output format; across a sign change counted through zero, so a sign error "
                                        "gives a max_ulp near the format's value count)");
  pasa::HwGemmOptions gopt;
  std::string a_fmt, b_fmt, out_fmt, gemm_json = "h100", convert, convert_mode = "rne";
  gm->add_option("--a", gopt.a, "A (batch, M, K) or (M, K) .npy")->required();
  gm->add_option("--b", gopt.b, "Bt (batch, N, K) or (N, K) .npy")->required();
  gm->add_option("--c", gopt.c, "the GPU's C (batch, M, N) or (M, N) .npy")->required();
  gm->add_option("--a-format", a_fmt, "format of A's values")->required()->check(pasa_apps::library_name(pasa::format_by_name, pasa_apps::format_names()));
  gm->add_option("--b-format", b_fmt, "format of Bt's values (default: A's)")
      ->check(pasa_apps::library_name(pasa::format_by_name, pasa_apps::format_names()));
  gm->add_option("--out-format", out_fmt, "format of C")->required()->check(pasa_apps::library_name(pasa::format_by_name, pasa_apps::format_names()));
  gm->add_option("--gemm", gemm_json,
                 "the GEMM model: h100 (the H100 tensor-core model of the input format, as the _h100 presets: "
                 "fp8 inputs get the FP8 model), ordered, chunked, every_op, a tensor-core model name "
                 "(h100_fp16, h100_e4m3, exact, ...) or the allocation's \"gemm\" JSON")
      ->capture_default_str();
  gm->add_option("--convert", convert, "round the inputs to this format first (cuBLAS's float32 -> tf32)");
  gm->add_option("--convert-mode", convert_mode, "rounding of --convert (rne, rz, ...)")->capture_default_str();
  gm->add_option("--mismatches", gopt.max_mismatches, "list the first N differing outputs on stderr")
      ->check(pasa_apps::unsigned_integer());
  auto* kn = app.add_subcommand("kernel", "which kernel recipe produced a GPU's attention output, and where the "
                                          "closest one parts from it (docs/hardware.md, \"Which kernel produced this "
                                          "output\")");
  std::string kq, kk, kv, kout, kfmt;
  double kscale = 0;
  bool kcausal = false;
  int kthreads = pasa::default_threads();
  kn->add_option("--q", kq, "Q (B, Nq, Sq, D) .npy (float16 values, or uint16 bit patterns with --format)")->required();
  kn->add_option("--k", kk, "K (B, Nkv, Skv, D) .npy")->required();
  kn->add_option("--v", kv, "V (B, Nkv, Skv, D) .npy")->required();
  kn->add_option("--gpu-out", kout, "the kernel's output (B, Nq, Sq, D) .npy")->required();
  kn->add_option("--format", kfmt, "fp16 or bf16: the format of the four tensors (default: the dtype's)")
      ->check(pasa_apps::library_name(pasa::format_by_name, pasa_apps::format_names()));
  kn->add_option("--scale", kscale, "the softmax scale the kernel was given (default 1/sqrt(D))")
      ->check(pasa_apps::finite_number());
  kn->add_flag("--causal", kcausal, "the call was causal");
  pasa_apps::add_threads(*kn, kthreads);
  pasa_apps::add_version(app, "pasa-hwcompare");
  PASA_CLI_PARSE(app, argc, argv);
  try {
    // Before any comparison runs; the output may not replace an input (a .npy or manifest of the GPU's
    // folder, a config, a GEMM operand).
    std::vector<std::pair<std::string, std::filesystem::path>> inputs = {
        {"--a", gopt.a}, {"--b", gopt.b}, {"--c", gopt.c}};
    for (const auto& [option, dir] : {std::pair<std::string, std::filesystem::path>{"--gpu-dir", aopt.gpu_dir},
                                      {"--gpu-dir", copt.gpu_dir}, {"--configs", aopt.configs_dir}})
      for (const std::filesystem::path& f : pasa::files_in(dir, 2)) inputs.emplace_back(option, f);
    if (kn->parsed()) {  // (writes nothing: the report goes to stdout)
      if (kn->count("--scale") > 0 && !(kscale > 0))
        throw pasa::InputError(fmt::format("--scale {}: must be > 0; omit it for 1/sqrt(D)", kscale));
      std::unique_ptr<pasa::Format> f;
      if (!kfmt.empty()) f = std::make_unique<pasa::Format>(pasa::format_by_name(kfmt));
      const auto h = pasa::read_qkv_headers(kq, kk, kv, f.get());
      const pasa::TensorHeader ho = pasa::read_tensor_header(kout, f.get());
      pasa::check_memory(pasa::sat_mul(16, pasa::sat_add(pasa::sat_mul(4, h[0].data_bytes), h[1].data_bytes)),
                         aopt.max_memory ? aopt.max_memory
                                         : (max_memory.empty() ? 0 : pasa::parse_byte_size(max_memory, "--max-memory")),
                         "this comparison", "Q, K, V, the output and the recipes' runs as doubles");
      if (!(ho.shape == h[0].shape))
        throw pasa::InputError(fmt::format("--gpu-out {}: shape differs from Q's", kout));
      pasa::AttentionInputs in;
      in.q = pasa::load_tensor(kq, f.get()).tensor;
      in.k = pasa::load_tensor(kk, f.get()).tensor;
      in.v = pasa::load_tensor(kv, f.get()).tensor;
      in.scale = kscale;
      in.mask.causal = kcausal;
      pasa::validate(in, kthreads);
      const pasa::Tensor gpu = pasa::load_tensor(kout, f.get()).tensor;
      std::cout << pasa::kernel_bridge_text(pasa::compare_kernel(in, gpu, kthreads));
      return 0;
    }
    pasa::check_output_paths({{"--out", att->parsed() ? a_out : c_out}}, inputs);
    aopt.max_memory = gopt.max_memory = max_memory.empty() ? 0 : pasa::parse_byte_size(max_memory, "--max-memory");
    if (gm->parsed()) {
      gopt.a_format = pasa::format_by_name(a_fmt);
      gopt.b_format = pasa::format_by_name(b_fmt.empty() ? a_fmt : b_fmt);
      gopt.out_format = pasa::format_by_name(out_fmt);
      if (!convert.empty())
        gopt.convert = {pasa::format_by_name(convert), pasa::RoundOptions{pasa::round_mode_by_name(convert_mode)}};
      // The model of the format the tensor cores see: the inputs', or --convert's (float32 -> tf32).
      gopt.model = pasa::gemm_model_by_name(gemm_json, gopt.convert ? gopt.convert->first : gopt.a_format, "--gemm");
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
  } catch (...) {
    return pasa::report_error("pasa-hwcompare");
  }
}
