#!/usr/bin/python3
"""Seeded fault schedules against a real local lmcc cluster, invariants checked.

    /usr/bin/python3 tests/chaos/chaos.py --seed 7 [--nodes 3|5] [--duration 20]
    /usr/bin/python3 tests/chaos/chaos.py --seeds 1-100 --report tests/chaos/report.md
    /usr/bin/python3 tests/chaos/chaos.py --replay /tmp/lmcc-chaos-7-x/schedule.json

Starts a cluster of real `lmcc node` processes on loopback (R = 2) and a single
reference node, and fake LMCache workers (tests/integration/lmcc_worker.py) that
keep ground truth: every op goes to the cluster (through whichever node the
worker's sockets point at) and to the reference. For --duration seconds a
schedule planned from the seed composes faults while ingest and lookups go on:
  kill -9 (restarted 0.5-3 s later; with --faults naming disk_loss, also
  restarted with an empty data dir; naming double_disk_loss, two nodes at
  once lose their disks, so the slots only they owned have no copy left and
  every worker must be asked for a full sync), SIGSTOP/SIGCONT (a frozen node, sockets
  open), SIGTERM + restart (a clean stop), a partition (one node cut from the
  others for 0.5-4 s by the TCP proxies between nodes; its workers stay with
  it), an asymmetric partition (only the connection one node dials to another
  stops), slow links (every byte to and from one node delayed 20-300 ms for
  0.5-4 s), worker restarts (a re-registration: the worker's cache and seq
  numbers start over), duplicated and reordered frames on a worker's PUSH
  socket (the reference gets the same stream), bursts of malformed frames on
  a node's PULL and reply sockets, a failing disk (every commit of one node
  fails for 0.3-3 s: POST /admin/faults, shorter than the node's 5 s grace
  before it gives records up) and a slow disk (each commit of one node takes
  2-50 ms longer for 0.5-4 s), a clock jump (one node's wall clock steps
  1 s-10 min ahead or back, and back again 1-6 s later: POST /admin/faults;
  the cluster's reaper runs every second, so a jump past the 300 s worker
  timeout would reap workers if silence were measured on the wall clock);
  with --membership a standby node is added
  to the member set and removed again (POST /cluster/members) while the rest
  goes on. A worker whose node is down reconnects to a live one, as LMCache
  workers behind a Service do.
The schedule (schedule.py) is a pure function of the seed and of --nodes,
--duration, --faults and --membership: every fault's kind, planned time,
targets, heal time and parameters are planned before the run, with the safety
rules (one node impaired at a time with R = 2, bar a double disk loss; a node
back from a disk loss recovering for a planned window) kept by the plan. What
the plan cannot know the runner waits for, bounded and counted, instead of
drawing another fault: a whole cluster (every peer live, none refilling)
before each node fault, a membership change refused while the last one moves
slots (retried). So a failing seed replays the same faults: each seed prints
its plan's digest, and writes the plan (schedule.json), what was done when
(schedule.log) and what invariant 6 judged (availability.json; `availability.py
availability.json` judges it again) into its directory, kept with
--keep-failed; --replay runs a schedule.json again.
Then every fault is healed, the workers answer the full syncs they were asked
for, and the invariants are checked:
  1. convergence: within --converge seconds every node's /lookup, P2P and
     registry answers equal the reference's (the reference holds exactly what
     the workers reported), so no acknowledged entry is lost (2) and no entry of
     a re-registered worker's old incarnation survives (3);
  4. full syncs follow proofs, and only proofs: every worker a node asked for a
     full sync (`full-sync-requested` in its log) after the schedule started
     had a proof logged first (`seq-gap-proven`, `worker-entity-split`, a
     takeover or restart whose marks ask for one, `index-lost` for every
     worker, any finding logged with `action=full-sync-requested` and the
     worker's uid; `sync_failed_retry` retries
     an earlier ask), and every proof led to that worker being asked unless it
     re-registered or deregistered since (the nodes' logs, all restarts);
  5. no node crashed except those the schedule killed, and no node's resident
     memory (VmRSS, sampled through the run) went past --rss-mib;
  6. availability (availability.py says the rule exactly): lookups sent to
     nodes that are up during the schedule are answered (>= 99.9 %), and each
     credits every instance with the chunks the last fence saw on every owner
     and no worker touched since, unless every owner of the first missing
     chunk's slot was unreachable from the node asked within the failure
     detector's window. The runner also fails a seed whose cluster was not
     whole within WAIT_S before a planned node fault, or which refused a
     membership change for MEMBER_WAIT_S.
Each seed writes one row of the report: the plan's digest, faults, lookups
(answered / failed; complete / incomplete / excused, and how many of those the
node itself said were unsure), waits, convergence time,
entries lost, full syncs asked, verdict.
Needs python3-zmq and python3-msgpack; runs build/lmcc (or $LMCC_BINARY).
"""
from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import random
import shutil
import signal
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
from conftest import NodeFactory, unique  # noqa: E402
from lmcc_cluster import Cluster, SpreadNode  # noqa: E402
from lmcc_worker import chunk_hashes, send_garbage_frames  # noqa: E402
from test_cluster import Twin, answers, repoint, settle  # noqa: E402
from test_durability import commands, full_sync  # noqa: E402
from test_failover import FAILURE_TIMEOUT_S, as_new_process  # noqa: E402

