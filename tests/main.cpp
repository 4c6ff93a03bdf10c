// The one Catch2 main: compiled once, shared by every tests/<layer>/test_*.cpp.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
