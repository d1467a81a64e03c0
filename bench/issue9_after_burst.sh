#!/usr/bin/env bash
# Issue 10's after-the-fact figures (bench/RESULTS.md):
#   burst-idle:  10 M entries unthrottled, then 30 s idle: the node's CPU seconds
#   burst-lookup: 10 M entries, then 30 s of /lookup: p99
#   dereg: a 1 M-entry worker deregisters while another ingests 200 k ops/s:
#          lmcc_store_commit_max_seconds before and after
# Usage: bench/issue9_after_burst.sh [BUILD_DIR] [OUT_DIR]
set -uo pipefail
build=$(realpath "${1:-build}")
out=${2:-$(mktemp -d /tmp/lmcc-after-burst.XXXXXX)}
mkdir -p "$out"
echo "results in $out"
py=/usr/bin/python3
free_port() { $py -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
start_node() {
  dir=$(mktemp -d /tmp/lmcc-after-burst-node.XXXXXX)
  http=$(free_port) pull=$(free_port) reply=$(free_port) hb=$(free_port)
  "$build/lmcc" node --host 127.0.0.1 --port "$http" --data-dir "$dir/data" --log-level info \
    --monitor-ports "{\"pull\":$pull,\"reply\":$reply,\"heartbeat\":$hb}" > "$dir/node.log" 2>&1 &
  pid=$!
  until curl -sf "http://127.0.0.1:$http/readyz" > /dev/null; do sleep 0.05; done
  ep=(--pull "127.0.0.1:$pull" --reply "127.0.0.1:$reply" --http "127.0.0.1:$http")
}
stop_node() { kill -TERM "$pid"; wait "$pid"; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
commit_max() { curl -s "http://127.0.0.1:$http/metrics" | awk '/^lmcc_store_commit_max_seconds/ {print $2}'; }

start_node
"$build/lmcc-bench" ingest "${ep[@]}" --ops 10000000 --settle-timeout 600 --keep-registered \
  --instance-prefix burst --pid "$pid" > "$out/burst-idle-ingest.txt" 2>&1
c0=$(cpu_ticks); sleep 30; c1=$(cpu_ticks)
echo "burst-idle: node CPU in the 30 s after the burst: $($py -c "t=($c1-$c0)/$(getconf CLK_TCK); print(f'{t:.2f} s = {t/30*100:.1f} % of a core')")" \
  | tee "$out/burst-idle.txt"
stop_node

start_node
"$build/lmcc-bench" ingest "${ep[@]}" --ops 10000000 --settle-timeout 600 --keep-registered \
  --instance-prefix burst --pid "$pid" > "$out/burst-lookup-ingest.txt" 2>&1
"$build/lmcc-bench" lookup "${ep[@]}" --duration 30 --requests 100000000 --ingest-fraction 0 \
  --instance-prefix look --pid "$pid" > "$out/burst-lookup.txt" 2>&1
grep -E "p99" "$out/burst-lookup.txt" | sed 's/^/burst-lookup: /'
stop_node

start_node
"$build/lmcc-bench" ingest "${ep[@]}" --ops 1000000 --workers 1 --settle-timeout 600 \
  --keep-registered --instance-prefix big > "$out/dereg-fill.txt" 2>&1
"$build/lmcc-bench" ingest "${ep[@]}" --rate 200000 --duration 15 --instance-prefix live \
  --pid "$pid" > "$out/dereg-live.txt" 2>&1 &
live=$!
sleep 5
before=$(commit_max)
# The 1 M-entry worker leaves as an LMCache worker does: DeRegisterMsg over PUSH.
"$py" - "$build/lmcc" "$http" "$pull" <<'PY'
import json, subprocess, sys, urllib.request, zmq
lmcc, http, pull = sys.argv[1:]
workers = json.load(urllib.request.urlopen(f"http://127.0.0.1:{http}/controller/workers"))["workers"]
push = zmq.Context().socket(zmq.PUSH)
push.connect(f"tcp://127.0.0.1:{pull}")
for w in (w for w in workers if w["instance_id"].startswith("big")):
    msg = {"type": "DeRegisterMsg", "instance_id": w["instance_id"], "worker_id": w["worker_id"],
           "ip": w["ip"], "port": w["port"]}
    frame = subprocess.run([lmcc, "msg", "encode"], input=json.dumps(msg) + "\n",
                           capture_output=True, text=True, check=True).stdout.strip()
    push.send(bytes.fromhex(frame))
    print(f"dereg: deregistered {w['instance_id']} with {w['key_count']} keys")
push.close(linger=2000)
PY
wait "$live"
echo "dereg: longest commit before the deregistration ${before}s, after it $(commit_max)s" \
  | tee "$out/dereg.txt"
stop_node
