// The engines' fused float tile path (attention/detail/fused_tile.*, fused_softmax.cpp) against the reference
// emulator, bit for bit: shapes, masks and magnitudes that exercise its padding lanes, its row sums in the
// exp loop and its roundings to odd at 24 bits; and one GEMM step of the reference itself.
#include <catch2/catch.hpp>

#include "attention/reference_emulator_cases.hpp"

using namespace pasa;
using namespace pasa::refemu_test;

TEST_CASE("reference emulator: the fused float tile path (fa2, pasa)", "[reference]") {
  // The engines' fused path (attention/detail/fused_tile.*) runs its tiles transposed, 16 rows to a vector,
  // with padding lanes, a longer row stride for 128-row items, V packed once, an fp16 exp table, row sums in
  // the exp loop: shapes whose item rows are not multiples of 16 (and 128 exactly), ragged key tiles shorter
  // than the 32 lanes of the blocked sum, causal and kv_len masks hiding whole tiles and rows, scores that
  // overflow fp16, exp results that underflow to fp16/fp32 subnormals and zero, and NaN/inf inputs; every
  // configuration must reach the fused path (checked) and give the reference's bits.
  struct Case {
    Shape6 s;
    int mask;
    double bias, sd;
  };
  const Case cases[] = {
      {{1, 2, 1, 37, 75, 24, 20, 32}, 1, 2.0, 1.0},    // rows 20 and 17, keys 2 × 32 + 11, causal
      {{2, 2, 2, 130, 40, 8, 128, 16}, 3, 0.0, 6.0},   // a 128-row item (padded stride) and a 2-row one; masks
      {{1, 1, 1, 33, 70, 16, 33, 64}, 2, 40.0, 1.0},   // q·k up to ~1e5: fp16 scores overflow; kv_len
      {{1, 1, 1, 16, 48, 16, 16, 16}, 0, 0.0, 12.0},   // spread scores: exp underflows to subnormals and zero
  };
  struct Cfg {
    const char* alg;
    const char* preset;
    const char* stage = "";
    const char* format = "";
    RoundMode mode = RoundMode::nearest_even;
    bool alpha_in_M = true;
    const char* form = "fa2";
    GemmKind gemm = GemmKind::ordered;  // tensor_core: the preset's own model; every_op: with fp16 accumulators
  };
  const Cfg cfgs[] = {
      {"fa2", "fa_fp32"},
      {"fa2", "fa_fp32", "out", "fp32"},                       // O's fp32 roundings visible in the output
      {"fa2", "fa_fp16_fp32"},
      {"fa2", "fa_fp16"},
      {"fa2", "fa_bf16"},                                      // narrow stages other than fp16: round_span passes
      {"fa2", "fa_fp16_strict"},                               // fp16 accumulators: the general reductions
      {"fa2", "fa_fp16", "exp", "fp32"},                       // fp32 exp, fp16 max: float arguments
      {"fa2", "fa_fp16", "o", "", RoundMode::toward_zero},     // a narrow o stage in another mode
      {"fa2", "fa_fp16", "p", "", RoundMode::toward_pos},      // P rounded after the loop
      {"fa2", "fa_fp16", "max", "fp32"},                       // fp16 exp of fp32 shifts: the double argument
      {"fa2", "fa_fp16_fp32", "exp", "fp16"},                  // fp16 exp of fp32 scores: rounded to odd
      {"fa2", "fa_fp16", "sum", "", RoundMode::toward_zero},   // an fp32 accumulator in rz: the general sums
      {"pasa", "pasa_fp16"},
      {"pasa", "pasa_fp16_strict"},
      {"pasa", "pasa_bf16"},
      {"pasa", "pasa_fp16", "", "", RoundMode::nearest_even, false, "printed"},  // S' scaled; the printed form
      {"pasa", "pasa_fp16", "mean", "", RoundMode::toward_neg},
      // GEMMs of the tensor-core and every-op models: their own kernels through gemm(), the softmax fused
      {"fa2", "fa_fp16_fp32_h100", "", "", RoundMode::nearest_even, true, "fa2", GemmKind::tensor_core},
      {"pasa", "pasa_fp16_h100", "", "", RoundMode::nearest_even, true, "fa2", GemmKind::tensor_core},
      {"fa2", "fa_bf16_h100", "", "", RoundMode::nearest_even, true, "fa2", GemmKind::tensor_core},
      {"fa2", "fa_fp16_strict", "", "", RoundMode::nearest_even, true, "fa2", GemmKind::every_op},
      {"pasa", "pasa_fp16", "", "", RoundMode::nearest_even, true, "fa2", GemmKind::every_op},
      {"fa2", "fa_fp16_fp32", "", "", RoundMode::nearest_even, true, "fa2", GemmKind::every_op},  // fp32 accumulators
  };
  Tally t;
  int k = 0;
  for (const Case& c : cases)
    for (const Cfg& g : cfgs) {
      Config cfg{g.alg, g.preset, g.stage, g.format, g.mode};
      cfg.pasa.alpha_in_M = g.alpha_in_M;
      cfg.pasa.form = g.form;
      if (g.gemm == GemmKind::tensor_core) cfg.gemm = allocation_preset(g.preset).gemm;
      if (g.gemm == GemmKind::every_op) {
        cfg.gemm.kind = GemmKind::every_op;
        if (std::string(g.preset) != "fa_fp16_fp32") cfg.acc = "fp16";
      }
      AttentionInputs in = make_inputs(c.s, c.mask, 90000 + static_cast<std::uint64_t>(k), "fp16", c.bias);
      if (c.sd != 1.0) {
        in.q = normal_tensor(in.q.shape, in.q.format, c.bias, c.sd, 91000 + static_cast<std::uint64_t>(k));
        in.k = normal_tensor(in.k.shape, in.k.format, c.bias, c.sd, 92000 + static_cast<std::uint64_t>(k));
      }
      if (k % 3 == 0) {  // a NaN score, an infinite one, an infinite value
        in.allow_nonfinite = true;
        in.q.data[3] = std::numeric_limits<double>::quiet_NaN();
        in.k.data[in.k.data.size() - 5] = std::numeric_limits<double>::infinity();
        in.v.data[7] = -std::numeric_limits<double>::infinity();
      }
      const AlgorithmSpec spec = cfg.spec(c.s);
      {
        detail::Run run(in, spec);
        if (cfg.algorithm == "pasa") detail::pasa_prepare(run, 1);
#if defined(__AVX512F__)  // the fused path's GEMM kernels are the AVX-512 ones (fused_tile.cpp fused_tiles)
        INFO(cfg.name() << " takes the fused path");
        CHECK(run.float_tiles);
#endif
        if (g.gemm != GemmKind::ordered) CHECK((!run.float_qk && !run.float_pv));  // (the general GEMMs)
      }
      if (g.gemm != GemmKind::tensor_core) {
        check_config(cfg, c.s, in, t);
      } else {
        // The reference does not restate the tensor-core model (test_tensor_core checks the kernel against
        // its own reference): the fused run is compared with the general path of the same GEMMs, which an
        // all-zero position bias selects (fused_tiles excludes a bias) without changing a value: each score
        // plus +0 rounded to the scale stage is the score (a zero score's sign aside; these inputs have none).
        AttentionInputs general = in;
        general.pse = Tensor({in.q.shape.B, in.q.shape.N, in.q.shape.S, in.k.shape.S}, format_by_name("fp16"));
        {
          detail::Run run(general, spec);
          if (cfg.algorithm == "pasa") detail::pasa_prepare(run, 1);
          CHECK(!run.float_tiles);
        }
        const std::size_t differ = test::count_differing(run_attention(in, spec, 1), run_attention(general, spec, 1));
        INFO(cfg.name() << ": " << differ << " values differ from the general path");
        CHECK(differ == 0);
        ++t.cases;
        t.equal += differ == 0;
      }
      ++k;
    }
  std::cout << "[reference] fused tiles: " << t.cases << " cases, " << t.equal << " equal\n";
}

