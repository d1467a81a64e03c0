"""Fault injection (POST /admin/faults, lmcc_planted_bug) is absent from a
release build (issue 43, faults/fault_injection.hpp): the CMake option
LMCC_FAULT_INJECTION is OFF by default, the release builds (the Dockerfile's,
the one deploy/systemd installs) leave it so, nothing deploy/ ships turns the
setting on, and the test build (`make build`) turns the option on, since the
integration, chaos and soak suites inject faults.

Reads files only. `make check-release-build` builds a release binary and
checks the binary itself (tests/integration/test_fault_injection_build.py)."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
OPTION = "LMCC_FAULT_INJECTION"


def cmake_true(value: str) -> bool:
    """CMake's if(<constant>): ON, YES, TRUE, Y and non-zero numbers are true."""
    v = value.strip().strip("\"'").upper()
    return v in {"ON", "YES", "TRUE", "Y"} or bool(re.fullmatch(r"-?[0-9.]*[1-9][0-9.]*", v))


def joined_lines(text: str) -> list[str]:
    """Lines with shell continuations joined, comments dropped."""
    return [ln.strip() for ln in text.replace("\\\n", " ").splitlines()
            if ln.strip() and not ln.lstrip().startswith("#")]


def option_values(text: str) -> list[str]:
    """Every value `-DLMCC_FAULT_INJECTION[:TYPE]=value` in `text`."""
    return re.findall(rf"-D\s*{OPTION}(?::\w+)?=(\S+)", text)


def cmake_configures(lines: list[str]) -> list[str]:
    return [ln for ln in lines if re.search(r"\bcmake\s+(-S|-B|\.)", ln)]


def makefile_recipe(target: str) -> str:
    """The recipe of `target` in the Makefile, continuation lines joined."""
    text = (REPO / "Makefile").read_text().replace("\\\n", " ")
    m = re.search(rf"^{re.escape(target)}:.*\n((?:\t.*\n)+)", text, re.M)
    assert m, f"the Makefile has no target {target}"
    return m.group(1)


def test_the_cmake_option_defaults_to_off():
    text = (REPO / "CMakeLists.txt").read_text()
    assert re.findall(rf'option\(\s*{OPTION}\s+"[^"]*"\s+(\w+)\s*\)', text) == ["OFF"]
    # Nothing else decides it: no set() of it, no second option(), in any CMake file.
    sources = [d for d in REPO.iterdir() if d.is_dir() and not d.name.startswith(("build", "."))]
    for f in [f for d in sources for f in d.rglob("*") if f.name == "CMakeLists.txt"
              or f.suffix == ".cmake"]:
        body = f.read_text()
        assert not re.search(rf"set\(\s*{OPTION}\b", body), f
        assert not re.search(rf"option\(\s*{OPTION}\b", body), f


def test_the_dockerfile_builds_with_the_default():
    lines = joined_lines((REPO / "Dockerfile").read_text())
    configures = cmake_configures(lines)
    assert configures, "the Dockerfile's build stage configures with cmake"
    for ln in lines:
        assert not any(cmake_true(v) for v in option_values(ln)), ln
        # `make build` (and so test, run) turns fault injection on.
        assert not re.search(r"(?:^RUN|&&|;)\s*make\b", ln), f"the image must not come from make: {ln}"


def test_the_systemd_install_is_a_release_build():
    """deploy/systemd and docs/deploy.md install a binary from a build dir they
    configure with the default, never `make build`'s build/ (fault injection on)."""
    for f in (REPO / "deploy" / "systemd" / "lmcc.service", REPO / "docs" / "deploy.md"):
        text = f.read_text()
        installed = re.findall(r"install -m 0755 (\S+)/lmcc /usr/local/bin/lmcc", text)
        assert installed, f"{f.name} says how to install the binary"
        for build_dir in installed:
            assert build_dir != "build", f"{f.name} installs `make build`'s test build"
            configures = [ln for ln in text.replace("\\\n", " ").splitlines()
                          if re.search(rf"cmake -S \S+ -B {re.escape(build_dir)}\b", ln)]
            assert configures, f"{f.name} configures {build_dir} before installing from it"
            for ln in configures:
                assert not any(cmake_true(v) for v in option_values(ln)), ln


def test_nothing_deploy_ships_turns_fault_injection_on():
    files = [p for p in (REPO / "deploy").rglob("*") if p.is_file()] + [REPO / "Dockerfile"]
    assert any(p.name == "configmap.yaml" for p in files)
    for f in files:
        text = f.read_text(errors="replace")
        assert not any(cmake_true(v) for v in option_values(text)), f
        for value in re.findall(r"\blmcc_fault_injection\b['\"]?\s*[:=]\s*['\"]?([\w-]+)", text,
                                re.I):
            assert value.lower() in {"off", "false", "no", "0"}, (f, value)
        for value in re.findall(r"--fault-injection[\s=]+['\"]?([\w-]+)", text):
            assert value.lower() in {"off", "false", "no", "0"}, (f, value)
        for value in re.findall(r"\blmcc_planted_bug\b['\"]?\s*[:=]\s*['\"]?(\w+)", text, re.I):
            assert value == "0", (f, value)
        for env in ("LMCACHE_CONTROLLER_LMCC_FAULT_INJECTION", "LMCACHE_CONTROLLER_LMCC_PLANTED_BUG"):
            assert env not in text, (f, env)


def test_the_test_build_turns_it_on():
    """The integration, chaos and soak suites inject faults: `make configure`
    (which `make build`, `make test`, `make run` and CI's .ci/run go through)
    and `make test-asan` build them in; `make check-release-build` does not."""
    for target in ("configure", "test-asan"):
        values = option_values(makefile_recipe(target))
        assert values and all(cmake_true(v) for v in values), target
    makefile = (REPO / "Makefile").read_text()
    for target, needs in (("build", "configure"), ("lmcc", "configure"), ("test", "build"),
                          ("run", "lmcc"), ("run-node", "lmcc")):
        assert re.search(rf"^{target}:\s.*\b{needs}\b", makefile, re.M), (target, needs)
    assert "make test" in (REPO / ".ci" / "run").read_text()
    release = makefile_recipe("check-release-build")
    assert cmake_configures(joined_lines(release))
    assert not any(cmake_true(v) for v in option_values(release))
