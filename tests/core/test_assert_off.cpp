// PASA_ASSERT compiled out (this file turns it off, as Release builds are): the condition is not evaluated,
// so a check costs nothing and cannot change a result.
#define PASA_ASSERTS 0
#include "pasa/core/assert.hpp"

#include <catch2/catch.hpp>

TEST_CASE("PASA_ASSERT, off, evaluates nothing", "[assert]") {
  int evaluated = 0;
  PASA_ASSERT(++evaluated > 5);
  CHECK(evaluated == 0);
}
