# lmcc: the two commands a fresh Debian 12 machine needs are `make run` and `make test`.
BUILD_DIR ?= build
RELEASE_DIR ?= build-release
ASAN_DIR ?= build-asan
FUZZ_DIR ?= build-fuzz
JOBS ?= $(shell nproc)
FUZZ_SECONDS ?= 60
CMAKE_GENERATOR ?= Ninja

.PHONY: deps configure lmcc build test run run-node test-asan fuzz fuzz-merge bench format clean chaos chaos-planted soak \
  check-release-build

deps:
	./deploy/install-deps.sh

# The test build: fault injection (/admin/faults, lmcc_planted_bug) is built in,
# as the integration, chaos and soak suites need it. A release build (the
# CMake default, the Dockerfile) leaves it out: `make check-release-build`.
build: configure
	cmake --build $(BUILD_DIR) -j $(JOBS)

configure: deps
	cmake -S . -B $(BUILD_DIR) -G $(CMAKE_GENERATOR) -DCMAKE_BUILD_TYPE=Release -DLMCC_FAULT_INJECTION=ON

# Only the `lmcc` executable (what `make run` and `make run-node` start): about
# half of a full build, which adds the tests, lmcc-bench and the fuzz smoke tests.
lmcc: configure
	cmake --build $(BUILD_DIR) -j $(JOBS) --target lmcc

test: build
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS) --timeout 600

# A release build beside the test build, configured as the Dockerfile does
# (the CMake defaults: no fault injection; -U drops an option an earlier
# configure of the dir may have set), only `lmcc`, then checked: `lmcc
# --version` says so, POST /admin/faults is 404, lmcc_fault_injection on and
# lmcc_planted_bug are refused at start-up, none of the injecting code is in
# the binary (tests/integration/test_fault_injection_build.py), and the
# Dockerfile and deploy/ build that way (tests/deploy/test_release_build.py).
# A second full build, so not part of `make test`.
check-release-build: deps
	cmake -S . -B $(RELEASE_DIR) -G $(CMAKE_GENERATOR) -U LMCC_FAULT_INJECTION \
	  -DCMAKE_BUILD_TYPE=Release -DLMCC_BENCH=OFF
	cmake --build $(RELEASE_DIR) -j $(JOBS) --target lmcc
	LMCC_BINARY=$(CURDIR)/$(RELEASE_DIR)/lmcc PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 -m pytest \
	  -q -p no:cacheprovider tests/integration/test_fault_injection_build.py \
	  tests/deploy/test_release_build.py

# The main job: a three-node cluster on loopback (node i: HTTP 9000+10i, PULL
# +1, ROUTER +2, heartbeat +3, cluster +4; configs, data and logs in
# ./lmcc-cluster, so a second `make run` restarts the same cluster from its
# data); Ctrl-C stops every node cleanly.
run: lmcc
	./$(BUILD_DIR)/lmcc cluster up --nodes 3 --data-dir ./lmcc-cluster --host 127.0.0.1

# One controller node on loopback with LMCache's default ports (HTTP 9000,
# PULL 8300, ROUTER 8400, heartbeat 8082), as LMCache's own controller runs.
run-node: lmcc
	./$(BUILD_DIR)/lmcc node --host 127.0.0.1

# Seeded fault schedules against a local three-node cluster (tests/chaos/chaos.py):
# make chaos SEEDS=20 runs seeds 1..20 and appends a report table.
# CHAOS_FLAGS=--membership adds a standby node that the schedule adds and
# removes (POST /cluster/members); CHAOS_FLAGS="--nodes 5" runs five nodes.
SEEDS ?= 10
CHAOS_DURATION ?= 15
CHAOS_FLAGS ?=
chaos: build
	LMCC_BINARY=$(CURDIR)/$(BUILD_DIR)/lmcc /usr/bin/python3 tests/chaos/chaos.py --seeds 1-$(SEEDS) \
	  --duration $(CHAOS_DURATION) --report $(BUILD_DIR)/chaos-report.md $(CHAOS_FLAGS)

