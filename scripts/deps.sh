#!/usr/bin/env bash
# Installs the Debian 12 packages pasa needs, only those that are missing.
set -euo pipefail
pkgs=(build-essential cmake pkg-config libmpfr-dev libgmp-dev zlib1g-dev libboost-dev libcli11-dev libfmt-dev
      nlohmann-json3-dev catch2 libopenblas-dev gnuplot-nox python3
      pybind11-dev python3-dev python3-numpy python3-pytest  # the Python module (python/) and its tests
      python3-torch)  # pasa_capture's tests build small PyTorch models (tests/python/test_capture.py)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}" >&2
  sudo_cmd=""; [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}"
fi
