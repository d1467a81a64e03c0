"""The chaos schedule (schedule.py): a pure function of the seed and the flags,
keeping its safety rules, with a check that catches plans that break them.
No cluster: milliseconds per plan."""

from __future__ import annotations

import copy
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from schedule import (FAULTS, FENCE_LEAD, MEMBER_GAP, NODE_FAULTS, OPT_IN_FAULTS,  # noqa: E402
                      RECOVERY, SETTLE, check, digest, dumps, plan)

MEMBERSHIP_AND_DISKS = ("double_disk_loss", "disk_loss", "kill9", "partition", "clean_restart",
                        "worker_restart")
FLAG_SETS = {
    "default": dict(nodes=3, duration=20.0, kinds=FAULTS, membership=False),
    "short": dict(nodes=3, duration=10.0, kinds=FAULTS, membership=False),
    "membership-disks": dict(nodes=3, duration=20.0, kinds=MEMBERSHIP_AND_DISKS, membership=True),
    "five-all": dict(nodes=5, duration=15.0, kinds=FAULTS + OPT_IN_FAULTS, membership=False),
    "kills-only": dict(nodes=3, duration=15.0, kinds=("kill9", "clean_restart"), membership=False),
    "disks-only": dict(nodes=3, duration=15.0, kinds=("disk_loss", "double_disk_loss"),
                       membership=True),
}


@pytest.mark.parametrize("name", sorted(FLAG_SETS))
def test_a_plan_is_a_pure_function_of_the_seed_and_the_flags(name):
    flags = FLAG_SETS[name]
    for seed in (1, 7, 7109, 7304):
        first = plan(seed, **flags)
        random.seed(seed + 1)  # the global generator, drawn from between the two plans
        random.random()
        again = plan(seed, **flags)
        assert again == first
        assert json.loads(dumps(first)) == first  # schedule.json replays exactly this
        assert digest(again) == digest(first)
    assert digest(plan(1, **flags)) != digest(plan(2, **flags))


def test_each_flag_that_shapes_a_plan_changes_it():
    base = FLAG_SETS["default"]
    variants = [dict(base, nodes=5), dict(base, duration=25.0), dict(base, membership=True),
                dict(base, kinds=FAULTS[:-1])]
    digests = {digest(plan(3, **base))} | {digest(plan(3, **v)) for v in variants}
    assert len(digests) == 1 + len(variants)


def test_a_plan_is_the_same_in_another_process_with_another_hash_seed():
    # A replay runs in a new interpreter: nothing in the plan may follow
    # PYTHONHASHSEED (set iteration order, str hashes) or the clock.
    code = ("import sys; sys.path.insert(0, %r); from schedule import plan, digest, FAULTS, "
            "OPT_IN_FAULTS; print(digest(plan(7109, nodes=3, duration=20.0, "
            "kinds=FAULTS + OPT_IN_FAULTS, membership=True)))" % str(HERE))
    out = set()
    for hash_seed in ("1", "2"):
        env = dict(os.environ, PYTHONHASHSEED=hash_seed)
        out.add(subprocess.run([sys.executable, "-c", code], env=env, check=True,
                               capture_output=True, text=True).stdout)
    assert out == {digest(plan(7109, nodes=3, duration=20.0, kinds=FAULTS + OPT_IN_FAULTS,
                               membership=True)) + "\n"}


@pytest.mark.parametrize("name", sorted(FLAG_SETS))
def test_every_plan_keeps_the_safety_rules(name):
    flags = FLAG_SETS[name]
    node_faults = double = 0
    for seed in range(1, 301):
        p = plan(seed, **flags)
        assert check(p) == [], (seed, check(p)[:3])
        node_faults += sum(e["kind"] in NODE_FAULTS for e in p["events"])
        double += sum(e["kind"] == "double_disk_loss" for e in p["events"])
    # The rules constrain real plans: most seeds take nodes down.
    assert node_faults > 300
    if "double_disk_loss" in flags["kinds"]:
        assert double > 20


def test_a_node_fault_drawn_while_a_node_is_impaired_becomes_a_worker_fault():
    flags = dict(nodes=3, duration=20.0, kinds=("kill9", "worker_restart"), membership=False)
    kinds = [e["kind"] for s in range(1, 51) for e in plan(s, **flags)["events"]]
    # The draw is half kills, but a kill must wait for the last one to heal:
    # the planner draws worker restarts instead, never two kills at once.
    assert kinds.count("worker_restart") > kinds.count("kill9") > 0


