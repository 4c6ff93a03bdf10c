# Cross-compiling for 64-bit ARM (aarch64) with Debian's cross compiler, the target's libraries from dpkg
# multiarch (libmpfr-dev:arm64, libgmp-dev:arm64, libfmt-dev:arm64; the header-only Boost, CLI11,
# nlohmann_json and Catch2 are the host's), run under qemu-user (scripts/ci-matrix.sh aarch64,
# docs/building-and-testing.md):
#   cmake -S . -B build-aarch64 --toolchain cmake/toolchain-aarch64-linux-gnu.cmake -DPASA_STATIC=ON
# (static: Debian 12's qemu-user hangs at the first std::thread of a dynamically linked aarch64 program)
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
# CTest runs the test programs (and CMake's own checks) through the emulator, with the target's loader and
# libraries from /usr/aarch64-linux-gnu and multiarch's /usr/lib/aarch64-linux-gnu.
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64;-L;/usr/aarch64-linux-gnu)
# Libraries and pkg-config files of the target only (the host's x86-64 ones would link wrongly); headers and
# CMake package files are searched as usual (multiarch keeps the target's under .../aarch64-linux-gnu/).
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)
# -march=native means the build machine's CPU: the compiler's default (armv8-a) instead.
set(PASA_ARCH "" CACHE STRING "target CPU for -march (empty: the compiler's default)")
