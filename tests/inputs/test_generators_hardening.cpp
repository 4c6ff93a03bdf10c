// Generators on degenerate parameters: an interval that is empty in double must not hang Boost's
// uniform distribution, and values beyond double's range are refused before anything is drawn.
#include <catch2/catch.hpp>

#include <cmath>

#include "pasa/core/error.hpp"
#include "pasa/inputs/generators.hpp"
#include "pasa/numeric/format.hpp"

using namespace pasa;

TEST_CASE("generators: x0 ± am that round to one double give that double (no endless redraw)", "[generators]") {
  TensorGen g;
  g.x0 = 20;
  g.am = 1e-15;  // below half an ulp of 20 (1.8e-15): x0 - am == x0 + am == 20 in double
  const Tensor t = generate_tensor(g, {1, 1, 16, 8}, format_by_name("fp64"), 1, "q", 1);
  for (double x : t.data) CHECK(x == 20);
  g.x0 = 1e17;
  g.am = 0.5;
  const Tensor big = generate_tensor(g, {1, 1, 4, 4}, format_by_name("fp64"), 1, "q", 1);
  for (double x : big.data) CHECK(x == 1e17);
  // An interval one ulp wide still draws (Boost keeps every value below the upper end).
  g.x0 = 1.0;
  g.am = 0x1p-53;
  const Tensor ulp = generate_tensor(g, {1, 1, 64, 8}, format_by_name("fp64"), 1, "q", 1);
  for (double x : ulp.data) CHECK((x == 1.0 || x == 1.0 - 0x1p-53));
}

TEST_CASE("generators: values beyond double's range are refused", "[generators]") {
  TensorGen g;
  g.x0 = 1e308;
  g.am = 1e308;
  CHECK_THROWS_WITH(validate(g, "/generator"), Catch::Contains("/generator: x0 = 1e+308, am = 1e+308"));
  CHECK_THROWS_AS(generate_tensor(g, {1, 1, 2, 2}, format_by_name("fp16"), 1, "q", 1), InputError);
  g.kind = GenKind::hybrid;
  g.x0 = 0;
  g.am = 1e307;  // 40 sigma beyond double
  CHECK_THROWS_AS(validate(g, "/q"), InputError);
  g.am = 1e300;
  CHECK_NOTHROW(validate(g, "/q"));
}
