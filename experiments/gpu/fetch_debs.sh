#!/bin/sh
# experiments/gpu/fetch_debs.sh: downloads, into build-debs/ (ignored), the Debian 12 packages that
# experiments/gpu/device_build.sh unpacks on the GPU machine, which cannot download (about 14 MB).
set -e
cd "$(dirname "$0")/../.."
mkdir -p build-debs && cd build-debs
apt-get download libmpfr-dev libmpfr6 libgmp-dev libgmp10 libgmpxx4ldbl libcli11-dev libfmt-dev libfmt9 \
  nlohmann-json3-dev catch2 libboost1.74-dev zlib1g-dev pkgconf pkgconf-bin libpkgconf3 pkg-config
