#!/usr/bin/env bash
# The cost of mutual TLS between nodes (issue 43): two three-node clusters
# (`lmcc cluster up --nodes 3`, R = 2, persistence on), one plain and one with
# lmcc_cluster_tls_* (a CA and one node certificate made here with openssl,
# shared by the nodes through LMCACHE_CONTROLLER_* variables), measured
# alternately in one run with the same lmcc-bench commands:
#   - steady ingest at 100 k ops/s for DURATION s: CPU us per applied op,
#     summed over the three nodes (found through each node's GET /threads);
#   - /lookup through every node, idle: 3 clients, REQUESTS (3000) per phase
#     (a lookup reads the slots its node does not hold from their owners:
#     over TLS too with it on).
# A fresh cluster (fresh data dir) per run; ROUNDS pairs, plain first in each.
# Usage: bench/tls_compare.sh [BUILD_DIR] [OUT_DIR]
# Each run leaves OUT_DIR/<name>.txt (report, load average, node-log warnings)
# and OUT_DIR/<name>.json; OUT_DIR/summary.txt has one line per run.
set -uo pipefail
build=$(realpath "${1:-build}")
out=${2:-$(mktemp -d /tmp/lmcc-tls-compare.XXXXXX)}
mkdir -p "$out"
echo "results in $out"
base=${BASE_PORT:-27000} # node i: HTTP base+10i, pull +1, reply +2
duration=${DURATION:-20}
rounds=${ROUNDS:-3}
requests=${REQUESTS:-3000} # lookups per phase (the first of each pooled connection pays its handshake)

pki=$out/pki
mkdir -p "$pki"
(
  cd "$pki" || exit 1
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout ca.key \
    -out ca.pem -days 2 -subj "/CN=lmcc bench CA" 2> /dev/null
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout node.key \
    -out node.csr -subj "/CN=lmcc bench node" 2> /dev/null
  printf 'extendedKeyUsage=serverAuth,clientAuth\n' > node.ext
  openssl x509 -req -in node.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out node.pem \
    -days 2 -extfile node.ext 2> /dev/null
) || { echo "openssl failed"; exit 1; }

start_cluster() { # start_cluster plain|tls DIR -> sets launcher and NODES
  local mode=$1 dir=$2
  rm -rf "$dir"
  mkdir -p "$dir"
  if [ "$mode" = tls ]; then
    LMCACHE_CONTROLLER_LMCC_CLUSTER_TLS_CA_FILE=$pki/ca.pem \
      LMCACHE_CONTROLLER_LMCC_CLUSTER_TLS_CERT_FILE=$pki/node.pem \
      LMCACHE_CONTROLLER_LMCC_CLUSTER_TLS_KEY_FILE=$pki/node.key \
      "$build/lmcc" cluster up --nodes 3 --data-dir "$dir" --base-port "$base" \
      > "$dir/up.out" 2> "$dir/up.err" &
  else
    "$build/lmcc" cluster up --nodes 3 --data-dir "$dir" --base-port "$base" \
      > "$dir/up.out" 2> "$dir/up.err" &
  fi
  launcher=$!
  until grep -q '^cluster-ready' "$dir/up.out"; do
    kill -0 "$launcher" 2> /dev/null || { cat "$dir/up.err"; return 1; }
    sleep 0.1
  done
  # Say what ran: every node's cluster port with TLS on or off.
  local want=false
  [ "$mode" = tls ] && want=true
  for n in 1 2 3; do
    grep -q "cluster-listening.*tls=$want" "$dir/n$n/node.log" ||
      { echo "n$n is not tls=$want"; return 1; }
  done
  NODES="127.0.0.1:$base,127.0.0.1:$((base + 10)),127.0.0.1:$((base + 20))"
}

run() { # run plain|tls NAME bench-args...
  local mode=$1 name=$2
  shift 2
  local dir=/tmp/lmcc-tls-compare-$mode load0 t0
  start_cluster "$mode" "$dir" || { echo "$name: could not start the $mode cluster"; return; }
  load0=$(cut -d' ' -f1 /proc/loadavg) t0=$(date -u +%T)
  "$build/lmcc-bench" "$@" --nodes "$NODES" --instance-prefix tls --json "$out/$name.json" \
    > "$out/$name.txt" 2>&1
  echo "load_start=$load0 load_end=$(cut -d' ' -f1 /proc/loadavg) start=$t0 end=$(date -u +%T)" \
    >> "$out/$name.txt"
  kill -INT "$launcher"
  wait "$launcher"
  {
    echo "node-log warnings and errors:"
    grep -hE '\[(warning|error|critical)\]' "$dir"/n*/node.log 2> /dev/null | head -20
    echo "tls refusals: $(grep -hc 'cluster-tls-refused' "$dir"/n*/node.log | paste -sd+ | bc)"
  } >> "$out/$name.txt"
  grep -E "RESULT|applied ops/s|CPU per applied op \(push|CPU summed|p50|p99 |load_start" \
    "$out/$name.txt" | sed "s/^/$name: /" | tee -a "$out/summary.txt"
}

for round in $(seq "$rounds"); do
  for mode in plain tls; do
    run "$mode" "$mode-ingest-$round" ingest --rate 100000 --duration "$duration" \
      --settle-timeout 120
    run "$mode" "$mode-lookup-$round" lookup --clients 3 --duration 10 --requests "$requests" \
      --ingest-fraction 0
  done
done