from audit import full_sync_audit, log_events, worker_story  # noqa: E402
from availability import Availability, Ring  # noqa: E402
from schedule import FAULTS, NODE_FAULTS, OPT_IN_FAULTS, check as check_plan, describe, \
    digest, dumps, plan  # noqa: E402

# The /lookup reply header by which a node says its prefixes may be short
# from that many tokens on (gateway/http_api.hpp; availability.py's rule).
UNSURE_HEADER = "Lmcc-Unsure-From-Tokens"
WAIT_S = 30.0         # for a whole cluster before a node fault
# For a fence's quiet cluster, then the fence is skipped and the last one
# stands. Not longer: frames a node forwarded to one that died or froze hold
# their credits until its internal timeout (10 s) gives them up, and a fence
# that waited that out would hand every node fault a drained cluster, hiding
# the losses of frames in flight that the fault would otherwise find (the
# planted forget_watermark went uncaught in 12 seeds with 15 s).
FENCE_S = 1.0
MEMBER_WAIT_S = 60.0  # for a membership change to be accepted


def answered(call, what: str, seconds: float = 15.0, between=None):
    """Retries `call` while the cluster answers ErrorMsg, as an LMCache worker
    retries its registration and heartbeats: a home that is frozen or cut off
    lets a request forwarded to it expire ("request expired"), which is
    availability, not a broken invariant. Other failures, and errors for
    longer than `seconds`, are raised. `between` runs before each retry (the
    schedule's due heals: a worker registering through a cut-off node waits
    for the heal, which must not wait for the registration)."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return call()
        except AssertionError as e:
            if "ErrorMsg" not in str(e) or time.monotonic() > deadline:
                raise
            print(f"{what}: the cluster answered {e}; retrying", file=sys.stderr, flush=True)
            time.sleep(0.3)
            if between is not None:
                between()


# Deliberate bugs the nodes can run with (lmcc_planted_bug), for the checker's
# negative tests: a run with one of them must fail some seed.
PLANTED = {"drop_acked_sub_batch": 1, "skip_replica": 2, "forget_watermark": 3}


class ScheduleClock:
    """Schedule seconds: time since the start, less the time the runner spent
    waiting for or checking the cluster (paused()), so that a fence or a wait
    neither compresses the heals planned after it nor runs the next fault
    straight after it with no ingest in between."""

    def __init__(self):
        self.origin = time.monotonic()
        self.held = 0.0

    def now(self) -> float:
        return time.monotonic() - self.origin - self.held

    @contextlib.contextmanager
    def paused(self):
        start = time.monotonic()
        try:
            yield
        finally:
            self.held += time.monotonic() - start

    def rewind_to(self, at: float) -> None:
        """Back to schedule time `at` if the clock is past it."""
        self.held += max(0.0, self.now() - at)


class PlannedSockets:
    """Hands Twin (which draws its sockets' nodes with rng.choice) the nodes
    the schedule planned."""

    def __init__(self, nodes, picks):
        self._next = iter([nodes[i] for i in picks])

    def choice(self, _options):
        return next(self._next)


class Run:
    def __init__(self, schedule: dict, converge: float, tmp: Path, plant: str | None = None,
                 rss_mib: int = 1024):
        flags = schedule["flags"]
        self.schedule = schedule
        self.seed = schedule["seed"]
        self.kinds = tuple(flags["faults"])
        self.duration, self.converge = flags["duration"], converge
        self.rng = random.Random(self.seed)  # the workload: which worker sends what, lookups
        self.rss_mib = rss_mib
        self.rss_peak: dict[str, int] = {}
        # Fault injection on: the disk faults and clock jumps use it (and
        # planted bugs need it). The reaper on, as in production.
        extra = ("--lmcc_fault_injection=on", "--health-check-interval", "1") + (
            (f"--lmcc_planted_bug={PLANTED[plant]}",) if plant else ())
        # With --membership one more node starts as a standby, to be added and removed.
        self.standby = schedule["node_ids"][schedule["standby"]] if flags["membership"] else None
        # Every node reaches its peers through TCP proxies the schedule can cut.
        self.cluster = Cluster(tmp / "cluster", n=len(schedule["node_ids"]), proxied=True,
                               extra=extra,
                               standby=frozenset({self.standby} if self.standby else ())).start()
        assert self.cluster.ids == schedule["node_ids"], (self.cluster.ids, schedule["node_ids"])
        self.members = [i for i in self.cluster.ids if i != self.standby]
        self.factory = NodeFactory(tmp / "reference")
        self.reference = self.factory()
        tag = unique(f"chaos{self.seed}")
        self.twins = [Twin(self.cluster, self.reference,
                           PlannedSockets(self.cluster.nodes, schedule["twins"][2 * i + w]),
                           f"{tag}-{i}", w)
                      for i in range(3) for w in range(2)]
        base = self.rng.randrange(1, 1 << 40)
        self.prompts = [[base + p * 10_000 + i for i in range(256 * 3)] for p in range(24)]
        self.down: set[int] = set()      # node indices not answering (killed or frozen)
        self.killed: set[int] = set()    # killed by the schedule at some point
        self.cut: set[int] = set()       # cut off from the other nodes (alive for its workers)
        self.emptied: set[int] = set()   # lost their data dir; refilling once restarted
        self.faults: dict[str, int] = {f: 0 for f in FAULTS + OPT_IN_FAULTS + ("member_change",)}
        self.waits = {"count": 0, "seconds": 0.0}
        self.member_retries = 0
        self.problems: list[str] = []    # what the runner could not do as planned
        self.caught_up = 0.0             # the last event a retry ran (retrying())
        self.done: set[int] = set()      # ids of the events run
        self.full_syncs = 0
        self.reference_syncs = 0
        self.lock = threading.Lock()
        status = self.cluster.status(self.cluster.nodes[0])
        self.ring = Ring(self.cluster.ids, slots=status["slots"], replicas=status["replicas"])
        self.check_placement(status)
        self.avail = Availability(self.ring, [chunk_hashes(p) for p in self.prompts],
                                  sorted({t.c.instance_id for t in self.twins}), self.members,
                                  window=FAILURE_TIMEOUT_S)
        # What the schedule did, when (wall clock, as the nodes log): kept
        # beside the logs of a failed seed (schedule.log) to read them against.
        self.timeline: list[str] = []
        self.tmp = tmp

    def check_placement(self, status: dict) -> None:
        """The owners availability.py computes place as many slots on each
        member as the node says it places (a harness that disagreed with the
        nodes on placement would excuse the wrong lookups)."""
        want = self.ring.slot_counts(self.members)
        got = {m["id"]: (m["primary_slots"], m["replica_slots"]) for m in status["members"]
               if m["member"]}
        assert got == want, f"placement differs from the node's: node {got}, harness {want}"

    @staticmethod
    def stamp(wall: float) -> str:
        """A wall clock time as schedule.log and the node logs write it (UTC)."""
        return time.strftime("%H:%M:%S", time.gmtime(wall)) + f".{int(wall * 1000) % 1000:03d}"

    def note(self, text: str) -> None:
        self.timeline.append(f"{self.stamp(time.time())} {text}")

    def when(self, mono: float) -> str:
        """A time.monotonic() as the logs' wall clock, and since the schedule started."""
        return f"{self.stamp(mono + time.time() - time.monotonic())} (+{mono - self.started:.3f} s)"

    def where(self, t) -> str:
        """A twin's name and the nodes its PUSH, DEALER and heartbeat sockets use."""
        ids = {n: self.cluster.ids[k] for k, n in enumerate(self.cluster.nodes)}
        return f"{t.c.instance_id}/{t.c.worker_id} push={ids[t.plan[0]]} reply={ids[t.plan[1]]} " \
               f"heartbeat={ids[t.plan[2]]}"

    # -- the workers ----------------------------------------------------------------

    def ingest_step(self):
        t = self.rng.choice(self.twins)
        p = self.rng.choice(self.prompts)
        if self.rng.random() < 0.75:
            t.admit(chunk_hashes(p))
        else:
            keys = chunk_hashes(p)[: self.rng.randrange(1, 4)]
            self.avail.touch(t.c.instance_id, keys)
            t.evict(keys)

    def lookup_step(self):
        live = [i for i in range(len(self.cluster.nodes)) if i not in self.down]
        if not live:
            return
        i = self.rng.choice(live)
        p = self.rng.randrange(len(self.prompts))
        sent = time.monotonic()
        layout, error, unsure = None, "", None
        try:
            r = self.cluster.nodes[i].post("/lookup", {"tokens": self.prompts[p]}, timeout=15)
            if r.status == 200:
                layout = r.json()["layout_info"]
                said = [v for k, v in r.headers.items() if k.lower() == UNSURE_HEADER.lower()]
                unsure = int(said[0]) if said else None
            else:
                error = f"HTTP {r.status} {r.text[:200]}"
        except Exception as e:  # noqa: BLE001 - a lookup that fails is counted (invariant 6)
            error = f"{type(e).__name__}: {e}"
        self.avail.record(self.cluster.ids[i], p, sent, time.monotonic(), layout, error,
                          unsure_from=unsure)

    def truth(self) -> dict[str, set[int]]:
        """Instance -> every key its workers hold (any location)."""
        out: dict[str, set[int]] = {}
        for t in self.twins:
            for keys in t.c.keys.values():
                out.setdefault(t.c.instance_id, set()).update(keys)
        return out

    def twin_frames(self, t, count: int):
        """`count` admit batches for each side of twin `t`, not sent yet."""
        out = []
        for _ in range(count):
            keys = chunk_hashes(self.rng.choice(self.prompts))
            out.append((t.c.ops_message([("admit", k) for k in keys]),
                        t.r.ops_message([("admit", k) for k in keys])))
        return out

    def sample_rss(self):
        for i, n in enumerate(self.cluster.nodes):
            try:
                for line in Path(f"/proc/{n.proc.pid}/status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        kib = int(line.split()[1])
                        key = self.cluster.ids[i]
                        self.rss_peak[key] = max(self.rss_peak.get(key, 0), kib // 1024)
            except (OSError, AttributeError, ValueError):
                pass  # not running right now

    # -- the cluster's condition -----------------------------------------------------------

    def whole(self, quiet: bool) -> str:
        """Why the cluster is not whole ("" when it is): some node not seeing
        every member live, still refilling after a disk loss, or with slot
        copies that wait for another owner's (docs/convergence.md); with `quiet`,
        also a sub-batch queued for a peer or an ingest op in flight."""
        for i, n in enumerate(self.cluster.nodes):
            name = self.cluster.ids[i]
            try:
                s = n.get("/cluster/status", timeout=2).json()
            except Exception as e:  # noqa: BLE001 - not answering is not whole
                return f"{name} did not answer /cluster/status ({type(e).__name__})"
            if not s["refilling"] and i in self.emptied:
                self.emptied.discard(i)
                self.avail.outage_over(name, "empty", time.monotonic())
                self.note(f"n{i + 1} refilled")
            if not s["all_live"]:
                return f"{name} sees {s['live_members']} members live"
            if s["refilling"]:
                return f"{name} is refilling"
            # A copy waiting for another owner's is half a failure: the
            # next fault must not take the owner it waits for.
            uncertain = s.get("anti_entropy", {}).get("slots_uncertain", 0)
            if uncertain:
                first = ", ".join(f"{u['slot']} ({'+'.join(u['owners'])})"
                                  for u in s["anti_entropy"].get("uncertain_first", [])[:3])
                return (f"{name} is uncertain of {uncertain} slots"
                        + (f", first {first}" if first else ""))
            if quiet and (s["replication_lag_sub_batches"] or s["ingest_inflight_ops"]):
                return (f"{name} has {s['replication_lag_sub_batches']} sub-batches queued, "
                        f"{s['ingest_inflight_ops']} ops in flight")
        return ""

    def await_whole(self, before: str) -> None:
        """Waits (bounded) for a whole cluster: the plan put the node fault
        after every earlier node healed and recovered, and a node that is
        slower to rejoin or to copy its slots back must not make it a second
        failure at once."""
        start = time.monotonic()
        why = self.whole(quiet=False)
        if not why:
            return
        self.note(f"waiting for a whole cluster before {before}: {why}")
        beat = start
        while why and time.monotonic() - start < WAIT_S:
            time.sleep(0.05)
            if "uncertain" in why and time.monotonic() - beat >= 1.0:
                # Every node is up: workers heartbeat meanwhile (every few
                # seconds in LMCache) and sync when asked, which is how
                # copies lost on every owner come back.
                beat = time.monotonic()
                self.heartbeat_twins()
            why = self.whole(quiet=False)
        waited = time.monotonic() - start
        self.waits["count"] += 1
        self.waits["seconds"] += waited
        if why:
            self.problems.append(f"the cluster was not whole {WAIT_S:.0f} s after the plan "
                                 f"had it so, before {before}: {why}")
        self.note(f"waited {waited:.2f} s" + (f"; still {why}" if why else ""))

    def fence(self) -> None:
        """The availability check's baseline (availability.py): with the
        workload stopped, a quiet cluster's answers to every prompt on every
        node, quiet again after them. The plan puts each fence just before a
        node fault, so its wait for a whole cluster is that fault's."""
        self.await_whole("a fence")
        start = time.monotonic()
        deadline = start + FENCE_S
        why = "not tried"
        waited_for = ""
        while time.monotonic() < deadline:
            why = self.whole(quiet=True)
            waited_for = why or waited_for
            if not why:
                got: dict[str, list[dict]] = {}
                for i, n in enumerate(self.cluster.nodes):
                    try:
                        got[self.cluster.ids[i]] = [
                            n.lookup(p) for p in self.prompts]  # asserts 200
                    except Exception as e:  # noqa: BLE001 - a fence needs every answer
                        why = f"{self.cluster.ids[i]} failed a fence lookup ({type(e).__name__})"
                        break
                if not why:
                    why = self.whole(quiet=True)
                if not why:
                    self.avail.fence(time.monotonic(), got, self.truth())
                    self.note(f"fence {len(self.avail.fences)}: "
                              f"{sum(self.avail.verified.values())} chunks verified, after "
                              f"{time.monotonic() - start:.2f} s"
                              + (f" (waited for: {waited_for})" if waited_for else ""))
                    return
            time.sleep(0.05)
        self.avail.fences_skipped += 1
        self.note(f"fence skipped: {why}")

    # -- faults -----------------------------------------------------------------------

    def execute(self, ev: dict, pending: list) -> None:
        kind = ev["kind"]
        self.note(describe(ev))
        self.done.add(ev["id"])
        if kind == "fence":
            with self.clock.paused():
                self.fence()
            return
        if kind == "recovered":
            return  # the next node fault waits for the cluster to say so
        if kind == "heal":
            self.heal(ev)
            return
        self.sample_rss()
        self.faults[kind] += 1
        if kind in NODE_FAULTS:
            with self.clock.paused():
                self.await_whole(f"{kind} (event {ev['id']})")
            for i in ev["nodes"]:
                self.note(f"  on n{i + 1} pid={self.cluster.nodes[i].proc.pid}")
        now = time.monotonic
        nodes = self.cluster.nodes
        ids = self.cluster.ids
        if kind in ("kill9", "disk_loss", "double_disk_loss"):
            for i in ev["nodes"]:
                nodes[i].kill()
                if kind != "kill9":
                    shutil.rmtree(nodes[i].workdir / "data", ignore_errors=True)
                    self.emptied.add(i)
                self.down.add(i)
                self.killed.add(i)
                self.avail.outage(ids[i], "down", now())
            if kind == "double_disk_loss":
                self.avail.disks_lost([ids[i] for i in ev["nodes"]], now())
            self.repoint(ev)
        elif kind == "freeze":
            i = ev["nodes"][0]
            os.kill(nodes[i].proc.pid, signal.SIGSTOP)
            self.down.add(i)
            self.avail.outage(ids[i], "down", now())
            self.repoint(ev)
        elif kind == "clean_restart":
            i = ev["nodes"][0]
            self.down.add(i)
            self.avail.outage(ids[i], "down", now())
            self.repoint(ev)
            assert nodes[i].stop() == 0, f"n{i + 1} failed a clean stop"
            nodes[i].start(keep_ports=True)
            self.down.discard(i)
            self.avail.outage_over(ids[i], "down", now())
        elif kind == "partition":
            # One node cut from the others, both ways; its workers stay with
            # it, so each side keeps taking the reports that reach it.
            i = ev["nodes"][0]
            self.cluster.partition({ids[i]})
            self.cut.add(i)
            for other in ids:
                if other != ids[i]:
                    self.avail.cut(ids[i], other, now())
        elif kind == "asym_partition":
            i = ev["nodes"][0]
            self.cluster.cut_one_way(ids[i], ids[ev["peer"]])
            self.cut.add(i)
            self.avail.cut(ids[i], ids[ev["peer"]], now())
        elif kind == "slow_links":
            i = ev["nodes"][0]
            self.cluster.slow(ids[i], ev["delay_s"])
            self.cut.add(i)
        elif kind in ("disk_errors", "slow_disk"):
            i = ev["nodes"][0]
            body = ({"fail_all_commits": True} if kind == "disk_errors" else
                    {"commit_delay_us": ev["commit_delay_us"]})
            r = nodes[i].post("/admin/faults", body, timeout=10)
            assert r.status == 200, f"n{i + 1} refused {body}: {r}"
            self.cut.add(i)
        elif kind == "clock_jump":
            i = ev["node"]
            r = nodes[i].post("/admin/faults", {"clock_jump_ms": ev["by_ms"]}, timeout=10)
            assert r.status == 200, f"n{i + 1} refused a clock jump: {r}"
        elif kind == "dup_frames":
            t = self.twins[ev["twin"]]
            for c, r in self.twin_frames(t, ev["count"]):
                for _ in range(2):
                    t.c.push(c)
                    t.r.push(r)
        elif kind == "reorder_frames":
            t = self.twins[ev["twin"]]
            frames = self.twin_frames(t, len(ev["order"]))
            for k in ev["order"]:
                t.c.push(frames[k][0])
                t.r.push(frames[k][1])
        elif kind == "member_change":
            with self.retrying(ev):
                self.change_members(ev, pending)
        elif kind == "worker_restart":
            t = self.twins[ev["twin"]]
            self.note(f"worker restart {self.where(t)}")
            for keys in t.c.keys.values():  # dropped with the old incarnation
                self.avail.touch(t.c.instance_id, keys)
            as_new_process(t)
            with self.retrying(ev):
                answered(t.register, f"seed {self.seed}: a restarted worker's registration",
                         between=lambda: self.run_due_heals(pending))
        elif kind == "garbage":
            send_garbage_frames(nodes[ev["node"]].pull_url, ev["bytes_seed"], ev["frames"])

    def repoint(self, ev: dict) -> None:
        """The workers whose sockets used a node taken down move where the plan says."""
        for k, picks in sorted(ev["repoint"].items()):
            t = self.twins[int(k)]
            t.plan = tuple(self.cluster.nodes[i] for i in picks)
            repoint(t.c, *t.plan)
            self.note(f"repointed {self.where(t)}")
        stranded = [self.where(t) for t in self.twins
                    if any(self.cluster.nodes.index(n) in self.down for n in t.plan)]
        assert not stranded, f"the plan left workers on a node that is down: {stranded}"

    def change_members(self, ev: dict, pending: list) -> None:
        """Adds the standby or takes it out again, through the planned node.
        A node refuses (409) a change while the last one still moves slots:
        the change is retried, bounded, with due heals run meanwhile (a
        change may wait on a node the schedule brings back)."""
        members = [self.cluster.ids[i] for i in ev["members"]]
        node = self.cluster.nodes[ev["via"]]
        deadline = time.monotonic() + MEMBER_WAIT_S
        while True:
            try:
                r = node.post("/cluster/members", {"members": members}, timeout=10)
                if r.status == 200:
                    self.members = members
                    self.avail.members_changed(members, time.monotonic())
                    self.note(f"member change to {','.join(members)} accepted")
                    return
                why = f"HTTP {r.status} {r.text[:160]}"
                status = node.get("/cluster/status", timeout=10).json()["membership"]
                if sorted(status["members"]) == sorted(members):
                    # Already so: an earlier try went through with its answer lost.
                    self.members = members
                    self.avail.members_changed(members, time.monotonic())
                    self.note(f"member set already {','.join(members)}")
                    return
            except (OSError, ValueError) as e:
                why = f"{type(e).__name__}: {e}"
            if time.monotonic() > deadline:
                self.problems.append(f"membership change to {members} (event {ev['id']}) "
                                     f"refused for {MEMBER_WAIT_S:.0f} s: {why}")
                return
            self.member_retries += 1
            self.note(f"member change refused ({why}); retrying")
            time.sleep(0.5)
            self.run_due_heals(pending)

    @contextlib.contextmanager
    def retrying(self, ev: dict):
        """Around a retry that waits on the cluster: the schedule clock runs,
        so that heals of faults already done come due (the cluster may need
        them: run_due_heals); once through, the clock goes back to the last
        event run, so that what follows keeps its planned spacing instead of
        coming all at once."""
        self.caught_up = ev["at"]
        try:
            yield
        finally:
            self.clock.rewind_to(self.caught_up)

    def run_due_heals(self, pending: list) -> None:
        """The heals now due of faults already done, in planned order (a
        worker fault planned before one of them waits for the retry)."""
        now = self.clock.now()
        for ev in [e for e in pending if e["kind"] in ("heal", "recovered") and e["at"] <= now
                   and e["of"] in self.done]:
            pending.remove(ev)
            self.execute(ev, pending)
            self.caught_up = max(self.caught_up, ev["at"])

    def heal(self, ev: dict) -> None:
        i, what = ev["node"], ev["what"]
        node = self.cluster.nodes[i]
        name = self.cluster.ids[i]
        if what == "clock":
            if i not in self.down:  # else: a restart set it right, or reset_clocks will
                self.reset_clock(node)
            return
        if what == "restart":
            if i in self.emptied:  # no record of later member sets on an empty disk
                self.avail.view(name, time.monotonic(), "committed", self.avail.members)
            node.start(keep_ports=True)
            if i in self.emptied:
                self.avail.outage(name, "empty", time.monotonic())
        elif what == "disk":
            body = {"fail_all_commits": False, "commit_delay_us": 0}
            r = node.post("/admin/faults", body, timeout=10)
            assert r.status == 200, f"n{i + 1} refused {body}: {r}"
            self.cut.discard(i)
            return
        elif what == "heal":
            self.cluster.heal()
            self.cut.discard(i)
            self.avail.cuts_over(time.monotonic())
            return
        else:
            os.kill(node.proc.pid, signal.SIGCONT)
        self.down.discard(i)
        self.avail.outage_over(name, "down", time.monotonic())

    @staticmethod
    def reset_clock(node):
        """Steps the node's wall clock back to the system's (NTP set it right)."""
        offset = node.post("/admin/faults", {"clock_jump_ms": 0}, timeout=10).json()["clock_offset_ms"]
        if offset:
            r = node.post("/admin/faults", {"clock_jump_ms": -offset}, timeout=10)
            assert r.status == 200, r

    # -- the run ----------------------------------------------------------------------

    def run(self) -> dict:
        for t in self.twins:
            t.register()
        settle(self.twins, SpreadNode(self.cluster), self.reference)
        self.faults_started = time.time()  # invariant 4 looks at what follows
        # Events run in planned order when the schedule clock reaches their
        # time; an event that takes long (a clean restart on a loaded box)
        # delays what follows but changes neither which events come nor their
        # order. Past the duration, the heals still planned run at once.
        self.clock = ScheduleClock()
        self.started = time.monotonic()
        self.note("faults start; " + "; ".join(self.where(t) for t in self.twins))
        pending = list(self.schedule["events"])
        while pending or self.clock.now() < self.duration:
            now = self.clock.now()
            if pending and (pending[0]["at"] <= now or (
                    now >= self.duration and all(e["kind"] in ("heal", "recovered")
                                                 for e in pending))):
                self.execute(pending.pop(0), pending)
                continue
            self.ingest_step()
            if self.rng.random() < 0.3:
                self.lookup_step()
            time.sleep(0.01)
        if "clock_jump" in self.kinds:
            for node in self.cluster.nodes:
                self.reset_clock(node)
        self.cluster.wait_joined()
        self.sample_rss()
        return self.check()

    def heartbeat_twins(self) -> None:
        """Every twin heartbeats both sides once, and syncs where asked."""
        for t in self.twins:
            if answered(lambda: commands(t.c), f"seed {self.seed}: a heartbeat"):
                self.answer_full_sync(t)
            if commands(t.r):
                self.answer_reference_full_sync(t)

    def answer_full_sync(self, t: Twin) -> None:
        """What a worker asked for a full sync does; a status poll the cluster
        answers with ErrorMsg (the home just restarted or thawed) starts the
        sync again under a new id, as LMCache's worker retries a failed sync."""
        self.full_syncs += 1
        attempts = itertools.count(1)
        answered(lambda: full_sync(self.cluster.nodes[0], t.c,
                                   f"chaos{self.full_syncs}-{next(attempts)}"),
                 f"seed {self.seed}: a full sync")

    def answer_reference_full_sync(self, t: Twin) -> None:
        """The reference is a single lmcc node and keeps LMCache's rules too:
        frames of a worker that reach it out of order right after the worker
        registered again are dropped as sent before the registration, and it
        asks for a full sync (seed 1870: a reorder_frames fault right after a
        worker restart). A worker answers that as it answers the cluster; not
        counted among the cluster's full syncs."""
        self.reference_syncs += 1
        full_sync(self.reference, t.r, f"reference{self.reference_syncs}")

    def check(self) -> dict:
        crashed = [f"n{i + 1}" for i, n in enumerate(self.cluster.nodes)
                   if n.proc.poll() is not None]
        too_big = {k: v for k, v in self.rss_peak.items() if v > self.rss_mib}
        if too_big:
            print(f"seed {self.seed}: resident memory past {self.rss_mib} MiB: {too_big}",
                  file=sys.stderr, flush=True)
        started = time.monotonic()
        deadline = started + self.converge
        same = False
        while time.monotonic() < deadline and not crashed:
            self.heartbeat_twins()  # the workers answer the full syncs they were asked for
            want = answers(self.reference, self.prompts, self.twins)
            same = all(answers(n, self.prompts, self.twins) == want for n in self.cluster.nodes)
            if same and self.standby:  # and every node agrees on the member set
                same = len({json.dumps(n.get("/cluster/status").json()["membership"]["members"])
                            for n in self.cluster.nodes}) == 1
            if same:
                break
            time.sleep(0.5)
        audit = self.audit_full_syncs() if same else []
        for problem in audit[:5]:
            print(f"seed {self.seed}: invariant 4: {problem}", file=sys.stderr, flush=True)
        lost = 0
        if not same and not crashed:
            want = answers(self.reference, self.prompts, self.twins)
            for i, n in enumerate(self.cluster.nodes):
                got = answers(n, self.prompts, self.twins)
                # Entries lost: what the reference holds per worker beyond
                # what the cluster (as this node sees it) holds.
                have = {(w["instance_id"], w["worker_id"]): w["key_count"] for w in got["workers"]}
                lost = max(lost, sum(max(0, w["key_count"] - have.get(
                    (w["instance_id"], w["worker_id"]), 0)) for w in want["workers"]))
                for part in want:
                    if got[part] != want[part]:
                        diff = [(k, g, w) for k, (g, w) in enumerate(zip(got[part], want[part]))
                                if g != w][:2]
                        print(f"seed {self.seed}: n{i + 1} differs in {part}: {diff}",
                              file=sys.stderr, flush=True)
        self.read_member_views()
        lookups, unavailable = self.avail.judge(self.when)
        self.timeline.extend(f"invariant 6 excused: {e}" for e in self.avail.excused)
        for problem in unavailable[:10]:
            print(f"seed {self.seed}: invariant 6: {problem}", file=sys.stderr, flush=True)
        if len(unavailable) > 10:
            print(f"seed {self.seed}: invariant 6: {len(unavailable) - 10} more", file=sys.stderr,
                  flush=True)
        for problem in self.problems:
            print(f"seed {self.seed}: {problem}", file=sys.stderr, flush=True)
        return {"seed": self.seed, "schedule": digest(self.schedule).split()[0],
                "faults": dict(self.faults), "lookups": lookups,
                "waits": dict(self.waits, member_retries=self.member_retries,
                              fences=len(self.avail.fences),
                              fences_skipped=self.avail.fences_skipped),
                "converged_s": round(time.monotonic() - started, 2) if same else None,
                "full_syncs": self.full_syncs, "crashed": crashed, "lost": lost,
                "rss_mib": max(self.rss_peak.values(), default=0),
                "ok": same and not crashed and not too_big and not audit and not unavailable
                and not self.problems}

    def read_member_views(self) -> None:
        """Each node's view of the member set through the run, from its log
        lines (invariant 6 judges a lookup by the owners its node read from)."""
        offset = time.time() - time.monotonic()
        for node_id in self.cluster.ids:
            logs = sorted((self.cluster.tmp / node_id).glob("node-*.log"))
            for t, event, f in log_events(logs):
                if event == "cluster-members" and f.get("node") == node_id:
                    self.avail.view(node_id, t - offset, f["state"], f["members"].split(","))

    def audit_full_syncs(self) -> list[str]:
        """Invariant 4 over every cluster node's logs. A proof logged after the
        workers last heartbeated asks at their next heartbeat: they heartbeat
        (and sync when asked) until none is left unasked, for up to 15 s."""
        deadline = time.monotonic() + 15
        while True:
            logs = sorted(self.cluster.tmp.glob("n*/node-*.log"))
            problems = full_sync_audit(log_events(logs), self.faults_started)
            if not problems:
                return problems
            if time.monotonic() > deadline:
                for twin in self.twins:  # what the nodes logged of each unanswered worker
                    if any(f"{twin.c.instance_id}/{twin.c.worker_id}" in p for p in problems):
                        print(worker_story(logs, twin.c.instance_id, twin.c.worker_id),
                              file=sys.stderr, flush=True)
                return problems
            for t in self.twins:
                if answered(lambda: commands(t.c), f"seed {self.seed}: a heartbeat"):
                    self.answer_full_sync(t)
            time.sleep(0.5)

    def close(self):
        (self.tmp / "schedule.json").write_text(dumps(self.schedule))
        (self.tmp / "schedule.log").write_text("".join(line + "\n" for line in self.timeline))
        (self.tmp / "availability.json").write_text(self.avail.dumps())
        for t in self.twins:
            t.close()
        for n in self.cluster.nodes:
            try:
                os.kill(n.proc.pid, signal.SIGCONT)
            except (ProcessLookupError, AttributeError):
                pass
            n.kill()
        for proxy in self.cluster.proxies.values():
            proxy.close()
        self.factory.stop_all()


def one(schedule: dict, args) -> dict:
    seed = schedule["seed"]
    tmp = tempfile.mkdtemp(prefix=f"lmcc-chaos-{seed}-")
    result = None
    try:
        run = Run(schedule, args.converge, Path(tmp), args.plant, args.rss_mib)
    except BaseException:  # the cluster did not start: nothing of the schedule to keep
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    try:
        result = run.run()
        return result
    finally:
        run.close()
        if (result is None or not result["ok"]) and args.keep_failed:
            print(f"seed {seed}: logs, data and schedule.json kept in {tmp}", file=sys.stderr,
                  flush=True)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


HEADER = ("| seed | schedule | faults | lookups answered / failed "
          "| complete / incomplete / excused | waits (s) | converged (s) | entries lost "
          "| full syncs asked | crashed | peak RSS (MiB) | verdict |\n"
          "|---|---|---|---|---|---|---|---|---|---|---|---|")


def row(r: dict) -> str:
    faults = " ".join(f"{k}={v}" for k, v in r["faults"].items() if v)
    lk = r["lookups"]
    w = r.get("waits") or {}
    waits = (f"{w['count']} / {w['seconds']:.1f}" + (f", {w['member_retries']} member retries"
                                                       if w.get("member_retries") else "")
             + (f", {w['fences_skipped']} fences skipped" if w.get("fences_skipped") else "")
             if w else "?")
    return (f"| {r['seed']} | {r.get('schedule', '?')} | {faults} | "
            f"{lk.get('answered', 0)} / {lk.get('failed', 0)} | "
            f"{lk.get('complete', '?')} / {lk.get('incomplete', '?')} / {lk.get('excused', '?')}"
            + (f" ({lk['unsure']} said unsure)" if lk.get("unsure") else "") + " | "
            f"{waits} | {r['converged_s'] if r['converged_s'] is not None else 'NO'} | "
            f"{r['lost'] if r['lost'] is not None else '?'} | {r['full_syncs']} | "
            f"{','.join(r['crashed']) or '-'} | {r.get('rss_mib', '?')} | "
            f"{'PASS' if r['ok'] else 'FAIL'} |")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int)
    ap.add_argument("--seeds", help="a range A-B (inclusive), one seed, or a comma-separated list "
                                    "of both")
    ap.add_argument("--replay", metavar="PATH",
                    help="run the schedule.json a seed wrote (its seed and flags come with it)")
    ap.add_argument("--nodes", type=int, choices=(3, 5), default=3)
    ap.add_argument("--duration", type=float, default=20.0)
    ap.add_argument("--converge", type=float, default=30.0)
    ap.add_argument("--report", help="append the rows to this Markdown file")
    ap.add_argument("--plant", choices=sorted(PLANTED),
                    help="run the nodes with this deliberate bug (the checker must catch it)")
    ap.add_argument("--expect-caught", action="store_true",
                    help="with --plant: succeed only if some seed fails (the bug was caught)")
    ap.add_argument("--membership", action="store_true",
                    help="start one more node as a standby; the schedule adds and removes it")
    ap.add_argument("--faults", default=",".join(FAULTS),
                    help="comma-separated fault kinds the schedule draws from (default: all)")
    ap.add_argument("--rss-mib", type=int, default=1024,
                    help="invariant 5: no node's VmRSS beyond this (MiB)")
    ap.add_argument("--keep-failed", action="store_true",
                    help="keep a failing seed's node logs, data and schedule (the path is printed)")
    args = ap.parse_args()
    kinds = tuple(args.faults.split(","))
    unknown = set(kinds) - set(FAULTS) - set(OPT_IN_FAULTS)
    if unknown:
        ap.error(f"unknown fault kind(s) {sorted(unknown)}; "
                 f"known: {', '.join(FAULTS + OPT_IN_FAULTS)}")
    if args.replay:
        replayed = json.loads(Path(args.replay).read_text())
        flags = replayed["flags"]
        args.nodes, args.duration, args.membership = flags["nodes"], flags["duration"], \
            flags["membership"]
        kinds = tuple(flags["faults"])
        args.faults = ",".join(kinds)
        schedules = [replayed]
    else:
        if args.seeds:
            seeds = []
            for part in args.seeds.split(","):
                first, _, last = part.partition("-")
                seeds += range(int(first), int(last or first) + 1)
        else:
            seeds = [args.seed if args.seed is not None else 1]
        schedules = (plan(s, nodes=args.nodes, duration=args.duration, kinds=kinds,
                          membership=args.membership) for s in seeds)
    print(HEADER, flush=True)
    failed = []
    harness_failed = []  # the harness broke (not a verdict on the cluster)
    rows = []
    for schedule in schedules:
        seed = schedule["seed"]
        print(f"seed {seed}: schedule {digest(schedule)}", file=sys.stderr, flush=True)
        try:
            broken = check_plan(schedule)
            assert not broken, f"the schedule breaks its own rules: {broken[:3]}"
            r = one(schedule, args)
        except Exception as e:  # noqa: BLE001 - a harness failure fails the seed, visibly
            r = {"seed": seed, "schedule": digest(schedule).split()[0], "faults": {},
                 "lookups": {}, "converged_s": None, "full_syncs": 0, "crashed": [],
                 "lost": None, "ok": False}
            print(f"seed {seed}: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
            traceback.print_exc(file=sys.stderr)
            harness_failed.append(seed)
        rows.append(row(r))
        print(rows[-1], flush=True)
        if not r["ok"]:
            failed.append(seed)
            if args.expect_caught and seed not in harness_failed:
                break  # caught: the later seeds have nothing to add
    if args.report:
        with open(args.report, "a") as f:
            f.write(HEADER + "\n" + "\n".join(rows) + "\n")
    plant = f" --plant {args.plant}" if args.plant else ""
    if args.expect_caught:
        caught = [s for s in failed if s not in harness_failed]
        print(f"planted bug {args.plant}: " +
              (f"caught by seed(s) {caught}" if caught else "NOT caught by any seed"),
              file=sys.stderr)
        return 0 if caught else 1
    for seed in failed:
        members = " --membership" if args.membership else ""
        if args.faults != ",".join(FAULTS):
            members += f" --faults {args.faults}"
        print(f"FAILED seed {seed}; replay (the same schedule): /usr/bin/python3 "
              f"tests/chaos/chaos.py --seed {seed} --nodes {args.nodes} --duration {args.duration}"
              f"{plant}{members}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
