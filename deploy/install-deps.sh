#!/usr/bin/env bash
# Installs every Debian 12 package lmcc's build, tests and tools need.
# Idempotent: when all packages are already installed it touches no network.
set -euo pipefail

packages=(
  # toolchain
  build-essential cmake ninja-build pkg-config clang clang-format libclang-rt-14-dev
  # libraries (see README "Which library does what")
  libcaf-dev libmsgpack-cxx-dev librocksdb-dev libspdlog-dev libfmt-dev
  libzmq3-dev cppzmq-dev libcpp-httplib-dev nlohmann-json3-dev libyaml-cpp-dev
  libcli11-dev libabsl-dev libsimdjson-dev libssl-dev
  # tests and benchmarks
  googletest libgtest-dev libgmock-dev libbenchmark-dev
  # python test tooling (cross-checks against CPython, wire-level test peers)
  python3 python3-zmq python3-msgpack python3-pytest
  # the soak's graphs (tests/soak/graphs.py)
  python3-matplotlib
  # prometheus and promtool: the Prometheus test (tests/prometheus) scrapes a
  # cluster with them and checks deploy/prometheus/
  prometheus
  # the dashboard test (tests/integration/test_dashboard.py) opens GET /dashboard
  # in headless Chromium and drives it over the DevTools protocol (a websocket)
  chromium python3-websocket
)

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
