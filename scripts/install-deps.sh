#!/usr/bin/env bash
# Installs the Debian 12 packages hurray builds and tests with, or, given package names,
# those (`make bench` passes its own). Idempotent and non-interactive: packages already
# present are left alone, and apt-get runs only when something is missing.
set -euo pipefail

packages=("$@")
[[ ${#packages[@]} -gt 0 ]] || packages=(
  build-essential cmake ninja-build pkg-config ccache
  protobuf-compiler libprotobuf-dev
  libgrpc++-dev protobuf-compiler-grpc
  libboost1.81-dev libspdlog-dev libcli11-dev libtomlplusplus-dev libsystemd-dev
  libgtest-dev libgmock-dev
  prometheus-cpp-dev prometheus
  clang-19 libclang-rt-19-dev clang-format-19 clang-tidy-19
  libhiredis-dev nlohmann-json3-dev grpc-proto libxxhash-dev
  pybind11-dev libdlpack-dev python3-dev python3-numpy python3-torch python3-pytest
  python3-pip python3-venv python3-setuptools python3-pybind11 python3-mypy
  systemd tmux python3-yaml
  debootstrap spin abigail-tools file
)

missing=()
for package in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$package" 2>/dev/null || true)
  [[ "$status" == "installed" ]] || missing+=("$package")
done
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

sudo=()
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo=(sudo)
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -q
"${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
