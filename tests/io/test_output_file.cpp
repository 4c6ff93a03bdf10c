// The one output writer (io/output_file, issue 23 item 1) on every kind of target: a regular file and a new
// name are replaced atomically, a symlink is followed (the link stays a link), /dev/null, a FIFO and a
// socket are written through and stay what they are, a folder and a missing folder are refused.
#include <catch2/catch.hpp>

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>

#include "pasa/core/error.hpp"
#include "pasa/io/csv.hpp"
#include "pasa/io/npy.hpp"
#include "pasa/io/output_file.hpp"

using namespace pasa;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  fs::path dir;
  TempDir() {
    static int counter = 0;
    dir = fs::temp_directory_path() / ("pasa-test-output-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

mode_t lmode(const fs::path& p) {
  struct stat st {};
  REQUIRE(::lstat(p.c_str(), &st) == 0);
  return st.st_mode;
}

// Names in `dir` (no temporary or probe file may be left behind).
std::size_t entries(const fs::path& dir) {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
  return n;
}

}  // namespace

TEST_CASE("output writer: a regular file and a new name are replaced atomically", "[output]") {
  TempDir t;
  const fs::path f = t.dir / "a.csv";
  write_file_atomic(f, "old\n");
  ::chmod(f.c_str(), 0600);
  const auto ino = fs::status(f).type();
  write_file_atomic(f, "new\n");
  CHECK(read_file(f) == "new\n");
  CHECK(ino == fs::file_type::regular);
  CHECK((lmode(f) & 07777) == 0600);  // the replaced file's permission bits are kept
  CHECK(entries(t.dir) == 1);          // no temporary file left
  CHECK(!output_target(t.dir / "b.csv").write_through);
  check_output_paths({{"--csv", f}, {"--json", t.dir / "b.json"}});
}

TEST_CASE("output writer: a symlink is followed and stays a link", "[output]") {
  TempDir t;
  fs::create_directories(t.dir / "real");
  fs::create_directories(t.dir / "links");
  const fs::path real = t.dir / "real" / "x.npy", link = t.dir / "links" / "x.npy";
  write_file_atomic(real, "old");
  fs::create_symlink("../real/x.npy", link);  // relative to the link's folder
  check_output_paths({{"--out-npy", link}});
  write_npy(link, make_npy(std::vector<double>{1.5, -2.0}, {2}, NpyDtype::f64));
  CHECK(S_ISLNK(lmode(link)));
  CHECK(S_ISREG(lmode(real)));
  CHECK(npy_values(read_npy(real)) == std::vector<double>{1.5, -2.0});
  CHECK(entries(t.dir / "real") == 1);
  CHECK(entries(t.dir / "links") == 1);
  // The link and its target are the same file for the duplicate check.
  CHECK_THROWS_WITH(check_output_paths({{"--out-npy", link}, {"--golden-npy", real}}), Catch::Contains("name the same file"));
  // A chain of links ends at the real file.
  const fs::path link2 = t.dir / "links" / "y.npy";
  fs::create_symlink(link, link2);
  write_file_atomic(link2, "chain");
  CHECK(read_file(real) == "chain");
  CHECK(S_ISLNK(lmode(link2)));
}

TEST_CASE("output writer: a dangling symlink creates its target, as the shell's > does", "[output]") {
  TempDir t;
  const fs::path link = t.dir / "out.csv";
  fs::create_symlink("target.csv", link);
  check_output_paths({{"--csv", link}});
  write_file_atomic(link, "rows\n");
  CHECK(S_ISLNK(lmode(link)));
  CHECK(read_file(t.dir / "target.csv") == "rows\n");
  // Into a folder that does not exist: refused before any work, and nothing is created.
  const fs::path bad = t.dir / "bad.csv";
  fs::create_symlink("nodir/target.csv", bad);
  CHECK_THROWS_WITH(check_output_paths({{"--csv", bad}}), Catch::Contains("--csv " + bad.string() + ": the folder") &&
                                                            Catch::Contains("does not exist"));
  CHECK_THROWS_AS(write_file_atomic(bad, "x"), InputError);
  // A loop of links is refused by name.
  fs::create_symlink("loop2", t.dir / "loop1");
  fs::create_symlink("loop1", t.dir / "loop2");
  CHECK_THROWS_WITH(check_output_paths({{"--csv", t.dir / "loop1"}}), Catch::Contains("symbolic links"));
  CHECK_THROWS_AS(write_file_atomic(t.dir / "loop1", "x"), InputError);
  CHECK(entries(t.dir) == 5);  // out.csv, target.csv, bad.csv, loop1, loop2
}

TEST_CASE("output writer: /dev/null is written through and stays a character device", "[output]") {
  REQUIRE(S_ISCHR(lmode("/dev/null")));
  const OutputTarget t = output_target("/dev/null", "--out-npy");
  CHECK(t.write_through);
  CHECK(t.path == "/dev/null");
  check_output_paths({{"--out-npy", "/dev/null"}, {"--golden-npy", "/dev/null"}});  // both may discard
  write_files_atomic({{"/dev/null", "a"}, {"/dev/null", std::string(1 << 20, 'b')}});
  write_npy("/dev/null", make_npy(std::vector<double>{1.0}, {1}, NpyDtype::f64));
  CHECK(S_ISCHR(lmode("/dev/null")));
}

TEST_CASE("output writer: a FIFO is written through to its reader", "[output]") {
  TempDir t;
  const fs::path fifo = t.dir / "pipe";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  check_output_paths({{"--csv", fifo}});
  const std::string content(300000, 'x');  // more than a pipe's buffer: the reader must drain it
  std::string got;
  std::thread reader([&] {  // (a plain stream: pasa's own readers take regular files only)
    std::ifstream in(fifo, std::ios::binary);
    got.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  });
  write_file_atomic(fifo, content);
  reader.join();
  CHECK(got == content);
  CHECK(S_ISFIFO(lmode(fifo)));
  CHECK(entries(t.dir) == 1);
}

TEST_CASE("output writer: a socket is connected and written", "[output]") {
  TempDir t;
  const fs::path sock = t.dir / "sock";
  const int srv = ::socket(AF_UNIX, SOCK_STREAM, 0);
  REQUIRE(srv >= 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strcpy(addr.sun_path, sock.c_str());
  REQUIRE(::bind(srv, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(::listen(srv, 1) == 0);
  std::string got;
  std::thread reader([&] {
    const int c = ::accept(srv, nullptr, nullptr);
    char buf[4096];
    for (ssize_t n; (n = ::read(c, buf, sizeof buf)) > 0;) got.append(buf, static_cast<std::size_t>(n));
    ::close(c);
  });
  write_file_atomic(sock, "over the socket\n");
  reader.join();
  ::close(srv);
  CHECK(got == "over the socket\n");
  CHECK(S_ISSOCK(lmode(sock)));
}

TEST_CASE("output writer: a folder and a missing folder are refused, naming option and path", "[output]") {
  TempDir t;
  CHECK_THROWS_WITH(check_output_paths({{"--csv", t.dir}}), "--csv " + t.dir.string() + ": is a folder; give a file name");
  CHECK_THROWS_WITH(write_file_atomic(t.dir, "x"), Catch::Contains("is a folder"));
  const fs::path missing = t.dir / "nodir" / "x.csv";
  CHECK_THROWS_WITH(check_output_paths({{"--out", missing}}), Catch::StartsWith("--out " + missing.string() + ": the folder"));
  // All or none: a target that cannot be written leaves the other untouched and no temporary file.
  const fs::path ok = t.dir / "ok.csv";
  write_file_atomic(ok, "old");
  CHECK_THROWS_AS(write_files_atomic({{ok, "new"}, {missing, "x"}}), InputError);
  CHECK(read_file(ok) == "old");
  CHECK(entries(t.dir) == 1);
  // A regular file together with a device: the file is renamed after the device was written.
  write_files_atomic({{ok, "new"}, {"/dev/null", "x"}});
  CHECK(read_file(ok) == "new");
}
