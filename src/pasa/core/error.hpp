// User-input errors: the message names what was wrong and where (file, JSON path, value). Apps print
// what() and exit non-zero; library code throws these for anything a user can get wrong.
#pragma once

#include <stdexcept>
#include <string>

namespace pasa {

struct InputError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace pasa
