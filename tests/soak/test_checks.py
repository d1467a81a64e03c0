"""The soak's checks without a cluster: trend detection, bounds, the fault
plan, and the relief a full sync's window gives the availability rule."""
from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[0] / "chaos"))

import checks  # noqa: E402
import soak_schedule  # noqa: E402
from availability import Availability, Ring  # noqa: E402

MIB = 1 << 20


def samples_of(values: dict[str, list], holding_from: int = 0, every: float = 60.0):
    """Samples one interval apart; values: figure -> per-sample value on n1."""
    n = len(next(iter(values.values())))
    return [{"t": k * every, "holding": k >= holding_from,
             "nodes": {"n1": {key: v[k] for key, v in values.items()}}} for k in range(n)]


def test_theil_sen_ignores_outliers():
    points = [(float(x), 100.0) for x in range(20)]
    points[5] = (5.0, 900.0)   # a fault's spike
    points[12] = (12.0, 0.0)   # a restart's dip
    assert checks.theil_sen_slope(points) == 0.0
    assert abs(checks.theil_sen_slope([(x, 2 * x + 1) for x in range(10)]) - 2.0) < 1e-12


def test_flat_fds_with_spikes_pass():
    fds = [120, 121, 119, 250, 120, 122, 118, 121, 120, 119, 121, 120]  # a refill's burst
    f = checks.trend(samples_of({"fds": fds}), "n1", "fds", 32)
    assert f.ok, f.detail


def test_a_leak_of_one_fd_per_minute_is_an_upward_trend():
    fds = [100 + k for k in range(40)]
    f = checks.trend(samples_of({"fds": fds}), "n1", "fds", 32)
    assert not f.ok
    assert abs(f.figures["slope_per_hour"] - 60.0) < 1e-9


def test_a_thread_leak_across_restarts_is_still_seen():
    # Two threads more per sample, the count starting over at a restart
    # halfway: the pairs within each half still rise.
    threads = [40 + 2 * k for k in range(15)] + [40 + 2 * k for k in range(15)]
    f = checks.trend(samples_of({"threads": threads}), "n1", "threads", 8)
    assert not f.ok, f.detail


def test_too_few_samples_judge_no_trend():
    f = checks.trend(samples_of({"fds": [1, 50]}), "n1", "fds", 32)
    assert f.ok and "too few" in f.detail


def test_only_holding_samples_are_judged_for_trends():
    # Growth while the index grows is expected; flat afterwards passes.
    threads = list(range(10, 30)) + [30] * 20
    s = samples_of({"threads": threads, "fds": [50] * 40, "rss_mib": [100] * 40,
                    "data_mib": [10] * 40, "index_keys": [0] * 40}, holding_from=20)
    found = {f.name: f for f in checks.resource_findings(s, ["n1"], checks.Limits())}
    assert found["n1 threads trend"].ok, found["n1 threads trend"].detail
    assert checks.trend(s, "n1", "threads", 8).ok is False  # judged over all: a rise


def test_rss_bound_scales_with_the_node_s_keys():
    limits = checks.Limits(rss_base_mib=100, rss_per_entry_b=40)
    keys = [0, 1_000_000, 2_000_000]
    # Bound: 100 MiB + 40 B x keys = 100, 138.1, 176.3 MiB.
    ok = samples_of({"rss_mib": [90, 130, 170], "index_keys": keys})
    assert checks.bound(ok, "n1", "rss_mib", limits.rss_base_mib, limits.rss_per_entry_b).ok
    over = samples_of({"rss_mib": [90, 150, 170], "index_keys": keys})
    f = checks.bound(over, "n1", "rss_mib", limits.rss_base_mib, limits.rss_per_entry_b)
    assert not f.ok and "+1.0 min" in f.detail
    assert abs(f.figures["worst_excess_mib"] - (150 - 100 - 40 * 1_000_000 / MIB)) < 1e-6


def test_a_node_down_at_a_sample_is_skipped_not_failed():
    s = samples_of({"data_mib": [10, 11, 12], "index_keys": [10, 10, 10]})
    s[1]["nodes"]["n1"] = None
    assert checks.bound(s, "n1", "data_mib", 128, 40).ok
    assert not checks.bound([{"t": 0, "nodes": {"n1": None}}], "n1", "data_mib", 128, 40).ok


def test_plan_spacing_kinds_and_kills():
    plan = soak_schedule.plan(7, 3600, soak_schedule.DEFAULT_KINDS, workers=6)
    gaps = [b["at"] - a["at"] for a, b in zip(plan, plan[1:])]
    assert all(60 <= g <= 180 for g in gaps) and 60 <= plan[0]["at"] <= 180
    assert plan[-1]["at"] < 3600 - soak_schedule.TAIL_S
    assert plan[0]["kind"] == "kill9"
    assert all(f["event"]["kind"] == f["kind"] for f in plan)
    for f in plan:
        assert all(h["at"] > 0 for h in f["heals"])  # relative to the fault, after it
        if "twin" in f["event"]:
            assert 0 <= f["event"]["worker"] < 6
    assert plan == soak_schedule.plan(7, 3600, soak_schedule.DEFAULT_KINDS, workers=6)


def test_no_kill_when_not_among_the_kinds():
    plan = soak_schedule.plan(3, 1800, ("partition", "freeze"), workers=3, gap=(10, 20))
    assert plan and {f["kind"] for f in plan} <= {"partition", "freeze"}


def test_a_full_sync_relieves_its_instance_until_the_next_fence():
    sys.path.insert(0, str(HERE))
    from soak import excuse_syncs

    ring = Ring(["n1", "n2", "n3"])
    a = Availability(ring, [[11, 12]], ["i0", "i1"], ["n1", "n2", "n3"])
    a.fence(0.0, {"n1": [{"i0": ["L", 512]}]}, {"i0": {11, 12}})
    layout = {"i0": ["L", 0]}
    a.record("n1", 0, 5.0, 5.1, layout)    # during the sync: relieved
    a.record("n1", 0, 8.0, 8.1, layout)    # after it, before the next fence: relieved
    a.fence(9.0, {"n1": [{"i0": ["L", 512]}]}, {"i0": {11, 12}})
    a.record("n1", 0, 10.0, 10.1, layout)  # after that fence: required again
    a.record("n1", 0, 1.0, 1.1, layout)    # before the sync started: required
    syncs = [{"worker": 0, "start": 4.0, "end": 6.0, "complete": True}]
    assert excuse_syncs(a, syncs, {0: "i0"}) == 2
    assert [lk.required["i0"] for lk in a.lookups] == [0, 0, 2, 2]


def test_a_failed_sync_relieves_until_the_next_complete_one():
    from soak import excuse_syncs

    ring = Ring(["n1", "n2", "n3"])
    a = Availability(ring, [[11]], ["i0"], ["n1", "n2", "n3"])
    a.fence(0.0, {"n1": [{"i0": ["L", 256]}]}, {"i0": {11}})
    for t in (3.0, 7.0, 20.0):
        a.record("n1", 0, t, t + 0.1, {})
    a.fences.append(15.0)
    syncs = [{"worker": 0, "start": 2.0, "end": 2.5, "complete": False},
             {"worker": 0, "start": 6.0, "end": 9.0, "complete": True}]
    assert excuse_syncs(a, syncs, {0: "i0"}) == 2
    assert [lk.required["i0"] for lk in a.lookups] == [0, 0, 1]


def test_bounds_default_are_documented():
    limits = checks.Limits()
    assert (limits.rss_base_mib, limits.rss_per_entry_b) == (384, 40)
    assert (limits.disk_base_mib, limits.disk_per_entry_b) == (128, 40)
