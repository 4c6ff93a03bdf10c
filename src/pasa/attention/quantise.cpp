#include "pasa/attention/quantise.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "pasa/attention/algorithm_spec.hpp"
#include "pasa/core/error.hpp"
#include "pasa/numeric/block_scale.hpp"
#include "pasa/numeric/double_double.hpp"
#include "pasa/numeric/round.hpp"

namespace pasa {

const char* quant_scale_name(QuantScale s) {
  switch (s) {
    case QuantScale::none: return "none";
    case QuantScale::tensor: return "tensor";
    case QuantScale::head: return "head";
    case QuantScale::block: return "block";
  }
  return "?";
}

QuantScale quant_scale_by_name(std::string_view name) {
  for (QuantScale s : {QuantScale::none, QuantScale::tensor, QuantScale::head, QuantScale::block})
    if (name == quant_scale_name(s)) return s;
  throw InputError("unknown quantisation scale granularity \"" + std::string(name) +
                   "\"; known: none, tensor, head, block");
}

std::vector<double> hadamard_signs(std::size_t D, std::uint64_t seed) {
  RandomBits bits(seed);
  std::vector<double> s(D);
  for (auto& x : s) x = (bits.next() >> 63) ? -1.0 : 1.0;
  return s;
}

void hadamard_rows(double* x, std::size_t rows, std::size_t D, const std::vector<double>& signs) {
  if (D == 0 || (D & (D - 1)) != 0)
    throw InputError("hadamard: the head dimension D must be a power of two, got " + std::to_string(D));
  if (signs.size() != D) throw InputError("hadamard: " + std::to_string(signs.size()) + " signs for D = " + std::to_string(D));
  const double norm = 1.0 / std::sqrt(static_cast<double>(D));
  for (std::size_t r = 0; r < rows; ++r) {
    double* v = x + r * D;
    for (std::size_t i = 0; i < D; ++i) v[i] *= signs[i];  // exact
    // Sylvester order: H_2n = [[H_n, H_n], [H_n, −H_n]] (the fast Walsh–Hadamard transform)
    for (std::size_t h = 1; h < D; h *= 2)
      for (std::size_t i = 0; i < D; i += 2 * h)
        for (std::size_t j = i; j < i + h; ++j) {
          const double a = v[j], b = v[j + h];
          v[j] = a + b;
          v[j + h] = a - b;
        }
    for (std::size_t i = 0; i < D; ++i) v[i] *= norm;
  }
}

// The block-scale registry's `recip` rule (numeric/block_scale.cpp), FA3's scale.
double fp8_scale(double amax, double fmax) { return fp32_recip_scale(amax, fmax); }

Format block_value_format(const BlockScheme& s) {
  const ElementSpec e = element_spec(s);
  const int scale_bits = s.scale_format == "e8m0" ? 0 : format_by_name(s.scale_format).p;
  return custom_format(std::min(53, e.p + scale_bits + (s.tensor_scale ? 24 : 0)), 1023);
}

void block_quantise_heads(double* data, std::size_t heads, std::size_t S, std::size_t D, const BlockScheme& s,
                          bool operand_b, bool along_rows, RandomBits* rng) {
  if (!along_rows) {
    const BlockQuantised q = block_quantise(data, heads, S, D, s, operand_b, rng);
    std::copy(q.values.begin(), q.values.end(), data);
    return;
  }
  // V: each head transposed to D × S, so that the blocks run along the keys, and back; `row` (per token) and
  // `column` (per channel) keep their meaning in the operand's own layout (tokens × D).
  BlockScheme st = s;
  for (GroupLayout* g : {&st.a, &st.b})
    if (g->group == Grouping::row) g->group = Grouping::column;
    else if (g->group == Grouping::column) g->group = Grouping::row;
  std::vector<double> t(heads * S * D);
  for (std::size_t h = 0; h < heads; ++h)
    for (std::size_t r = 0; r < S; ++r)
      for (std::size_t d = 0; d < D; ++d) t[(h * D + d) * S + r] = data[(h * S + r) * D + d];
  const BlockQuantised q = block_quantise(t.data(), heads, D, S, st, operand_b, rng);
  for (std::size_t h = 0; h < heads; ++h)
    for (std::size_t r = 0; r < S; ++r)
      for (std::size_t d = 0; d < D; ++d) data[(h * S + r) * D + d] = q.values[(h * D + d) * S + r];
}

void quantise(double* x, std::size_t n, double scale, const StageSpec& stage, RandomBits* rng) {
  for (std::size_t i = 0; i < n; ++i) {
    const DD q = exact_quotient(x[i], scale);
    x[i] = std::isfinite(q.hi) ? round_sum(q.hi, q.lo, stage.format, stage.round, rng)
                               : round(q.hi, stage.format, stage.round, rng);
  }
}

std::vector<double> quantise_groups(double* data, std::size_t heads, std::size_t S, std::size_t D, std::size_t rows,
                                    const QuantOptions& qo, const StageSpec& stage, RandomBits* rng) {
  const std::size_t nb = (S + rows - 1) / rows;
  auto amax = [](const double* x, std::size_t n) {
    double m = 0;
    for (std::size_t i = 0; i < n; ++i) m = std::max(m, std::fabs(x[i]));
    return m;
  };
  const double tensor_scale = fp8_scale(amax(data, heads * S * D), qo.fmax);
  std::vector<double> scales(heads * nb, 1.0);
  for (std::size_t h = 0; h < heads; ++h) {
    double* head = data + h * S * D;
    const double head_scale = fp8_scale(amax(head, S * D), qo.fmax);
    for (std::size_t i = 0; i < nb; ++i) {
      double* x = head + i * rows * D;
      const std::size_t n = (std::min(S, (i + 1) * rows) - i * rows) * D;
      const double sc = qo.scales == QuantScale::tensor ? tensor_scale
                        : qo.scales == QuantScale::head ? head_scale
                                                        : fp8_scale(amax(x, n), qo.fmax);
      quantise(x, n, sc, stage, rng);
      scales[h * nb + i] = sc;
    }
  }
  return scales;
}

}  // namespace pasa
