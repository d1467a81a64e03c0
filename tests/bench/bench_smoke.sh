#!/bin/sh
# Smoke test of lmcc-bench (ctest: lmcc_bench_smoke).
#   1. `floor --duration 2` exits 0 and reports a positive generator rate.
#   2. `ingest` against a closed HTTP port exits non-zero within seconds with
#      the "is a controller running?" message, and does not hang.
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
timeout 30 "$bench" floor --duration 2 --workers 2 --json "$work/floor.json" \
  >"$work/floor.out" 2>"$work/floor.err"
rc=$?
cat "$work/floor.out"
[ $rc -eq 0 ] || fail "floor exited $rc: $(cat "$work/floor.err")"
rate=$(sed -n 's/^ *"generator_ops_per_s": *\([0-9.eE+]*\),\{0,1\}$/\1/p' "$work/floor.json")
[ -n "$rate" ] || fail "no generator_ops_per_s in floor.json"
awk -v r="$rate" 'BEGIN { exit !(r > 0) }' || fail "generator rate is $rate"
grep -q '"result": "PASS"' "$work/floor.json" || fail "floor.json does not say PASS"
echo "floor: generator -> sink $rate ops/s"

# -- 2. unreachable controller ---------------------------------------------------
# Port 1 on loopback: nothing listens there, so the connection is refused.
start=$(date +%s)
timeout 20 "$bench" ingest --http 127.0.0.1:1 --reply 127.0.0.1:1 --pull 127.0.0.1:1 \
  --duration 1 >"$work/ingest.out" 2>"$work/ingest.err"
rc=$?
elapsed=$(($(date +%s) - start))
cat "$work/ingest.err"
[ $rc -ne 0 ] || fail "ingest against an unreachable controller exited 0"
[ $rc -ne 124 ] || fail "ingest against an unreachable controller hung (killed by timeout)"
[ $rc -eq 2 ] || fail "expected exit status 2, got $rc"
grep -q 'is a controller running?' "$work/ingest.err" || fail "no clear error message"
[ "$elapsed" -le 10 ] || fail "took ${elapsed}s to give up"
echo "unreachable: exit $rc after ${elapsed}s"
echo PASS
