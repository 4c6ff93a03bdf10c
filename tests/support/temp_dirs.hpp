// Test support: output folders of the tests under the system temp folder, one name per call (the process id
// and a counter in it, so parallel test programs and repeated tags never share one), absent when returned
// and removed with everything in them when the test program exits.
#pragma once

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <mutex>
#include <string>
#include <system_error>
#include <vector>

namespace pasa::test {

inline std::filesystem::path fresh_dir(const std::string& tag) {
  struct Removed {
    std::mutex m;
    std::vector<std::filesystem::path> dirs;
    ~Removed() {
      std::error_code ec;
      for (const auto& d : dirs) std::filesystem::remove_all(d, ec);
    }
  };
  static Removed removed;
  static std::atomic<int> counter{0};
  const std::filesystem::path d = std::filesystem::temp_directory_path() /
                                  ("pasa-test-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
  std::filesystem::remove_all(d);
  const std::lock_guard<std::mutex> lock(removed.m);
  removed.dirs.push_back(d);
  return d;
}

}  // namespace pasa::test
