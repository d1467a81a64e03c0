"""Injected store failures (issue 10): with --fault-injection on, POST /admin/faults
makes commits fail. Commits retry, the affected watermarks freeze, records that
cannot be committed within --commit-failure-grace-ms are given up and their
holders marked with a gap, and the next restart asks exactly those workers for
a full sync. Without the option the endpoint is refused (and a release build,
without fault injection, has none: test_fault_injection_build.py).

Ground truth is each fake worker's own key set; every wait polls a condition."""

from __future__ import annotations

from conftest import unique, wait_until
from test_durability import commands, flushed, full_sync_command, settle_fresh_node


def lmcc_metric(node, name: str) -> float:
    return node.metrics().get(f"lmcc_{name}", 0.0)


def test_faults_are_refused_unless_the_node_was_started_for_them(node_factory):
    node = node_factory()
    r = node.post("/admin/faults", {"fail_all_commits": True})
    assert r.status == 404, r
    assert "--fault-injection on" in r.json()["detail"]


def test_bad_fault_bodies_are_refused(node_factory):
    node = node_factory("--fault-injection", "on")
    for body in ({"fail_commits": -1}, {"fail_commits": "3"}, {"fail_all_commits": 1},
                 {"commit_delay_us": 1.5}, {"clock_jump_ms": 1.5}, {"clock_jump_ms": "5"},
                 {"clock_jump_ms": 2 ** 63}):
        r = node.post("/admin/faults", body)
        assert r.status == 422, (body, r)
    r = node.post("/admin/faults", {"fail_commits": 2})
    assert r.status == 200, r
    assert r.json() == {"fail_commits": 2, "fail_all_commits": False, "commit_delay_us": 0,
                        "clock_offset_ms": 0}
    # Clock jumps add up (and leave the store's settings alone).
    node.post("/admin/faults", {"clock_jump_ms": -1500})
    r = node.post("/admin/faults", {"clock_jump_ms": 500})
    assert r.status == 200, r
    assert r.json() == {"fail_commits": 2, "fail_all_commits": False, "commit_delay_us": 0,
                        "clock_offset_ms": -1000}


def test_failing_commits_resync_exactly_the_affected_worker_after_a_restart(node_factory,
                                                                           make_worker):
    node = node_factory("--fault-injection", "on", "--commit-failure-grace-ms", "300")
    hit = make_worker(node, unique("fault-hit"), 0)
    calm = make_worker(node, unique("fault-calm"), 0)
    hit.register()
    calm.register()
    settle_fresh_node(node, hit, calm)
    calm.admit(range(100))
    hit.admit(range(1000, 1100))
    for w in (hit, calm):
        wait_until(lambda: flushed(node, w), message=f"{w.instance_id} flushed")
    wait_until(lambda: lmcc_metric(node, "ingest_inflight_ops") == 0, message="all committed")

    r = node.post("/admin/faults", {"fail_all_commits": True})
    assert r.status == 200 and r.json()["fail_all_commits"] is True, r
    hit.admit(range(2000, 2050))
    # The index applies what it gets (lookups see it) while the disk refuses it...
    wait_until(lambda: flushed(node, hit), message="the ops applied in memory")
    wait_until(lambda: lmcc_metric(node, "store_commit_failures") > 0, message="commits failing")
    # ... and after the grace period the records are given up, the holder marked.
    wait_until(lambda: lmcc_metric(node, "store_records_given_up") > 0, timeout=20,
               message="the uncommittable records given up")
    r = node.post("/admin/faults", {"fail_all_commits": False})
    assert r.status == 200, r
    wait_until(lambda: lmcc_metric(node, "ingest_inflight_ops") == 0, message="credits back")

    node.restart()
    # The gap mark says why: its records were lost to the disk, not to the wire.
    assert commands(hit) == [full_sync_command("store_commit_failed")]
    assert commands(calm) == [], "a worker whose records all committed is not asked"
    assert flushed(node, calm)
