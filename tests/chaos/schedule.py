"""The chaos runner's fault schedule, planned whole before the run starts.

    events = plan(seed=7, nodes=3, duration=20.0, kinds=FAULTS, membership=False)
    assert check(events) == []
    Path("schedule.json").write_text(dumps(events))
    print(digest(events))            # the same for every run of (seed, flags)

A schedule is a pure function of the seed and the flags that shape it (node
count, duration, fault kinds, membership): it never asks the cluster anything,
so a failing seed replays the same faults, on the same nodes, in the same
order, with the same parameters, on any machine and under any load. What the
run cannot plan (how long a node takes to restart or to copy its slots back, a
membership change refused while the previous one still moves slots) the runner
*waits* for before the event that needs it, instead of drawing something else.

Heals and the end of recovery windows name the fault they end ("of": its id).
Times are schedule seconds (the runner's schedule clock; it stands still while
the runner waits for the cluster or checks it), rounded to the millisecond so
that a schedule read back from JSON is the same schedule. Node i is "n{i+1}";
twin k is the k-th of the runner's six workers (three instances of two).

Safety rules, kept by construction here and checked independently by check():
  - a node is *impaired* while it is killed, frozen, restarting, cut off (both
    ways or one way), slowed or on a failing or slow disk, and after a disk
    loss until its planned recovery window ends (it copies its slots back from
    the other owners; a second failure meanwhile could take their only copy);
  - with R = 2 at most one node is impaired at a time, except the two nodes of
    a double disk loss (whose point is to lose both copies of some slots);
  - a node fault comes only SETTLE seconds after the last impairment ended,
    and a fence (the runner's check of what the cluster holds, see
    availability.py) FENCE_LEAD seconds before it, so that ingest goes on
    between the fence and the fault and frames are in flight when it hits;
  - a node fault drawn while a node is impaired becomes a worker fault (of the
    kinds allowed), or waits for the cluster to be whole when none is allowed;
  - the workers whose sockets use a node taken down are re-pointed to nodes
    that are up, by the plan;
  - membership changes come MEMBER_GAP apart (the runner still retries one
    refused while the previous change moves slots).
"""
from __future__ import annotations

import hashlib
import json
import random
from collections import Counter

FAULTS = ("kill9", "freeze", "clean_restart", "partition", "worker_restart", "garbage",
          "asym_partition", "slow_links", "dup_frames", "reorder_frames", "disk_errors",
          "slow_disk", "clock_jump")
# Drawn only when --faults names them: disk_loss is a kill -9 whose node comes
# back with an empty data dir (a replaced disk; the node copies its slots from
# its peers, actors/cluster/slot_refill.hpp); double_disk_loss does that to two nodes
# at once (more than R = 2 survives: cluster/refill_leftovers.hpp).
OPT_IN_FAULTS = ("disk_loss", "double_disk_loss")
# Faults that take a node out of the others' reach or impair it.
NODE_FAULTS = ("kill9", "freeze", "clean_restart", "partition", "asym_partition", "slow_links",
               "disk_errors", "slow_disk", "disk_loss", "double_disk_loss")
# Faults after which the node is down (not answering) until a heal.
DOWN_FAULTS = ("kill9", "disk_loss", "double_disk_loss", "freeze", "clean_restart")

TWINS = 6
SETTLE = 0.3       # a node fault needs the cluster whole this long before it
FENCE_LEAD = 0.3   # the fence before a node fault, this long before it
RECOVERY = 1.5     # planned window for a node back from a disk loss to copy its slots
MEMBER_GAP = 3.0   # between membership changes

# Event order at equal times: what ends an impairment first, then fences, then faults.
_RANK = {"heal": 0, "recovered": 0, "fence": 1}


def _r(x: float) -> float:
    return round(x, 3)


