#!/usr/bin/env bash
# The issue 9/10 figure set (bench/RESULTS.md): steady 100 k ops/s and unthrottled
# ingest with persistence on and off, idle /lookup and P2P latency, a 30 s flood,
# memory at 1 M / 10 M entries (TP 1 and 2). A fresh node per run, on free ports.
# Usage: bench/issue9_suite.sh [BUILD_DIR] [OUT_DIR]
# Each run leaves OUT_DIR/<name>.txt (report, stop time, load average) and .json.
set -uo pipefail
build=$(realpath "${1:-build}")
out=${2:-$(mktemp -d /tmp/lmcc-issue9.XXXXXX)}
mkdir -p "$out"
echo "results in $out"
py=/usr/bin/python3
free_port() { $py -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

run() { # run NAME "node args" bench args...
  local name=$1 node_args=$2
  shift 2
  local dir http pull reply hb pid
  dir=$(mktemp -d /tmp/lmcc-issue9-node.XXXXXX)
  http=$(free_port) pull=$(free_port) reply=$(free_port) hb=$(free_port)
  local load0 t0
  load0=$(cut -d' ' -f1 /proc/loadavg) t0=$(date -u +%T)
  # shellcheck disable=SC2086 # node_args is a list of words
  "$build/lmcc" node --host 127.0.0.1 --port "$http" --data-dir "$dir/data" --log-level info \
    --monitor-ports "{\"pull\":$pull,\"reply\":$reply,\"heartbeat\":$hb}" $node_args \
    > "$dir/node.log" 2>&1 &
  pid=$!
  until curl -sf "http://127.0.0.1:$http/readyz" > /dev/null; do sleep 0.05; done
  "$build/lmcc-bench" "$@" --pull "127.0.0.1:$pull" --reply "127.0.0.1:$reply" \
    --http "127.0.0.1:$http" --pid "$pid" --instance-prefix s9 --json "$out/$name.json" \
    > "$out/$name.txt" 2>&1
  local s0 s1
  s0=$(date +%s.%N)
  kill -TERM "$pid"
  wait "$pid"
  s1=$(date +%s.%N)
  echo "stop_seconds=$($py -c "print(round($s1-$s0,3))") load_start=$load0" \
    "load_end=$(cut -d' ' -f1 /proc/loadavg) start=$t0 end=$(date -u +%T) node_log=$dir/node.log" \
    >> "$out/$name.txt"
  grep -E "RESULT|CPU per applied op \(push|applied ops/s|p50|p99 " "$out/$name.txt" | sed "s/^/$name: /"
}

for i in 1 2 3; do
  run "rate-on-$i" "" ingest --rate 100000 --duration 20 --settle-timeout 120
  run "rate-off-$i" "--persistence off" ingest --rate 100000 --duration 20 --settle-timeout 120
done
for i in 1 2; do
  run "ops-on-$i" "" ingest --ops 20000000 --settle-timeout 600 --push-timeout 900
  run "ops-off-$i" "--persistence off" ingest --ops 20000000 --settle-timeout 600 --push-timeout 900
done
for i in 1 2 3; do
  run "lookup-$i" "" lookup --duration 10 --requests 2000 --ingest-fraction 0
  run "p2p-$i" "" p2p --tp 2 --duration 10 --requests 2000 --ingest-fraction 0
done
run flood "" flood --duration 30 --settle-timeout 600
run memory-tp1 "" memory --entries 1000000,10000000
run memory-tp2 "" memory --tp 2 --entries 1000000,10000000