TEST_CASE("reference emulator: the fused path's roundings to odd at 24 bits", "[reference]") {
  // Values picked so that rounding to the nearest float before the narrow stage gives other bits (a tie of
  // the fp16 grid) than the one rounding of the exact value: (1) e^x for the fp16 argument x = −0x1.4ecp+1,
  // whose double lies just above an fp16 midpoint within float's last bits (the fp16 exp table); (2) an fp16
  // exp argument z − m = −(1 + 2^-11 + 2^-35) from fp32 scores (the rounding to odd of the exact difference).
  // lse is m + log(l) with an fp32 sum, so one ulp of P shows in it.
  auto one_row = [](std::vector<double> q, std::vector<double> k, std::size_t D) {
    const Format f16 = format_by_name("fp16");
    AttentionInputs in;
    const std::size_t S = k.size() / D;
    in.q = Tensor({1, 1, 1, D}, f16);
    in.k = Tensor({1, 1, S, D}, f16);
    in.v = Tensor({1, 1, S, D}, f16);
    in.q.data.assign(q.begin(), q.end());
    in.k.data.assign(k.begin(), k.end());
    for (std::size_t i = 0; i < in.v.data.size(); ++i) in.v.data[i] = static_cast<double>(i % 3) - 1.0;
    in.scale = 1.0;
    return in;
  };
  Tally t;
  const Shape6 s1{1, 1, 1, 1, 2, 1, 1, 16};
  for (const char* max_format : {"", "fp32"}) {  // the table in the 16-lane loop and in the 8-lane one
    Config c{"fa2", "fa_fp16", "sum", "fp32"};
    AttentionInputs in = one_row({1.0}, {0.0, -0x1.4ecp+1}, 1);
    AlgorithmSpec spec = c.spec(s1);
    if (*max_format) spec.alloc.spec("max").format = format_by_name(max_format);
    const Outcome o = compare(in, spec);
    INFO("e^-0x1.4ecp+1 in fp16, max stage " << max_format << ": " << o.first);
    CHECK(o.mismatched == 0);
    ++t.cases;
  }
  {
    const Shape6 s2{1, 1, 1, 1, 2, 2, 1, 16};
    Config c{"fa2", "fa_fp32", "exp", "fp16"};
    // scores 1 + 2^-11 (the max) and 2^-11·(−2^-24) = −2^-35, both exact in the fp32 accumulator
    AttentionInputs in = one_row({1.0, 0x1p-11}, {1.0, 1.0, 0.0, -0x1p-24}, 2);
    const Outcome o = compare(in, c.spec(s2));
    INFO("exp argument −(1 + 2^-11 + 2^-35) to fp16: " << o.first);
    CHECK(o.mismatched == 0);
    ++t.cases;
  }
  const AttentionInputs in = one_row({1.0}, {0.0, -0x1.4ecp+1}, 1);
  const AlgorithmSpec spec = Config{"fa2", "fa_fp16", "sum", "fp32"}.spec(s1);
  const detail::Run run(in, spec);
#if defined(__AVX512F__)  // (the fused path exists only there)
  CHECK(run.float_tiles);
#endif
  (void)run;
}

TEST_CASE("reference GEMM step: one rounding of the exact acc + a·b (an RZ example)", "[reference]") {
  // fp16 operands 256·256 + 2^-24·(−2^-24) into an fp32 round-toward-zero accumulator: the exact sum is
  // 65536 − 2^-48, whose RZ rounding to fp32 is 65536 − 2^-8 = 65535.99609375 (by hand).
  const double a[] = {256.0, std::ldexp(1.0, -24)}, b[] = {256.0, -std::ldexp(1.0, -24)};
  StageSpec acc{format_by_name("fp32"), {}}, out{format_by_name("fp64"), {}};
  acc.round.mode = RoundMode::toward_zero;
  const GemmModel ordered{GemmKind::ordered, 16};
  CHECK(reference::reference_dot(ordered, acc, out, a, 1, b, 1, 2) == 65535.99609375);
  // The engine: one rounding of the exact sum (it once formed 65536 in double and rounded that).
  const GemmSpec g{format_by_name("fp16"), format_by_name("fp16"), acc, out, ordered};
  double c = 0;
  gemm(g, 1, 1, 2, a, 2, b, 1, &c, 1);
  CHECK(c == 65535.99609375);
}