def plan(seed: int, nodes: int, duration: float, kinds: tuple[str, ...],
         membership: bool) -> dict:
    """The whole schedule of one seed: a JSON-ready dict (see check())."""
    rng = random.Random(f"{seed}-schedule")
    n_all = nodes + (1 if membership else 0)
    standby = nodes if membership else None
    members = list(range(nodes))
    sockets = [[rng.randrange(n_all) for _ in range(3)] for _ in range(TWINS)]
    initial = [list(s) for s in sockets]
    pool = tuple(kinds) + (("member_change",) * 2 if membership else ())
    instead = tuple(k for k in ("worker_restart", "garbage") if k in kinds) or tuple(
        k for k in kinds if k not in NODE_FAULTS)
    events: list[dict] = [{"at": 0.0, "kind": "fence"}]
    down: list[tuple[int, float, float]] = []      # (node, from, until)
    impaired: list[tuple[int, float, float]] = []  # (node, from, until), recovery included
    last_change = -MEMBER_GAP

    def is_down(i: int, t: float) -> bool:
        return any(n == i and a <= t < b for n, a, b in down)

    def impaired_but_up(i: int, t: float) -> bool:
        return any(n == i and a <= t < b for n, a, b in impaired) and not is_down(i, t)

    def whole_from() -> float:
        return max((b for _, _, b in impaired), default=0.0)

    def repoint(t: float, going: list[int]) -> dict:
        """New sockets, on nodes that are up, for the twins that use a node down at t."""
        gone = {i for i in range(n_all) if is_down(i, t)} | set(going)
        up = [i for i in range(n_all) if i not in gone]
        moved = {}
        for k, s in enumerate(sockets):
            if any(i in gone for i in s):
                s[:] = [rng.choice(up) for _ in range(3)]
                moved[str(k)] = list(s)
        return moved

    t = _r(rng.uniform(0.3, 1.5))
    while t < duration:
        kind = rng.choice(pool)
        if kind in NODE_FAULTS and t < _r(whole_from() + SETTLE):
            if instead:
                kind = rng.choice(instead)
            else:  # only node faults allowed: this one waits for a whole cluster
                t = _r(whole_from() + SETTLE)
                if t >= duration:
                    break
        if kind == "member_change" and t < _r(last_change + MEMBER_GAP):
            kind = rng.choice(instead) if instead else None
            if kind is None:
                t = _r(last_change + MEMBER_GAP)
                if t >= duration:
                    break
                kind = "member_change"
        ev: dict = {"at": t, "kind": kind}
        heals: list[dict] = []
        if kind in NODE_FAULTS:
            events.append({"at": _r(max(0.0, t - FENCE_LEAD)), "kind": "fence"})
            targets = [rng.randrange(n_all)]
            if kind == "double_disk_loss":
                targets.append(rng.choice([i for i in range(n_all) if i != targets[0]]))
            ev["nodes"] = targets
            for i in targets:
                if kind in ("kill9", "disk_loss", "double_disk_loss", "freeze"):
                    back = _r(t + rng.uniform(0.5, 3.0))
                    heals.append({"at": back, "kind": "heal",
                                  "what": "thaw" if kind == "freeze" else "restart", "node": i})
                    down.append((i, t, back))
                    until = back
                    if kind != "kill9" and kind != "freeze":
                        until = _r(back + RECOVERY)
                        heals.append({"at": until, "kind": "recovered", "node": i})
                    impaired.append((i, t, until))
                elif kind == "clean_restart":
                    down.append((i, t, t))
                    impaired.append((i, t, t))
                else:
                    if kind == "asym_partition":
                        ev["peer"] = rng.choice([j for j in range(n_all) if j != i])
                    elif kind == "slow_links":
                        ev["delay_s"] = _r(rng.uniform(0.02, 0.3))
                    elif kind == "slow_disk":
                        ev["commit_delay_us"] = rng.randrange(2_000, 50_000)
                    hi = 3.0 if kind == "disk_errors" else 4.0
                    lo = 0.3 if kind == "disk_errors" else 0.5
                    back = _r(t + rng.uniform(lo, hi))
                    what = "disk" if kind in ("disk_errors", "slow_disk") else "heal"
                    heals.append({"at": back, "kind": "heal", "what": what, "node": i})
                    impaired.append((i, t, back))
            if kind in DOWN_FAULTS:
                ev["repoint"] = repoint(t, targets)
        elif kind == "clock_jump":
            i = rng.choice([j for j in range(n_all)
                            if not is_down(j, t) and not impaired_but_up(j, t)])
            ev["node"] = i
            ev["by_ms"] = rng.choice((-1, 1)) * rng.randrange(1_000, 600_000)
            heals.append({"at": _r(t + rng.uniform(1.0, 6.0)), "kind": "heal", "what": "clock",
                          "node": i})
        elif kind == "member_change":
            if standby in members:
                members.remove(standby)
            else:
                members.append(standby)
            ev["members"] = sorted(members)
            ev["via"] = rng.choice([j for j in range(n_all) if not is_down(j, t)])
            last_change = t
        elif kind == "worker_restart":
            ev["twin"] = rng.randrange(TWINS)
        elif kind == "dup_frames":
            ev["twin"] = rng.randrange(TWINS)
            ev["count"] = rng.randrange(1, 4)
        elif kind == "reorder_frames":
            ev["twin"] = rng.randrange(TWINS)
            order = list(range(rng.randrange(2, 5)))
            rng.shuffle(order)
            ev["order"] = order
        elif kind == "garbage":
            ev["node"] = rng.choice([j for j in range(n_all) if not is_down(j, t)])
            ev["frames"] = rng.randrange(5, 40)
            ev["bytes_seed"] = rng.randrange(1 << 32)
        events.append(ev)
        for h in heals:
            h["of"] = ev
        events.extend(heals)
        t = _r(t + rng.uniform(0.3, 1.5))
    events.sort(key=lambda e: (e["at"], _RANK.get(e["kind"], 2)))
    for k, e in enumerate(events):
        e["id"] = k
    for e in events:
        if "of" in e:  # the fault this heals, by id
            e["of"] = e["of"]["id"]
    return {"version": 1, "seed": seed,
            "flags": {"nodes": nodes, "duration": duration, "faults": list(kinds),
                      "membership": membership},
            "node_ids": [f"n{i + 1}" for i in range(n_all)],
            "standby": standby, "twins": initial, "events": events}


