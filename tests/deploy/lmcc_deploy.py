"""What the deploy tests (test_kubernetes.py, test_systemd.py) ask of `lmcc
node` itself: the keys it accepts and its effective configuration
(`--dump-config`), and how long a clean stop may take."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / "tests" / "integration"))

from conftest import BINARY  # noqa: E402

try:
    import yaml
except ImportError:  # pragma: no cover - install-deps installs python3-yaml
    yaml = None

ENV_PREFIX = "LMCACHE_CONTROLLER_"

# registry/controller_options.hpp's internal_timeout (no config key): the bound
# of each drain a clean stop waits for.
INTERNAL_TIMEOUT_S = 10.0


def require_yaml() -> None:
    if yaml is None:
        pytest.fail("python3-yaml is missing (deploy/install-deps.sh installs it)", pytrace=False)


def require_binary() -> None:
    if not BINARY.exists():
        pytest.fail(f"lmcc binary not found at {BINARY} (build it, or set LMCC_BINARY)",
                    pytrace=False)


def clean_env() -> dict[str, str]:
    """This process's environment without anything `lmcc node` would read as
    configuration, so only what a test sets reaches the node."""
    return {k: v for k, v in os.environ.items()
            if not k.startswith(ENV_PREFIX) and not k.startswith("LMCC_")}


def dump_config(*args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    """`lmcc node ARGS --dump-config` parsed; fails the test with lmcc's
    message when the node refuses the configuration."""
    require_yaml()
    require_binary()
    r = subprocess.run([str(BINARY), "node", *args, "--dump-config"], capture_output=True,
                       text=True, env=env if env is not None else clean_env(), timeout=30)
    assert r.returncode == 0, f"lmcc node refuses the configuration:\n{r.stderr}{r.stdout}"
    return yaml.safe_load(r.stdout)


def known_keys() -> set[str]:
    """Every YAML key `lmcc node` takes. It ignores keys it does not know (as
    LMCache's controller does), so only a check like this catches a typo."""
    return set(dump_config())


def clean_stop_bound_s(config: dict[str, Any]) -> float:
    """The longest a clean stop (SIGTERM) can take with `config`
    (apps/lmcc/node_runtime.cpp, node_runtime::stop): leaving the live set
    and handing the workers over (two requests bounded by the failure
    timeout), reading the PULL socket after the workers' connections are
    half-closed, four drains (ingest router, workers, shard, rows) bounded by
    the internal timeout, the forwards to other homes (the failure timeout).
    It takes about a second when nothing is stuck."""
    failure = config["lmcc_cluster_failure_timeout_ms"] / 1000.0
    drain = config["lmcc_pull_stop_drain_ms"] / 1000.0
    return 3 * failure + drain + 4 * INTERNAL_TIMEOUT_S