# The checker's negative tests: the nodes run with a deliberate bug
# (lmcc_planted_bug) and some seed of 1..PLANTED_SEEDS must fail for each (the
# runner stops at the first that does). A forgotten watermark only matters
# when a worker's home moves with frames lost on the way, so that bug's
# schedules draw node kills and clean restarts alone; the build without the
# bug passes those seeds (bench/RESULTS.md, 2026-12-03).
PLANTED_SEEDS ?= 12
PLANTED_CASES ?= drop_acked_sub_batch:all skip_replica:all forget_watermark:kill9,clean_restart
chaos-planted: build
	for case in $(PLANTED_CASES); do \
	  bug=$${case%%:*}; faults=$${case#*:}; \
	  if [ "$$faults" = all ]; then only=""; else only="--faults $$faults"; fi; \
	  LMCC_BINARY=$(CURDIR)/$(BUILD_DIR)/lmcc /usr/bin/python3 tests/chaos/chaos.py \
	    --seeds 1-$(PLANTED_SEEDS) --duration $(CHAOS_DURATION) --plant $$bug --expect-caught \
	    $$only --report $(BUILD_DIR)/chaos-planted-report.md || exit 1; \
	done

# A soak (tests/soak/soak.py, not part of `make test`): a three-node cluster
# under SOAK_RATE ops/s from LMCache-protocol workers (lmcc-bench soak) whose
# index grows to SOAK_LIVE_KEYS keys and is held there by evicts, lookups and
# P2P lookups, and a fault every 1-3 minutes drawn from the chaos kinds (kill
# -9 first and a quarter of the time) for SOAK_MINUTES; samples each node's
# RSS, fds, threads, CPU and data dir every minute, then checks exactly (no
# entry lost, convergence within SOAK_CONVERGE s, availability, bounds,
# trends) and writes report.md, samples and graphs to SOAK_OUT/<UTC time>.
# SOAK_FLAGS=--smoke: 2 minutes at small rates and sizes.
SOAK_MINUTES ?= 30
SOAK_RATE ?= 20000
SOAK_LIVE_KEYS ?= 3000000
SOAK_CONVERGE ?= 30
SOAK_SEED ?= 1
SOAK_OUT ?= $(BUILD_DIR)/soak
SOAK_FLAGS ?=
soak: build
	nice -n 5 /usr/bin/python3 tests/soak/soak.py --minutes $(SOAK_MINUTES) --rate $(SOAK_RATE) \
	  --live-keys $(SOAK_LIVE_KEYS) --converge $(SOAK_CONVERGE) --seed $(SOAK_SEED) \
	  --lmcc $(BUILD_DIR)/lmcc --bench $(BUILD_DIR)/lmcc-bench --out $(SOAK_OUT) $(SOAK_FLAGS)

test-asan: deps
	cmake -S . -B $(ASAN_DIR) -G $(CMAKE_GENERATOR) -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DLMCC_SANITIZE=ON -DLMCC_BENCH=OFF -DLMCC_FAULT_INJECTION=ON
	cmake --build $(ASAN_DIR) -j $(JOBS)
	cd $(ASAN_DIR) && UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:suppressions=$(CURDIR)/tests/ubsan.supp \
	  ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j $(JOBS) --timeout 900

# libFuzzer targets (tests/fuzz/CMakeLists.txt says what each reaches): each of
# FUZZ_TARGETS runs FUZZ_FLAGS (default FUZZ_SECONDS seconds) from its kept
# corpus (tests/fuzz/corpus/<name>) and seeds made from real encodings
# ($(FUZZ_DIR)/seeds/<name>); new inputs go to $(FUZZ_DIR)/corpus/<name>, crashes
# to $(FUZZ_DIR)/artifacts/<name>. One target: FUZZ_TARGETS=json; a number of
# inputs instead of a time: FUZZ_FLAGS=-runs=10000000.
FUZZ_TARGETS ?= decode json http-body peer-messages peer-read
FUZZ_FLAGS ?= -max_total_time=$(FUZZ_SECONDS)
FUZZ_LIMITS ?= -rss_limit_mb=512 -malloc_limit_mb=256
fuzz: deps
	CXX=clang++ cmake -S . -B $(FUZZ_DIR) -G $(CMAKE_GENERATOR) -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DLMCC_FUZZ=ON -DLMCC_BENCH=OFF -DBUILD_TESTING=OFF
	cmake --build $(FUZZ_DIR) -j $(JOBS) --target lmcc-fuzz-seeds $(addprefix lmcc-fuzz-,$(FUZZ_TARGETS))
	./$(FUZZ_DIR)/lmcc-fuzz-seeds $(FUZZ_DIR)/seeds
	for t in $(FUZZ_TARGETS); do \
	  mkdir -p $(FUZZ_DIR)/corpus/$$t $(FUZZ_DIR)/artifacts/$$t tests/fuzz/corpus/$$t || exit 1; \
	  dict=tests/fuzz/$$t.dict; [ -f $$dict ] || dict=; \
	  ./$(FUZZ_DIR)/lmcc-fuzz-$$t $(FUZZ_FLAGS) $(FUZZ_LIMITS) $${dict:+-dict=$$dict} \
	    -artifact_prefix=$(FUZZ_DIR)/artifacts/$$t/ -print_final_stats=1 \
	    $(FUZZ_DIR)/corpus/$$t tests/fuzz/corpus/$$t $(FUZZ_DIR)/seeds/$$t || exit 1; \
	done

# Minimizes each kept corpus with what `make fuzz` found (libFuzzer -merge=1):
# tests/fuzz/corpus/<name> becomes the regression-* inputs (kept by name) and
# the fewest other inputs that reach edges they do not (-use_counters=0: hit
# counts aside, which keeps a few hundred KiB instead of megabytes).
fuzz-merge:
	for t in $(FUZZ_TARGETS); do \
	  rm -rf $(FUZZ_DIR)/merged/$$t && mkdir -p $(FUZZ_DIR)/merged/$$t tests/fuzz/corpus/$$t && \
	  find tests/fuzz/corpus/$$t -name 'regression-*' -exec cp {} $(FUZZ_DIR)/merged/$$t/ \; && \
	  ./$(FUZZ_DIR)/lmcc-fuzz-$$t -merge=1 -use_counters=0 $(FUZZ_LIMITS) $(FUZZ_DIR)/merged/$$t \
	    tests/fuzz/corpus/$$t \
	    $(FUZZ_DIR)/seeds/$$t $(FUZZ_DIR)/corpus/$$t && \
	  rm -rf tests/fuzz/corpus/$$t && mv $(FUZZ_DIR)/merged/$$t tests/fuzz/corpus/$$t || exit 1; \
	done

# Builds only the benchmark binary (Release, LMCC_BENCH forced ON in the cache;
# fault injection as `make build` has it, so the two share one build).
bench: deps
	cmake -S . -B $(BUILD_DIR) -G $(CMAKE_GENERATOR) -DCMAKE_BUILD_TYPE=Release -DLMCC_BENCH=ON \
	  -DLMCC_FAULT_INJECTION=ON
	cmake --build $(BUILD_DIR) -j $(JOBS) --target lmcc-microbench
	./$(BUILD_DIR)/lmcc-microbench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true

format:
	find faults messages actors persistence cluster gateway apps tests bench -name '*.[ch]pp' 2>/dev/null \
	  | xargs clang-format -i

clean:
	rm -rf $(BUILD_DIR) $(ASAN_DIR) $(FUZZ_DIR) $(RELEASE_DIR)
