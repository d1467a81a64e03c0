#!/usr/bin/env bash
# Durability benchmarks (issue 5), recorded in bench/RESULTS.md:
#   1. restart-to-ready at each entry count: lmcc-bench's restart scenario fills a
#      node (4 workers, 250-chunk prompts), restarts it with SIGTERM and measures
#      until every sampled lookup is full again (and how many full syncs the node
#      asked for); two more restarts of the filled node measure exec -> /readyz 200
#      and the node's own load time; disk bytes per entry before and after.
#   2. ingest with persistence on vs off, alternating, fresh node each run:
#      unthrottled applied ops/s and a steady --rate 400000.
# Usage: bench/restart_bench.sh [BUILD_DIR] [ENTRIES ...]   (default: build 1000000 10000000)
# Everything lives in a temp dir that is printed (logs, JSON reports) and kept.
set -euo pipefail
build=${1:-build}
shift || true
sizes=("$@")
[ ${#sizes[@]} -eq 0 ] && sizes=(1000000 10000000)
ingest_runs=${INGEST_RUNS:-3}
py=/usr/bin/python3
work=$(mktemp -d /tmp/lmcc-restart-bench.XXXXXX)
echo "work dir: $work"
free_port() { $py -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
http=$(free_port); pull=$(free_port); reply=$(free_port); hb=$(free_port)
ep=(--pull "127.0.0.1:$pull" --reply "127.0.0.1:$reply" --http "127.0.0.1:$http")
lmcc=$(realpath "$build/lmcc")
bench=$(realpath "$build/lmcc-bench")

metric() { # metric NAME -> value from /metrics (first sample line)
  local text
  text=$(curl -sf "http://127.0.0.1:$http/metrics") || return 0
  awk -v n="$1" 'index($0, n) == 1 {print $2; exit}' <<< "$text"
}

# The node command, shared by this script and the restart hook it writes.
cat > "$work/start-node.sh" <<EOF
#!/usr/bin/env bash
# start-node.sh DATA_DIR PERSISTENCE LOG: starts a node detached, waits for /readyz 200,
# prints "ready_ms=<exec to ready>".
t0=\$(date +%s%N)
setsid "$lmcc" node --host 127.0.0.1 --port $http --log-level info \\
  --monitor-ports '{"pull":$pull,"reply":$reply,"heartbeat":$hb}' \\
  --data-dir "\$1" --persistence "\$2" > "\$3" 2>&1 < /dev/null &
echo \$! > "$work/pid"
until curl -sf "http://127.0.0.1:$http/readyz" > /dev/null; do
  kill -0 \$(cat "$work/pid") 2> /dev/null || { echo "node died: \$3" >&2; exit 1; }
  sleep 0.01
done
echo "ready_ms=\$(( (\$(date +%s%N) - t0) / 1000000 ))"
EOF
cat > "$work/stop-node.sh" <<EOF
#!/usr/bin/env bash
pid=\$(cat "$work/pid")
kill -TERM \$pid 2> /dev/null || exit 0
while kill -0 \$pid 2> /dev/null; do sleep 0.02; done
EOF
# The restart hook lmcc-bench runs: note keys and disk bytes, stop, start again.
cat > "$work/restart-node.sh" <<EOF
#!/usr/bin/env bash
set -e
m=\$(curl -sf "http://127.0.0.1:$http/metrics")
keys=\$(awk 'index(\$0, "lmcache:cache_controller_kv_pool_keys_count") == 1 {print \$2; exit}' <<< "\$m")
disk=\$(awk 'index(\$0, "lmcc_store_disk_bytes") == 1 {print \$2; exit}' <<< "\$m")
"$work/stop-node.sh"
n=\$(ls "$work"/node-*.log | wc -l)
r=\$("$work/start-node.sh" "\$DATA_DIR" on "$work/node-\$n.log")
echo "keys_before=\$keys disk_bytes_before=\$disk \$r log=$work/node-\$n.log" >> "$work/restarts.txt"
EOF
chmod +x "$work"/*.sh

load_seconds() { grep -o 'store-loaded.*seconds=[0-9.]*' "$1" | grep -o 'seconds=[0-9.]*$' | cut -d= -f2; }

echo "== restart-to-ready"
for n in "${sizes[@]}"; do
  export DATA_DIR="$work/data-$n"
  : > "$work/restarts.txt"
  # Start once and stop: the store exists, so the measured node is a restarted
  # one from the beginning (a node on a brand-new store asks every worker for a
  # full sync once, as LMCache does, which would blur the figure).
  "$work/start-node.sh" "$DATA_DIR" on "$work/node-0.log" > /dev/null
  "$work/stop-node.sh"
  "$work/start-node.sh" "$DATA_DIR" on "$work/node-1.log" > /dev/null
  prompts=$(( n / 4 / 250 ))
  "$bench" restart "${ep[@]}" --workers 4 --prompts "$prompts" --prompt-chunks 250 \
    --heartbeat-interval 0.5 --duration 300 --settle-timeout 900 --keep-registered \
    --restart-cmd "$work/restart-node.sh" --json "$work/restart-$n.json" > "$work/bench-restart-$n.log" 2>&1 ||
    { echo "lmcc-bench restart failed, see $work/bench-restart-$n.log"; tail -5 "$work/bench-restart-$n.log"; }
  # Two more restarts of the filled node (its workers stay registered, idle).
  "$work/restart-node.sh"
  "$work/restart-node.sh"
  disk_after=$(metric lmcc_store_disk_bytes)
  keys_after=$(metric lmcache:cache_controller_kv_pool_keys_count)
  "$work/stop-node.sh"
  echo "-- $n entries (data dir $(du -sb "$DATA_DIR" | cut -f1) bytes after stop)"
  $py - "$work/restart-$n.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
m = r["metrics"]
keys = ["full_again_s", "http_back_s", "first_miss_s", "command_exit_s", "full_syncs"]
print("   bench:", " ".join(f"{k}={m[k]:.3f}" if isinstance(m.get(k), float) else f"{k}={m.get(k)}" for k in keys),
      "result=" + ("PASS" if r.get("result") == "PASS" else "FAIL"))
EOF
  while read -r line; do
    log=${line##*log=}
    echo "   restart: ${line% log=*} load_s=$(load_seconds "$log")"
  done < "$work/restarts.txt"
  echo "   after the restarts: keys=$keys_after disk_bytes=$disk_after"
  rm -rf "$DATA_DIR"
done

echo "== ingest, persistence on vs off (fresh node per run, alternating)"
for run in $(seq "$ingest_runs"); do
  for mode in on off; do
    for rate in 0 400000; do
      dir="$work/ingest-$run-$mode-$rate"
      "$work/start-node.sh" "$dir" "$mode" "$work/node-ingest-$run-$mode-$rate.log" > /dev/null
      args=(--duration 3 --settle-timeout 120 --keep-registered)
      [ "$rate" != 0 ] && args+=(--rate "$rate")
      "$bench" ingest "${ep[@]}" "${args[@]}" --json "$dir.json" > "$dir.bench.log" 2>&1 || true
      disk=$(metric lmcc_store_disk_bytes || true)
      keys=$(metric lmcache:cache_controller_kv_pool_keys_count)
      "$work/stop-node.sh"
      $py - "$dir.json" "$run" "$mode" "$rate" "${disk:-0}" "$keys" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
m = r["metrics"]
ok = r.get("result") == "PASS"
disk, keys = float(sys.argv[5] or 0), float(sys.argv[6] or 0)
per = f"{disk / keys:.1f}" if keys and disk else "-"
print(f"   run {sys.argv[2]} persistence={sys.argv[3]:3} rate={sys.argv[4]:>6}: "
      f"applied={m.get('applied_ops_per_s', 0) / 1e6:.3f} M ops/s sent={m.get('sent_ops_per_s', 0) / 1e6:.3f} M "
      f"max_lag={m.get('max_lag', 0):.0f} keys={keys:.0f} disk_bytes_per_key={per} "
      f"result={'PASS' if ok else 'FAIL'}")
EOF
      rm -rf "$dir"
    done
  done
done
