"""pytest plugin of tests/prometheus (test_prometheus.py lists it in
pytest_plugins): a failing test's report gets the sections its module's
failure_logs() returns, the log tails of the lmcc nodes and of Prometheus.

Not the integration suite's conftest.py hook: that module is imported here as
the harness, and registering it as a plugin as well fails whenever pytest also
collects tests/integration, which registers it as a conftest."""

from __future__ import annotations

import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed and report.when in ("setup", "call"):
        sections = getattr(item.module, "failure_logs", None)
        if sections is not None:
            report.sections.extend(sections())