def dumps(schedule: dict) -> str:
    return json.dumps(schedule, indent=1, sort_keys=True) + "\n"


def digest(schedule: dict) -> str:
    """A short fingerprint of the events (equal iff the schedules are), and their mix."""
    h = hashlib.sha256(json.dumps(schedule["events"], sort_keys=True).encode()).hexdigest()[:12]
    mix = Counter(e["kind"] for e in schedule["events"] if e["kind"] not in _RANK)
    return f"{h} ({' '.join(f'{k}={v}' for k, v in sorted(mix.items()))})"


def describe(e: dict) -> str:
    """One event as the schedule log shows it."""
    where = ""
    if "nodes" in e:
        where = " on " + ",".join(f"n{i + 1}" for i in e["nodes"])
    elif "node" in e:
        where = f" n{e['node'] + 1}"
    if "twin" in e:
        where += f" twin {e['twin']}"
    rest = {k: v for k, v in e.items()
            if k not in ("at", "kind", "nodes", "node", "twin", "id", "of")}
    params = f" {json.dumps(rest, sort_keys=True)}" if rest else ""
    return f"+{e['at']:.3f} {e['kind']}{where}{params}"


# -- the independent check of the safety rules -------------------------------------------

def check(schedule: dict) -> list[str]:
    """What in `schedule` breaks the rules of the module docstring (empty: none).
    Rebuilt from the events alone, not from the planner's bookkeeping."""
    flags = schedule["flags"]
    n_all = len(schedule["node_ids"])
    events = schedule["events"]
    problems: list[str] = []
    allowed = set(flags["faults"]) | ({"member_change"} if flags["membership"] else set())
    order = [(e["at"], _RANK.get(e["kind"], 2)) for e in events]
    if order != sorted(order) or [e["id"] for e in events] != list(range(len(events))):
        problems.append("events out of order")
    # Impairment and downtime intervals, from each fault to the heal that ends it.
    down: list[tuple[int, float, float, int]] = []
    impaired: list[tuple[int, float, float, int]] = []
    for k, e in enumerate(events):
        kind = e["kind"]
        if kind in _RANK or kind in ("member_change", "clock_jump"):
            continue
        if kind not in allowed:
            problems.append(f"event {k}: {kind} not among the allowed kinds")
        if not 0 <= e["at"] < flags["duration"]:
            problems.append(f"event {k}: {kind} at +{e['at']} outside the run")
        if kind not in NODE_FAULTS:
            continue
        want = 2 if kind == "double_disk_loss" else 1
        if len(set(e["nodes"])) != want:
            problems.append(f"event {k}: {kind} needs {want} distinct nodes")
        for i in e["nodes"]:
            if kind == "clean_restart":
                down.append((i, e["at"], e["at"], k))
                impaired.append((i, e["at"], e["at"], k))
                continue
            what = {"freeze": "thaw", "disk_errors": "disk", "slow_disk": "disk"}.get(
                kind, "restart" if kind in DOWN_FAULTS else "heal")
            heal = next((h for h in events[k + 1:] if h["kind"] == "heal" and h["node"] == i
                         and h["what"] == what), None)
            if heal is None:
                problems.append(f"event {k}: {kind} on n{i + 1} is never healed")
                continue
            end = heal["at"]
            if kind in DOWN_FAULTS:
                down.append((i, e["at"], end, k))
            if kind in ("disk_loss", "double_disk_loss"):
                rec = next((h for h in events[k + 1:] if h["kind"] == "recovered"
                            and h["node"] == i), None)
                if rec is None or rec["at"] < end:
                    problems.append(f"event {k}: n{i + 1} back from a disk loss has no "
                                    "recovery window")
                else:
                    end = rec["at"]
            impaired.append((i, e["at"], end, k))

    def down_at(t: float) -> set[int]:
        return {i for i, a, b, _ in down if a <= t < b}

    for k, e in enumerate(events):
        if e["kind"] in ("heal", "recovered") and not (
                isinstance(e.get("of"), int) and 0 <= e["of"] < k
                and e["node"] in events[e["of"]].get("nodes", [events[e["of"]].get("node")])):
            problems.append(f"event {k}: a heal of no fault before it on n{e['node'] + 1}")
    # At most one node impaired at a time, bar the two of one double disk loss.
    for i, a, b, k in impaired:
        for j, c, d, m in impaired:
            if (i, k) != (j, m) and c <= a < max(d, c + 1e-9) and not (
                    k == m and events[k]["kind"] == "double_disk_loss"):
                problems.append(f"event {k}: n{i + 1} impaired at +{a} while n{j + 1} is "
                                f"(event {m}, +{c}..+{d})")
    # A node fault only after the cluster was whole for SETTLE, with a fence before it.
    fences = [e["at"] for e in events if e["kind"] == "fence"]
    for i, a, b, k in impaired:
        if any(c < a and a - d < SETTLE - 1e-9 and m != k for _, c, d, m in impaired):
            problems.append(f"event {k}: a node fault less than {SETTLE} s after the last heal")
        if not any(abs(f - max(0.0, _r(a - FENCE_LEAD))) < 1e-9 for f in fences):
            problems.append(f"event {k}: no fence {FENCE_LEAD} s before the node fault")
    # The workers' sockets: never left on a node that is down.
    sockets = [list(s) for s in schedule["twins"]]
    last_change = None
    members = list(range(flags["nodes"]))
    for k, e in enumerate(events):
        t = e["at"]
        for tk, s in e.get("repoint", {}).items():
            sockets[int(tk)] = list(s)
            if any(i in down_at(t) for i in s):
                problems.append(f"event {k}: twin {tk} re-pointed to a node that is down")
        if e["kind"] in DOWN_FAULTS:
            gone = down_at(t) | set(e["nodes"])
            for tk, s in enumerate(sockets):
                if any(i in gone for i in s):
                    problems.append(f"event {k}: twin {tk} left on a node that is down")
        for field in ("via", "node"):
            if field in e and e["kind"] in ("member_change", "garbage", "clock_jump") and \
                    e[field] in down_at(t):
                problems.append(f"event {k}: {e['kind']} through n{e[field] + 1}, which is down")
        if e["kind"] == "member_change":
            if last_change is not None and t - last_change < MEMBER_GAP - 1e-9:
                problems.append(f"event {k}: membership changes {t - last_change:.3f} s apart")
            last_change = t
            standby = schedule["standby"]
            want = sorted(m for m in members if m != standby) if standby in members else \
                sorted(members + [standby])
            if e["members"] != want:
                problems.append(f"event {k}: member set {e['members']}, expected {want}")
            members = e["members"]
        for i in e.get("nodes", []):
            if not 0 <= i < n_all:
                problems.append(f"event {k}: no node {i}")
    return problems
