#!/usr/bin/env bash
# A three-node cluster (`lmcc cluster up --nodes 3`, R = 2) against one `lmcc node`,
# the same lmcc-bench runs against both through `--nodes`: steady ingest at
# 100 k ops/s, /lookup and P2P latency idle and under a 100 k ops/s ingest. A
# fresh cluster / node (fresh data dir, persistence on) per run. The node
# processes are found by lmcc-bench through each node's GET /threads; CPU us
# per applied op is summed over them, RSS and entries are given per node.
# Usage: bench/cluster_compare.sh [BUILD_DIR] [OUT_DIR]
# Each run leaves OUT_DIR/<name>.txt (report, load average, node-log warnings)
# and OUT_DIR/<name>.json.
set -uo pipefail
build=$(realpath "${1:-build}")
out=${2:-$(mktemp -d /tmp/lmcc-cluster-compare.XXXXXX)}
mkdir -p "$out"
echo "results in $out"
base=${BASE_PORT:-31000}  # cluster: node i has HTTP base+10i, pull +1, reply +2
single=${SINGLE_PORT:-32000}
duration=${DURATION:-20}

start_target() { # start_target cluster3|node1 DIR -> sets launcher pid and NODES
  local target=$1 dir=$2
  rm -rf "$dir"
  mkdir -p "$dir"
  if [ "$target" = cluster3 ]; then
    "$build/lmcc" cluster up --nodes 3 --data-dir "$dir" --base-port "$base" \
      > "$dir/up.out" 2> "$dir/up.err" &
    launcher=$!
    until grep -q '^cluster-ready' "$dir/up.out"; do
      kill -0 "$launcher" 2> /dev/null || { cat "$dir/up.err"; return 1; }
      sleep 0.1
    done
    NODES="127.0.0.1:$base,127.0.0.1:$((base + 10)),127.0.0.1:$((base + 20))"
  else
    "$build/lmcc" node --host 127.0.0.1 --port "$single" --data-dir "$dir/data" \
      --monitor-ports "{\"pull\":$((single + 1)),\"reply\":$((single + 2)),\"heartbeat\":$((single + 3))}" \
      > "$dir/node.log" 2>&1 &
    launcher=$!
    until curl -sf "http://127.0.0.1:$single/readyz" > /dev/null; do
      kill -0 "$launcher" 2> /dev/null || { cat "$dir/node.log"; return 1; }
      sleep 0.05
    done
    NODES="127.0.0.1:$single"
  fi
}

stop_target() { # stop_target cluster3|node1
  if [ "$1" = cluster3 ]; then kill -INT "$launcher"; else kill -TERM "$launcher"; fi
  wait "$launcher"
}

run() { # run TARGET NAME bench-args...
  local target=$1 name=$2
  shift 2
  local dir=/tmp/lmcc-compare-$target load0 t0
  start_target "$target" "$dir" || { echo "$name: could not start $target"; return; }
  load0=$(cut -d' ' -f1 /proc/loadavg) t0=$(date -u +%T)
  "$build/lmcc-bench" "$@" --nodes "$NODES" --instance-prefix cmp --json "$out/$name.json" \
    > "$out/$name.txt" 2>&1
  echo "load_start=$load0 load_end=$(cut -d' ' -f1 /proc/loadavg) start=$t0 end=$(date -u +%T)" \
    >> "$out/$name.txt"
  stop_target "$target"
  {
    echo "node-log warnings and errors:"
    grep -hE '\[(warning|error|critical)\]' "$dir"/n*/node.log "$dir"/node.log 2> /dev/null | head -20
  } >> "$out/$name.txt"
  grep -E "RESULT|applied ops/s|CPU per applied op \(push|CPU summed|p50|p99 |RSS|per entry" \
    "$out/$name.txt" | sed "s/^/$name: /"
}

for target in cluster3 node1; do
  run "$target" "$target-ingest" ingest --rate 100000 --duration "$duration" --settle-timeout 120
  run "$target" "$target-lookup" lookup --clients 3 --duration 10 --requests 3000 \
    --peak-ops 200000 --ingest-fraction 0.5
  run "$target" "$target-p2p" p2p --tp 2 --clients 3 --duration 10 --requests 3000 \
    --peak-ops 200000 --ingest-fraction 0.5
done
