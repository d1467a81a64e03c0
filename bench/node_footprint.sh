#!/usr/bin/env bash
# Start-up time, idle CPU and RSS of one lmcc node (issue 3's "measure and record").
# Usage: bench/node_footprint.sh [BUILD_DIR] [REPEATS]
# Starts `lmcc node` on free loopback ports REPEATS times; for each run prints the
# time from exec to the first 200 of GET /readyz, then idles 10 s and reports the
# CPU share it used and its VmRSS. Prints the medians at the end.
set -euo pipefail
build=${1:-build}
repeats=${2:-5}
py=/usr/bin/python3
free_port() { $py -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
data=$(mktemp -d /tmp/lmcc-footprint.XXXXXX)
trap 'rm -rf "$data"' EXIT
starts=(); cpus=(); rss=()
for i in $(seq "$repeats"); do
  http=$(free_port); pull=$(free_port); reply=$(free_port); hb=$(free_port)
  t0=$(date +%s%N)
  "$build/lmcc" node --host 127.0.0.1 --port "$http" --log-level warn \
    --monitor-ports "{\"pull\":$pull,\"reply\":$reply,\"heartbeat\":$hb}" \
    --data-dir "$data/run-$i" &
  pid=$!
  until curl -sf "http://127.0.0.1:$http/readyz" >/dev/null; do sleep 0.005; done
  t1=$(date +%s%N)
  starts+=($(( (t1 - t0) / 1000000 )))
  ticks0=$(awk '{print $14+$15}' /proc/$pid/stat)
  sleep 10
  ticks1=$(awk '{print $14+$15}' /proc/$pid/stat)
  hz=$(getconf CLK_TCK)
  cpus+=($($py -c "print(f'{($ticks1-$ticks0)/$hz/10*100:.2f}')"))
  rss+=($(awk '/VmRSS/{print $2}' /proc/$pid/status))
  kill -TERM $pid; wait $pid
  echo "run $i: startup_ms=${starts[-1]} idle_cpu_pct=${cpus[-1]} rss_kib=${rss[-1]}"
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END{print (NR%2)? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
echo "median: startup_ms=$(median "${starts[@]}") idle_cpu_pct=$(median "${cpus[@]}") rss_kib=$(median "${rss[@]}")"
