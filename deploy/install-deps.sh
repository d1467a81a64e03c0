#!/usr/bin/env bash
# Installs every Debian 12 package lmcc's build, tests and tools need.
# Idempotent: when all packages are already installed it touches no network.
# --build-only: only what configuring and building lmcc needs (the Dockerfile's
# build stage), none of the test tools.
set -euo pipefail

build_packages=(
  # toolchain
  build-essential cmake ninja-build pkg-config clang clang-format libclang-rt-14-dev
  # libraries (see README "Which library does what")
  libcaf-dev libmsgpack-cxx-dev librocksdb-dev libspdlog-dev libfmt-dev
  libzmq3-dev cppzmq-dev libcpp-httplib-dev nlohmann-json3-dev libyaml-cpp-dev
  libcli11-dev libabsl-dev libsimdjson-dev libssl-dev
  # tests and benchmarks (CMake's configure step looks for them)
  googletest libgtest-dev libgmock-dev libbenchmark-dev
)

packages=(
  "${build_packages[@]}"
  # python test tooling (cross-checks against CPython, wire-level test peers;
  # python3-yaml: the deploy test reads deploy/kubernetes/)
  python3 python3-zmq python3-msgpack python3-pytest python3-yaml
  # the soak's graphs (tests/soak/graphs.py)
  python3-matplotlib
  # prometheus and promtool: the Prometheus test (tests/prometheus) scrapes a
  # cluster with them and checks deploy/prometheus/
  prometheus
  # the dashboard test (tests/integration/test_dashboard.py) opens GET /dashboard
  # in headless Chromium and drives it over the DevTools protocol (a websocket)
  chromium python3-websocket
  # systemd-analyze: the deploy test verifies deploy/systemd/lmcc.service
  systemd
  # the security test (tests/integration/test_security.py) makes a CA and
  # certificates for HTTPS with the openssl command
  openssl
)

if [ "${1:-}" = "--build-only" ]; then
  packages=("${build_packages[@]}")
elif [ $# -gt 0 ]; then
  echo "usage: $0 [--build-only]" >&2
  exit 2
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
