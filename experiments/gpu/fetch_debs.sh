#!/bin/bash
# experiments/gpu/fetch_debs.sh: puts into build-debs/ (ignored) the Debian 12 packages that
# experiments/gpu/device_build.sh unpacks on the GPU machine, which cannot download (about 4 MB; the
# runtime libraries are the image's own). `run`
# carries at most 64 MiB with the tree, so Boost (9.5 MB as a package) goes as boost-subset.tar.gz: the
# folders of the headers that pasa's own Boost includes pull in (g++ -M), and Boost's CMake package files.
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p build-debs && cd build-debs
apt-get download libmpfr-dev libgmp-dev libcli11-dev libfmt-dev libfmt9 \
  nlohmann-json3-dev catch2 zlib1g-dev pkgconf pkgconf-bin libpkgconf3 pkg-config libboost1.74-dev
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
dpkg -x libboost1.74-dev_*.deb "$tmp" && rm libboost1.74-dev_*.deb
grep -rh "#include <boost/" ../src ../apps ../bench ../python | sort -u > "$tmp/b.cpp"
g++ -std=c++20 -I "$tmp/usr/include" -M "$tmp/b.cpp" | tr ' \\' '\n\n' | grep "^$tmp/usr/include/boost/" |
  sed "s|^$tmp/||" | awk -F/ '{ print (NF > 4) ? $1 "/" $2 "/" $3 "/" $4 : $0 }' | sort -u > "$tmp/list"
tar czf boost-subset.tar.gz -C "$tmp" $(cat "$tmp/list") usr/lib/x86_64-linux-gnu/cmake