def test_a_node_back_from_a_disk_loss_recovers_for_a_planned_window_first():
    flags = FLAG_SETS["disks-only"]
    seen = 0
    for seed in range(1, 101):
        events = plan(seed, **flags)["events"]
        for k, e in enumerate(events):
            if e["kind"] != "heal" or e["what"] != "restart":
                continue
            rec = next(r for r in events[k:] if r["kind"] == "recovered" and r["node"] == e["node"])
            assert abs(rec["at"] - e["at"] - RECOVERY) < 1e-6
            later = [f for f in events if f["kind"] in NODE_FAULTS and e["at"] <= f["at"]]
            assert all(f["at"] >= rec["at"] + SETTLE - 1e-6 for f in later)
            seen += 1
    assert seen > 50


# -- the check fails plans that break the rules ----------------------------------------------

def _sample(kind: str, flags: dict) -> tuple[dict, dict]:
    for seed in range(1, 500):
        p = plan(seed, **flags)
        e = next((e for e in p["events"] if e["kind"] == kind), None)
        if e is not None:
            return p, e
    raise AssertionError(f"no plan with {kind}")


def _resorted(p: dict) -> dict:
    """The plan's events in order again, ids renumbered (heals still name their fault)."""
    by_id = {e["id"]: e for e in p["events"] if "id" in e}
    links = [(h, by_id[h["of"]]) for h in p["events"] if "of" in h]
    p["events"].sort(key=lambda e: (e["at"], {"heal": 0, "recovered": 0, "fence": 1}.get(
        e["kind"], 2)))
    for k, e in enumerate(p["events"]):
        e["id"] = k
    for h, fault in links:
        h["of"] = fault["id"]
    return p


def test_the_check_catches_a_second_node_fault_while_one_node_is_impaired():
    p, e = _sample("partition", FLAG_SETS["default"])
    p = copy.deepcopy(p)
    other = (e["nodes"][0] + 1) % 3
    at = round(e["at"] + 0.2, 3)
    kill = {"at": at, "kind": "kill9", "nodes": [other], "repoint": {}}
    heal = {"at": round(at + 0.5, 3), "kind": "heal", "what": "restart", "node": other}
    p["events"] += [{"at": at, "kind": "fence"}, kill, heal]
    _resorted(p)
    heal["of"] = kill["id"]
    problems = check(p)
    assert any("impaired" in x for x in problems), problems


def test_the_check_catches_a_node_fault_with_no_fence_or_too_soon_after_a_heal():
    p, e = _sample("kill9", FLAG_SETS["kills-only"])
    broken = copy.deepcopy(p)
    broken["events"] = [x for x in broken["events"]
                        if not (x["kind"] == "fence"
                                and abs(x["at"] - (e["at"] - FENCE_LEAD)) < 1e-6)]
    assert any("no fence" in x for x in check(_resorted(broken)))
    heal = next(x for x in p["events"] if x["kind"] == "heal" and x["node"] == e["nodes"][0]
                and x["at"] > e["at"])
    soon = copy.deepcopy(p)
    at = round(heal["at"] + SETTLE / 2, 3)
    soon["events"] += [{"at": round(at - FENCE_LEAD, 3), "kind": "fence"},
                       {"at": at, "kind": "clean_restart", "nodes": [e["nodes"][0]],
                        "repoint": {}}]
    assert any("after the last heal" in x for x in check(_resorted(soon)))


def test_the_check_catches_workers_left_on_a_node_that_is_down():
    p, e = _sample("kill9", FLAG_SETS["kills-only"])
    assert e["repoint"], "every sampled kill strands some worker"
    broken = copy.deepcopy(p)
    next(x for x in broken["events"] if x["id"] == e["id"])["repoint"] = {}
    assert any("left on a node that is down" in x for x in check(broken))


def test_the_check_catches_a_disk_loss_without_a_recovery_window():
    p, e = _sample("disk_loss", FLAG_SETS["disks-only"])
    broken = copy.deepcopy(p)
    node = e["nodes"][0]
    broken["events"] = [x for x in broken["events"]
                        if not (x["kind"] == "recovered" and x["node"] == node
                                and x["at"] > e["at"])]
    assert any("no recovery window" in x for x in check(_resorted(broken)))


def test_the_check_catches_membership_changes_too_close_together():
    p, e = _sample("member_change", FLAG_SETS["membership-disks"])
    broken = copy.deepcopy(p)
    at = round(e["at"] + MEMBER_GAP / 2, 3)
    broken["events"].append({"at": at, "kind": "member_change", "members": [0, 1, 2], "via": 0})
    assert any("apart" in x for x in check(_resorted(broken)))


def test_the_check_catches_a_heal_of_no_fault():
    p, e = _sample("kill9", FLAG_SETS["kills-only"])
    broken = copy.deepcopy(p)
    heal = next(x for x in broken["events"] if x.get("of") == e["id"])
    heal["of"] = heal["id"]  # itself: no fault before it
    assert any("a heal of no fault" in x for x in check(broken))

