// The golden's fast path evaluated one query row at a time, as golden.cpp did before its rows were grouped
// and tiled (issues 11 and 41): Dot2 scores of the row against transposed keys (score_rows.hpp), scalar
// exp_dd, a sequential Σp and a Σp·v streaming all of V, every sum in key order. The tiled golden must give
// its bits exactly (tests/exact/test_golden_tiles.cpp). Test-only: compiled into pasa-tests.
#pragma once

#include <vector>

#include "pasa/exact/golden.hpp"

namespace pasa::testref {

struct RowGolden {
  std::vector<double> o, lse;
  std::vector<double> bound;  // per row: the fast path's relative bound E, -1 for a fully masked row
  int guaranteed_bits = 1000;  // as golden_attention aggregates them over blocks of kGoldenRowBlock rows
  double error_bound = 0;
  bool fallback = false;  // some block's bound is below 64 bits: golden_attention redoes it with MPFR
};

// Finite inputs whose magnitudes pass the golden's fast-path range test.
RowGolden golden_row_at_a_time(const AttentionInputs& in);

}  // namespace pasa::testref
