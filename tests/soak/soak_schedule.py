"""The soak's fault plan: one fault every GAP seconds (uniform, default
60-180 s), its kind drawn from the chaos kinds, planned whole from the seed
before the run. The first fault is a kill -9 and a quarter of the others
(KILL_SHARE) too, when kill9 is among the kinds: of ~15 kinds it would
otherwise come about once in a 30-minute run, and it is the fault a soak at
size has most to show (a restart that loads millions of entries, the frames
lost with the node, the full syncs they prove).

    faults = plan(seed=1, duration=1800, kinds=DEFAULT_KINDS, workers=6)

Each fault's parameters and heals (which node, how long it stays down or cut,
how far its clock jumps, which worker restarts...) are the chaos planner's
own draw for that kind (tests/chaos/schedule.py, from a seed of its own), so
a soak's faults are the chaos runner's faults, spread out in time: a fault is
{"at": seconds since the load started, "kind", "event": the chaos event,
"heals": [the events that end it, "at" made relative to the fault]}. The
chaos planner's safety rules hold trivially here: a fault and its heals are
over within seconds and the next one comes a minute or more later.
"""
from __future__ import annotations

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "chaos"))
from schedule import FAULTS, OPT_IN_FAULTS, TWINS, plan as chaos_plan  # noqa: E402

# The chaos runner's default kinds, and a kill -9 whose node comes back with
# an empty data dir: at millions of entries the copy of its slots back from
# its peers is what a soak has to show.
DEFAULT_KINDS = FAULTS + ("disk_loss",)
KNOWN_KINDS = FAULTS + OPT_IN_FAULTS
# The last fault comes at least this long before the end, so that its heals
# and the cluster's recovery are over when the load stops.
TAIL_S = 30.0
KILL_SHARE = 0.25


def draw(seed: int, kind: str) -> dict:
    """The chaos planner's first fault of `kind` under `seed`, with its heals
    (times relative to the fault)."""
    events = chaos_plan(seed, nodes=3, duration=2.0, kinds=(kind,), membership=False)["events"]
    fault = next(e for e in events if e["kind"] == kind)
    heals = [dict(e, at=round(e["at"] - fault["at"], 3)) for e in events
             if e.get("of") == fault["id"]]
    return {"event": fault, "heals": heals}


def plan(seed: int, duration: float, kinds: tuple[str, ...], workers: int,
         gap: tuple[float, float] = (60.0, 180.0)) -> list[dict]:
    unknown = set(kinds) - set(KNOWN_KINDS)
    if unknown:
        raise ValueError(f"unknown fault kind(s) {sorted(unknown)}; known: {', '.join(KNOWN_KINDS)}")
    rng = random.Random(f"{seed}-soak")
    faults = []
    t = rng.uniform(*gap)
    while t < duration - TAIL_S:
        kill = "kill9" in kinds and (not faults or rng.random() < KILL_SHARE)
        kind = "kill9" if kill else rng.choice(kinds)
        one = draw(rng.randrange(1 << 32), kind)
        ev = one["event"]
        if "twin" in ev:  # the chaos runner's six workers are this run's `workers`
            ev["worker"] = ev["twin"] * workers // TWINS
        faults.append({"at": round(t, 3), "kind": kind, "event": ev, "heals": one["heals"]})
        t += rng.uniform(*gap)
    return faults


def describe(f: dict) -> str:
    ev = f["event"]
    where = ""
    if "nodes" in ev:
        where = " " + ",".join(f"n{i + 1}" for i in ev["nodes"])
    elif "node" in ev:
        where = f" n{ev['node'] + 1}"
    if "worker" in ev:
        where += f" worker {ev['worker']}"
    heals = ", ".join(f"{h['what'] if 'what' in h else h['kind']} +{h['at']:.1f} s"
                      for h in f["heals"])
    return f"+{f['at']:.0f} s {f['kind']}{where}" + (f" ({heals})" if heals else "")
