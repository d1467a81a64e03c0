"""Fault injection is a build feature (issue 43, faults/fault_injection.hpp):
`lmcc --version` says whether the binary has it. A test build (`make build`,
-DLMCC_FAULT_INJECTION=ON: what `make test` runs this suite against) takes
--fault-injection on (test_store_faults.py, test_clock.py, the chaos runner).
A release build (the CMake default, the Dockerfile's) has no POST
/admin/faults at all (404 as any unknown path, token or not), refuses
lmcc_fault_injection on and lmcc_planted_bug at start-up naming the build
option, and holds none of the code that injects.

`make check-release-build` builds a release binary and runs this file against
it; in `make test` the release half is skipped (one build per run)."""

from __future__ import annotations

import os
import subprocess

import pytest

from conftest import BINARY

TOKEN = "s3cret-token-for-the-api-0123456789"

BUILT_IN = "fault injection: built in (LMCC_FAULT_INJECTION=ON"
NOT_BUILT = "fault injection: not built (LMCC_FAULT_INJECTION=OFF)"


def version_line() -> str:
    assert BINARY.exists(), f"lmcc binary not found at {BINARY} (set LMCC_BINARY)"
    r = subprocess.run([str(BINARY), "--version"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


@pytest.fixture(scope="module")
def built() -> bool:
    """Whether the binary under test has fault injection, as it says itself."""
    line = version_line()
    assert (BUILT_IN in line) != (NOT_BUILT in line), \
        f"`lmcc --version` does not say whether the build has fault injection: {line!r}"
    return BUILT_IN in line


@pytest.fixture
def release_build(built):
    if built:
        pytest.skip("a test build (LMCC_FAULT_INJECTION=ON); `make check-release-build` runs "
                    "this against a release build")


def test_the_version_says_whether_the_build_has_fault_injection(built):
    line = version_line()
    assert line.split(";")[0].count(".") == 2, line  # the version first: 0.1.0; ...
    r = subprocess.run([str(BINARY), "node", "--dump-config"], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 0, r.stderr
    assert f"\n# {BUILT_IN if built else NOT_BUILT}" in r.stdout


def test_a_test_build_takes_fault_injection_on(built, node_factory):
    if not built:
        pytest.skip("a release build: the tests below")
    node = node_factory("--fault-injection", "on")
    r = node.post("/admin/faults", {"clock_jump_ms": 0})
    assert r.status == 200, r
    assert r.json()["clock_offset_ms"] == 0


def test_a_release_build_has_no_admin_faults_route(release_build, node_factory):
    node = node_factory()
    r = node.post("/admin/faults", {"fail_all_commits": True})
    assert r.status == 404, r
    assert r.json() == {"detail": "Not Found"}  # an unknown path, not a refusal
    # With a token configured it is still no route: 404 with or without it,
    # where a route that changes state answers 401 without it.
    tokened = node_factory(env={"LMCC_API_TOKEN": TOKEN})
    assert tokened.post("/admin/snapshot", {"dir": "/tmp/never"}).status == 401
    for token in (None, TOKEN):
        r = tokened.post("/admin/faults", {"fail_commits": 1}, token=token)
        assert r.status == 404, (token, r)


@pytest.mark.parametrize("args,env,refused", [
    (("--fault-injection", "on"), {}, "lmcc_fault_injection: on"),
    (("--lmcc_fault_injection=on",), {}, "lmcc_fault_injection: on"),
    ((), {"LMCACHE_CONTROLLER_LMCC_FAULT_INJECTION": "on"}, "lmcc_fault_injection: on"),
    (("--lmcc_planted_bug=2",), {}, "lmcc_planted_bug: 2"),
])
def test_a_release_build_refuses_fault_injection_at_start_up(release_build, node_factory,
                                                               args, env, refused):
    node = node_factory(*args, env=env, expect_ready=False)
    assert node.returncode == 2, node.log_tail()
    log = node.log_text()
    assert f"{refused}, but this lmcc is built without fault injection" in log, log
    assert "LMCC_FAULT_INJECTION is OFF" in log and "-DLMCC_FAULT_INJECTION=ON" in log, log
    # --dump-config refuses the same configuration.
    clean = {k: v for k, v in os.environ.items() if not k.startswith("LMCACHE_CONTROLLER_")}
    r = subprocess.run([str(BINARY), "node", *args, "--dump-config"], capture_output=True,
                       text=True, timeout=30, env={**clean, **env})
    assert r.returncode == 2 and "LMCC_FAULT_INJECTION is OFF" in r.stderr, r.stderr


def test_a_release_build_holds_no_fault_injection_code(release_build):
    binary = BINARY.read_bytes()
    # Texts only the code that injects uses: the handler's logs and refusal,
    # a failing commit's error.
    for text in (b"store-faults-set", b"clock-jumped", b"fault injection is off (start the node",
                 b": injected failure ("):
        assert text not in binary, text
