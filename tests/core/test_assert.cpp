// PASA_ASSERT where it is active (this file turns it on, as Debug and sanitizer builds do): a failed check
// throws std::logic_error naming the file, the line and the condition; a passing one does nothing.
#define PASA_ASSERTS 1
#include "pasa/core/assert.hpp"

#include <stdexcept>
#include <string>
#include <type_traits>

#include <catch2/catch.hpp>

TEST_CASE("PASA_ASSERT, active, throws naming file, line and condition", "[assert]") {
  int evaluated = 0;
  PASA_ASSERT(++evaluated == 1);
  CHECK(evaluated == 1);
  const int x = -1;
  try {
    PASA_ASSERT(x > 0);
    FAIL("PASA_ASSERT(x > 0) with x = -1 did not throw");
  } catch (const std::logic_error& e) {
    const std::string what = e.what();
    CHECK_THAT(what, Catch::Contains("test_assert.cpp:"));
    CHECK_THAT(what, Catch::Contains("PASA_ASSERT(x > 0) failed"));
  }
  // A condition with a comma (a template argument list) is one condition.
  CHECK_THROWS_AS(PASA_ASSERT(std::is_same_v<int, long>), std::logic_error);
}
