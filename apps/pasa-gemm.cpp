// pasa-gemm: C = A·B under a GEMM model (attention/gemm.hpp) on .npy matrices, to model one's own GPU's matrix
// products without C++. Only parses arguments and calls the library (study/hardware_compare.hpp batched_gemm).
#include <algorithm>
#include <iostream>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "common_options.hpp"
#include "library_names.hpp"
#include "pasa/attention/gemm.hpp"
#include "pasa/core/error.hpp"
#include "pasa/io/csv.hpp"
#include "pasa/io/npy.hpp"
#include "pasa/io/output_file.hpp"
#include "pasa/io/tensor_io.hpp"
#include "pasa/study/hardware_compare.hpp"

using namespace pasa;

int main(int argc, char** argv) {
  CLI::App app{"C = A·B under a GEMM model (ordered, chunked, every_op, tensor-core models), .npy in and out"};
  std::string a_file, b_file, c_file, a_fmt, b_fmt, acc = "fp32", out = "fp32", model = "ordered", max_memory;
  app.add_option("--a", a_file, "A (M, K) or (batch, M, K) .npy: float16/32/64 values or uint8/uint16 bit patterns")
      ->required();
  app.add_option("--b", b_file, "B (K, N) or (batch, K, N) .npy")->required();
  app.add_option("--out", c_file, "C (M, N) or (batch, M, N) as float64 .npy (values of --out-format)")->required();
  app.add_option("--a-format", a_fmt, "format of A: float values are rounded to it (nearest even); required for bit "
                                      "patterns (default: the dtype's)")
      ->check(pasa_apps::library_name(format_by_name, pasa_apps::format_names()));
  app.add_option("--b-format", b_fmt, "format of B (default: --a-format when given, else the dtype's)")->check(pasa_apps::library_name(format_by_name, pasa_apps::format_names()));
  app.add_option("--acc", acc, "accumulator format")->capture_default_str()->check(pasa_apps::library_name(format_by_name, pasa_apps::format_names()));
  app.add_option("--out-format", out, "format C is rounded to (nearest even)")
      ->capture_default_str()
      ->check(pasa_apps::library_name(format_by_name, pasa_apps::format_names()));
  app.add_option("--model", model, "ordered, chunked, every_op, h100 (the H100 tensor-core model of A's format), a "
                                   "tensor-core model name (h100_fp16, h100_e4m3, exact, ...) or the allocation's "
                                   "\"gemm\" JSON")
      ->capture_default_str();
  pasa_apps::add_max_memory(app, max_memory);
  pasa_apps::add_version(app, "pasa-gemm");
  PASA_CLI_PARSE(app, argc, argv);
  try {
    check_output_paths({{"--out", c_file}}, {{"--a", a_file}, {"--b", b_file}});
    std::unique_ptr<Format> fa, fb;
    if (!a_fmt.empty()) fa = std::make_unique<Format>(format_by_name(a_fmt));
    if (!b_fmt.empty()) fb = std::make_unique<Format>(format_by_name(b_fmt));
    else if (fa) fb = std::make_unique<Format>(*fa);
    // Everything from the headers before any data are read: (B, N, S, D) tensors, a 2-D (rows, columns)
    // array is (1, 1, rows, columns), a 3-D one (1, batch, ...); the formats, the model and the size.
    const TensorHeader ha = read_tensor_header(a_file, fa.get()), hb = read_tensor_header(b_file, fb.get());
    for (const auto* h : {&ha, &hb})
      if (h->npy_shape.size() != 2 && h->npy_shape.size() != 3)
        throw InputError(fmt::format("{}: shape of {} dimensions; expected (rows, columns) or (batch, rows, columns)",
                                     h == &ha ? a_file : b_file, h->npy_shape.size()));
    if (ha.npy_shape.size() != hb.npy_shape.size())
      throw InputError(fmt::format("{} and {}: one is batched, the other not", a_file, b_file));
    const Shape sa = ha.shape, sb = hb.shape;
    if (sa.N != sb.N || sa.D != sb.S)
      throw InputError(fmt::format("{} ({} x {} x {}) and {} ({} x {} x {}): not A (batch, M, K) and B (batch, K, N)",
                                   a_file, sa.N, sa.S, sa.D, b_file, sb.N, sb.S, sb.D));
    const GemmSpec spec{ha.format, hb.format, StageSpec{format_by_name(acc)}, StageSpec{format_by_name(out)},
                        gemm_model_by_name(model, ha.format, "--model")};
    check_batched_gemm(spec, sa.N, sa.S, sb.D, sa.D, std::max(ha.data_bytes, hb.data_bytes),
                       pasa_apps::max_memory_bytes(max_memory), "--model " + model);
    const LoadedTensor A = load_tensor(a_file, fa.get()), B = load_tensor(b_file, fb.get());
    std::vector<double> C = batched_gemm(spec, sa.N, sa.S, sb.D, sa.D, A.tensor.data, B.tensor.data);
    std::vector<std::size_t> shape = {sa.S, sb.D};
    if (ha.npy_shape.size() == 3) shape.insert(shape.begin(), sa.N);
    write_npy(c_file, make_npy(C, shape, NpyDtype::f64));
    return 0;
  } catch (...) {
    return report_error("pasa-gemm");
  }
}
