#!/bin/sh
# Smoke test of lmcc-bench (ctest: lmcc_bench_smoke). Needs no controller.
#   1. `floor --duration 2 --pid $$` exits 0, reports a positive generator rate,
#      the CPU per op of the given pid (the /proc/<pid>/stat reader) and the
#      HTTP floor's round trip.
#   2. `ingest` and `flood` against a closed HTTP port exit 2 within seconds
#      with the "is a controller running?" message, and do not hang.
#   3. A malformed --nodes and a --pid that does not exist exit 2 with a
#      message that names the problem.
# Usage: bench_smoke.sh path/to/lmcc-bench
set -u
bench=${1:?usage: bench_smoke.sh path/to/lmcc-bench}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# -- 1. floor --------------------------------------------------------------------
timeout 30 "$bench" floor --duration 2 --workers 2 --pid $$ --json "$work/floor.json" \
  >"$work/floor.out" 2>"$work/floor.err"
rc=$?
cat "$work/floor.out"
[ $rc -eq 0 ] || fail "floor exited $rc: $(cat "$work/floor.err")"
rate=$(sed -n 's/^ *"generator_ops_per_s": *\([0-9.eE+]*\),\{0,1\}$/\1/p' "$work/floor.json")
[ -n "$rate" ] || fail "no generator_ops_per_s in floor.json"
awk -v r="$rate" 'BEGIN { exit !(r > 0) }' || fail "generator rate is $rate"
grep -q '"result": "PASS"' "$work/floor.json" || fail "floor.json does not say PASS"
grep -q '"cpu_us_per_op":' "$work/floor.json" || fail "no cpu_us_per_op in floor.json (--pid)"
http_p50=$(sed -n 's/^ *"http_floor_p50_us": *\([0-9.eE+]*\),\{0,1\}$/\1/p' "$work/floor.json")
awk -v t="${http_p50:-0}" 'BEGIN { exit !(t > 0) }' || fail "no HTTP floor in floor.json: '$http_p50'"
echo "floor: generator -> sink $rate ops/s"

# -- 2. unreachable controller ---------------------------------------------------
# Port 1 on loopback: nothing listens there, so the connection is refused.
for scenario in ingest flood heartbeats; do
  start=$(date +%s)
  timeout 20 "$bench" $scenario --http 127.0.0.1:1 --reply 127.0.0.1:1 --pull 127.0.0.1:1 \
    --duration 1 --heartbeat-interval 1 >"$work/$scenario.out" 2>"$work/$scenario.err"
  rc=$?
  elapsed=$(($(date +%s) - start))
  cat "$work/$scenario.err"
  [ $rc -ne 0 ] || fail "$scenario against an unreachable controller exited 0"
  [ $rc -ne 124 ] || fail "$scenario against an unreachable controller hung (killed by timeout)"
  [ $rc -eq 2 ] || fail "$scenario: expected exit status 2, got $rc"
  grep -q 'is a controller running?' "$work/$scenario.err" || fail "$scenario: no clear error message"
  [ "$elapsed" -le 10 ] || fail "$scenario took ${elapsed}s to give up"
  echo "$scenario unreachable: exit $rc after ${elapsed}s"
done

# -- 3. bad --nodes, bad --pid -----------------------------------------------------
expect_usage_error() { # expect_usage_error NAME PATTERN ARGS...
  name=$1
  pattern=$2
  shift 2
  timeout 20 "$bench" "$@" >"$work/$name.out" 2>"$work/$name.err"
  rc=$?
  cat "$work/$name.err"
  [ $rc -eq 2 ] || fail "$name: expected exit status 2, got $rc"
  grep -q "$pattern" "$work/$name.err" || fail "$name: no message matching '$pattern'"
}
expect_usage_error nodes 'host:PULL/REPLY/HTTP' ingest --nodes 127.0.0.1:8300/8400
# pid_max is at most 2^22: this pid cannot exist.
expect_usage_error pid 'is --pid right' ingest --pid 2147483646 --http 127.0.0.1:1
echo PASS
