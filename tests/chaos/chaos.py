#!/usr/bin/python3
"""Seeded fault schedules against a real local lmcc cluster, invariants checked.

    /usr/bin/python3 tests/chaos/chaos.py --seed 7 [--nodes 3|5] [--duration 20]
    /usr/bin/python3 tests/chaos/chaos.py --seeds 1-100 --report tests/chaos/report.md

Starts a cluster of real `lmcc node` processes on loopback (R = 2) and a single
reference node, and fake LMCache workers (tests/integration/lmcc_worker.py) that
keep ground truth: every op goes to the cluster (through whichever node the
worker's sockets point at) and to the reference. For --duration seconds a
schedule drawn from the seed composes faults while ingest and lookups go on:
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
     worker; `sync_failed_retry` retries
     an earlier ask), and every proof led to that worker being asked unless it
     re-registered or deregistered since (the nodes' logs, all restarts);
  5. no node crashed except those the schedule killed, and no node's resident
     memory (VmRSS, sampled through the run) went past --rss-mib.
Availability during the faults (lookups answered or failed) is recorded, not
required (6). The failing seed is printed for replay; each seed writes one row
of the report: faults, lookups answered / failed during faults, convergence
time, full syncs asked, verdict.
Needs python3-zmq and python3-msgpack; runs build/lmcc (or $LMCC_BINARY).
"""
from __future__ import annotations

import argparse
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
from lmcc_worker import chunk_hashes  # noqa: E402
from test_cluster import Twin, answers, settle  # noqa: E402
from test_durability import commands, full_sync  # noqa: E402
from test_failover import as_new_process, repoint_all  # noqa: E402

from audit import full_sync_audit, log_events, worker_story  # noqa: E402

FAULTS = ("kill9", "freeze", "clean_restart", "partition", "worker_restart", "garbage",
          "asym_partition", "slow_links", "dup_frames", "reorder_frames", "disk_errors",
          "slow_disk", "clock_jump")
# Faults that take a node out of the others' reach or impair it (at most one
# at a time, so every slot keeps a live, healthy owner with R = 2).
NODE_FAULTS = ("kill9", "freeze", "clean_restart", "partition", "asym_partition", "slow_links",
               "disk_errors", "slow_disk", "disk_loss", "double_disk_loss")
# Drawn only when --faults names them (the default set, and so every recorded
# seed's schedule, stays as it was): disk_loss is a kill -9 whose node comes
# back with an empty data dir (a replaced disk; the node copies its slots
# from its peers, actors/slot_refill.hpp); double_disk_loss does that to two
# nodes at once (more than R = 2 survives: actors/refill_leftovers.hpp).
OPT_IN_FAULTS = ("disk_loss", "double_disk_loss")

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


class Run:
    def __init__(self, seed: int, nodes: int, duration: float, converge: float, tmp: Path,
                 plant: str | None = None, membership: bool = False, rss_mib: int = 1024,
                 faults: tuple[str, ...] = FAULTS):
        self.kinds = faults
        self.seed, self.duration, self.converge = seed, duration, converge
        self.rng = random.Random(seed)  # the workload: which worker sends what, lookups
        # The schedule (which fault when, where, how long) from a generator of
        # its own: the workload's draws depend on timing (steps per second), and
        # sharing one generator made the same seed run other faults on a busier
        # machine, so a failing seed could not be replayed.
        self.fault_rng = random.Random(f"{seed}-schedule")
        self.rss_mib = rss_mib
        self.rss_peak: dict[str, int] = {}
        # Fault injection on: the disk faults and clock jumps use it (and
        # planted bugs need it). The reaper on, as in production.
        extra = ("--lmcc_fault_injection=on", "--health-check-interval", "1") + (
            (f"--lmcc_planted_bug={PLANTED[plant]}",) if plant else ())
        # With --membership one more node starts as a standby, to be added and removed.
        self.standby = f"n{nodes + 1}" if membership else None
        # Every node reaches its peers through TCP proxies the schedule can cut.
        self.cluster = Cluster(tmp / "cluster", n=nodes + (1 if membership else 0), proxied=True,
                               extra=extra,
                               standby=frozenset({self.standby} if membership else ())).start()
        self.members = [i for i in self.cluster.ids if i != self.standby]
        self.factory = NodeFactory(tmp / "reference")
        self.reference = self.factory()
        tag = unique(f"chaos{seed}")
        self.twins = [Twin(self.cluster, self.reference, self.rng, f"{tag}-{i}", w)
                      for i in range(3) for w in range(2)]
        base = self.rng.randrange(1, 1 << 40)
        self.prompts = [[base + p * 10_000 + i for i in range(256 * 3)] for p in range(24)]
        self.down: set[int] = set()      # node indices not answering (killed or frozen)
        self.killed: set[int] = set()    # killed by the schedule at some point
        self.cut: set[int] = set()       # cut off from the other nodes (alive for its workers)
        self.faults: dict[str, int] = {f: 0 for f in FAULTS + OPT_IN_FAULTS + ("member_change",)}
        self.lookups = {"answered": 0, "failed": 0}
        self.full_syncs = 0
        self.reference_syncs = 0
        self.lock = threading.Lock()
        # What the schedule did, when (wall clock, as the nodes log): kept
        # beside the logs of a failed seed (schedule.log) to read them against.
        self.timeline: list[str] = []
        self.tmp = tmp

    def note(self, text: str) -> None:
        now = time.time()
        stamp = time.strftime("%H:%M:%S", time.gmtime(now)) + f".{int(now * 1000) % 1000:03d}"
        self.timeline.append(f"{stamp} {text}")

    def target(self, candidates: list[int]) -> int:
        i = self.fault_rng.choice(candidates)
        self.note(f"  on n{i + 1} pid={self.cluster.nodes[i].proc.pid}")
        return i

    def where(self, t) -> str:
        """A twin's name and the nodes its PUSH, DEALER and heartbeat sockets use."""
        ids = {n: self.cluster.ids[k] for k, n in enumerate(self.cluster.nodes)}
        return f"{t.c.instance_id}/{t.c.worker_id} push={ids[t.plan[0]]} reply={ids[t.plan[1]]} " \
               f"heartbeat={ids[t.plan[2]]}"

    # -- the workers ----------------------------------------------------------------

    def live_nodes(self):
        return [n for i, n in enumerate(self.cluster.nodes) if i not in self.down]

    def reconnect_stranded(self):
        """Re-points the workers whose sockets use a node just taken down
        (part of the fault, so drawn from the schedule's generator)."""
        dead = {self.cluster.nodes[i] for i in self.down}
        for t in self.twins:
            if any(n in dead for n in t.plan):
                repoint_all(t, self.fault_rng, self.live_nodes())
                self.note(f"repointed {self.where(t)}")

    def ingest_step(self):
        t = self.rng.choice(self.twins)
        p = self.rng.choice(self.prompts)
        if self.rng.random() < 0.75:
            t.admit(chunk_hashes(p))
        else:
            t.evict(chunk_hashes(p)[: self.rng.randrange(1, 4)])

    def lookup_step(self):
        live = self.live_nodes()
        if not live:
            return
        node = self.rng.choice(live)
        try:
            node.lookup(self.rng.choice(self.prompts))
            self.lookups["answered"] += 1
        except Exception:  # noqa: BLE001 - availability is recorded, not required
            self.lookups["failed"] += 1

    # -- faults -----------------------------------------------------------------------

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

    def twin_frames(self, t, count: int):
        """`count` admit batches for each side of twin `t`, not sent yet."""
        out = []
        for _ in range(count):
            keys = chunk_hashes(self.rng.choice(self.prompts))
            out.append((t.c.ops_message([("admit", k) for k in keys]),
                        t.r.ops_message([("admit", k) for k in keys])))
        return out

    def refilling(self) -> bool:
        """Whether a live node is still copying its slots after a disk loss
        (asked only when the schedule loses disks)."""
        if "disk_loss" not in self.kinds and "double_disk_loss" not in self.kinds:
            return False
        for i, n in enumerate(self.cluster.nodes):
            if i in self.down:
                continue
            try:
                if n.get("/cluster/status", timeout=2).json().get("refilling"):
                    return True
            except Exception:  # noqa: BLE001 - a node that cannot answer is not counted
                pass
        return False

    def fault(self, heal_at: list, at: float):
        """Injects one fault drawn from the seed; `at` is its planned time,
        from which the heals it schedules are planned."""
        kinds = self.kinds + (("member_change",) * 2 if self.standby else ())
        kind = self.fault_rng.choice(kinds)
        candidates = [i for i in range(len(self.cluster.nodes))
                      if i not in self.down and i not in self.cut]
        # Keep a majority up so every slot keeps a live owner (R = 2 survives one).
        # A node back from a disk loss is still recovering until it copied
        # its slots: another failure then may take their only copy.
        if kind in NODE_FAULTS and (self.down | self.cut or self.refilling()):
            # A worker fault instead, of the kinds --faults allows.
            instead = tuple(k for k in ("worker_restart", "garbage") if k in kinds) or tuple(
                k for k in kinds if k not in NODE_FAULTS) or ("garbage",)
            kind = self.fault_rng.choice(instead)
        self.sample_rss()
        self.faults[kind] += 1
        self.note(f"fault {kind} (planned at +{at - self.started:.3f} s)")
        if kind in ("kill9", "disk_loss", "double_disk_loss"):
            first = self.target(candidates)
            lost = [first]
            if kind == "double_disk_loss":
                lost.append(self.target([i for i in candidates if i != first]))
            for i in lost:
                self.cluster.nodes[i].kill()
                if kind != "kill9":
                    shutil.rmtree(self.cluster.nodes[i].workdir / "data", ignore_errors=True)
                self.down.add(i)
                self.killed.add(i)
                heal_at.append((at + self.fault_rng.uniform(0.5, 3.0), "restart", i))
            self.reconnect_stranded()
        elif kind == "freeze":
            i = self.target(candidates)
            os.kill(self.cluster.nodes[i].proc.pid, signal.SIGSTOP)
            self.down.add(i)
            self.reconnect_stranded()
            heal_at.append((at + self.fault_rng.uniform(0.5, 3.0), "thaw", i))
        elif kind == "clean_restart":
            i = self.target(candidates)
            self.down.add(i)
            self.reconnect_stranded()
            assert self.cluster.nodes[i].stop() == 0, f"n{i + 1} failed a clean stop"
            self.cluster.nodes[i].start(keep_ports=True)
            self.down.discard(i)
        elif kind == "partition":
            # One node cut from the others, both ways; its workers stay with
            # it, so each side keeps taking the reports that reach it.
            i = self.target(candidates)
            self.cluster.partition({self.cluster.ids[i]})
            self.cut.add(i)
            heal_at.append((at + self.fault_rng.uniform(0.5, 4.0), "heal", i))
        elif kind == "asym_partition":
            i = self.target(candidates)
            a = self.cluster.ids[i]
            b = self.fault_rng.choice([x for x in self.cluster.ids if x != a])
            self.cluster.cut_one_way(a, b)
            self.cut.add(i)
            heal_at.append((at + self.fault_rng.uniform(0.5, 4.0), "heal", i))
        elif kind == "slow_links":
            i = self.target(candidates)
            self.cluster.slow(self.cluster.ids[i], self.fault_rng.uniform(0.02, 0.3))
            self.cut.add(i)
            heal_at.append((at + self.fault_rng.uniform(0.5, 4.0), "heal", i))
        elif kind in ("disk_errors", "slow_disk"):
            i = self.target(candidates)
            body = ({"fail_all_commits": True} if kind == "disk_errors" else
                    {"commit_delay_us": self.fault_rng.randrange(2_000, 50_000)})
            r = self.cluster.nodes[i].post("/admin/faults", body, timeout=10)
            assert r.status == 200, f"n{i + 1} refused {body}: {r}"
            self.cut.add(i)
            heal_at.append((at + self.fault_rng.uniform(0.3, 3.0)
                            if kind == "disk_errors" else
                            at + self.fault_rng.uniform(0.5, 4.0), "disk", i))
        elif kind == "clock_jump":
            i = self.target(candidates)
            by_ms = self.fault_rng.choice((-1, 1)) * self.fault_rng.randrange(1_000, 600_000)
            r = self.cluster.nodes[i].post("/admin/faults", {"clock_jump_ms": by_ms}, timeout=10)
            assert r.status == 200, f"n{i + 1} refused a clock jump: {r}"
            heal_at.append((at + self.fault_rng.uniform(1.0, 6.0), "clock", i))
        elif kind == "dup_frames":
            t = self.fault_rng.choice(self.twins)
            for c, r in self.twin_frames(t, self.fault_rng.randrange(1, 4)):
                for _ in range(2):
                    t.c.push(c)
                    t.r.push(r)
        elif kind == "reorder_frames":
            t = self.fault_rng.choice(self.twins)
            frames = self.twin_frames(t, self.fault_rng.randrange(2, 5))
            self.fault_rng.shuffle(frames)
            for c, r in frames:
                t.c.push(c)
                t.r.push(r)
        elif kind == "member_change":
            # Add the standby, or take it out again; refused (409) while a
            # change still moves slots, which is the node's rule, not a failure.
            members = self.members + ([self.standby] if self.standby not in self.members else [])
            if self.standby in self.members:
                members.remove(self.standby)
            node = self.fault_rng.choice(self.live_nodes())
            try:
                r = node.post("/cluster/members", {"members": sorted(members)}, timeout=10)
                if r.status == 200:
                    self.members = sorted(members)
            except OSError:
                pass
        elif kind == "worker_restart":
            t = self.fault_rng.choice(self.twins)
            self.note(f"worker restart {self.where(t)}")
            as_new_process(t)
            answered(t.register, f"seed {self.seed}: a restarted worker's registration",
                     between=lambda: self.run_due_heals(heal_at))
        elif kind == "garbage":
            node = self.fault_rng.choice(self.live_nodes())
            import zmq

            ctx = zmq.Context.instance()
            push = ctx.socket(zmq.PUSH)
            push.setsockopt(zmq.LINGER, 500)
            push.connect(f"tcp://{node.pull_url}")
            for _ in range(self.fault_rng.randrange(5, 40)):
                push.send(bytes(self.fault_rng.randrange(256) for _ in range(self.fault_rng.randrange(1, 300))))
            push.close()

    def run_due_heals(self, heal_at: list) -> None:
        """Heals whose planned time has passed, earliest first (while a fault
        waits on the cluster)."""
        now = time.monotonic()
        for item in sorted(h for h in heal_at if h[0] <= now):
            heal_at.remove(item)
            self.heal(item)

    def heal(self, item):
        _, what, i = item
        node = self.cluster.nodes[i]
        self.note(f"heal {what} n{i + 1}")
        if what == "clock":
            if i not in self.down:  # else: a restart set it right, or reset_clocks will
                self.reset_clock(node)
            return
        if what == "restart":
            node.start(keep_ports=True)
        elif what == "disk":
            # A node killed meanwhile came back with a healthy disk.
            body = {"fail_all_commits": False, "commit_delay_us": 0}
            r = node.post("/admin/faults", body, timeout=10)
            assert r.status == 200, f"n{i + 1} refused {body}: {r}"
            self.cut.discard(i)
            return
        elif what == "heal":
            self.cluster.heal()
            self.cut.discard(i)
            return
        else:
            os.kill(node.proc.pid, signal.SIGCONT)
        self.down.discard(i)

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
        heal_at: list = []
        # The schedule is planned from the seed alone: each fault's time
        # follows the last one's *planned* time and each heal its fault's, and
        # due events run in planned order. A fault that takes long (a clean
        # restart on a loaded box) delays what follows but changes neither
        # which faults come nor their order, so a seed replays the same
        # composition on any machine (before, faults per seed varied with load).
        self.started = time.monotonic()
        self.note("faults start; " + "; ".join(self.where(t) for t in self.twins))
        end = time.monotonic() + self.duration
        next_fault = time.monotonic() + self.fault_rng.uniform(0.3, 1.5)
        while time.monotonic() < end or next_fault < end:
            while True:  # every event now due, earliest planned first
                now = time.monotonic()
                heal = min((h for h in heal_at if h[0] <= now), default=None)
                fault_due = next_fault < end and next_fault <= now
                if fault_due and (heal is None or next_fault <= heal[0]):
                    self.fault(heal_at, next_fault)
                    next_fault += self.fault_rng.uniform(0.3, 1.5)
                elif heal is not None:
                    heal_at.remove(heal)
                    self.heal(heal)
                else:
                    break
            self.ingest_step()
            if self.rng.random() < 0.3:
                self.lookup_step()
            time.sleep(0.01)
        for item in sorted(heal_at):
            self.heal(item)
        if "clock_jump" in self.kinds:
            for node in self.cluster.nodes:
                self.reset_clock(node)
        self.cluster.wait_joined()
        self.sample_rss()
        return self.check()

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
            for t in self.twins:  # the workers answer the full syncs they were asked for
                if answered(lambda: commands(t.c), f"seed {self.seed}: a heartbeat"):
                    self.answer_full_sync(t)
                if commands(t.r):
                    self.answer_reference_full_sync(t)
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
        return {"seed": self.seed, "faults": dict(self.faults), "lookups": dict(self.lookups),
                "converged_s": round(time.monotonic() - started, 2) if same else None,
                "full_syncs": self.full_syncs, "crashed": crashed, "lost": lost,
                "rss_mib": max(self.rss_peak.values(), default=0),
                "ok": same and not crashed and not too_big and not audit}

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
        (self.tmp / "schedule.log").write_text("".join(line + "\n" for line in self.timeline))
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


def one(seed: int, args) -> dict:
    tmp = tempfile.mkdtemp(prefix=f"lmcc-chaos-{seed}-")
    result = None
    run = Run(seed, args.nodes, args.duration, args.converge, Path(tmp), args.plant,
              args.membership, args.rss_mib, tuple(args.faults.split(",")))
    try:
        result = run.run()
        return result
    finally:
        run.close()
        if (result is None or not result["ok"]) and args.keep_failed:
            print(f"seed {seed}: logs and data kept in {tmp}", file=sys.stderr, flush=True)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def row(r: dict) -> str:
    faults = " ".join(f"{k}={v}" for k, v in r["faults"].items() if v)
    return (f"| {r['seed']} | {faults} | {r['lookups']['answered']} / {r['lookups']['failed']} | "
            f"{r['converged_s'] if r['converged_s'] is not None else 'NO'} | "
            f"{r['lost'] if r['lost'] is not None else '?'} | {r['full_syncs']} | "
            f"{','.join(r['crashed']) or '-'} | {r.get('rss_mib', '?')} | "
            f"{'PASS' if r['ok'] else 'FAIL'} |")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int)
    ap.add_argument("--seeds", help="a range A-B (inclusive), or one seed")
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
                    help="keep a failing seed's node logs and data (the path is printed)")
    args = ap.parse_args()
    unknown = set(args.faults.split(",")) - set(FAULTS) - set(OPT_IN_FAULTS)
    if unknown:
        ap.error(f"unknown fault kind(s) {sorted(unknown)}; known: {', '.join(FAULTS + OPT_IN_FAULTS)}")
    if args.seeds:
        first, _, last = args.seeds.partition("-")
        a, b = int(first), int(last or first)
        seeds = list(range(a, b + 1))
    else:
        seeds = [args.seed if args.seed is not None else 1]
    header = ("| seed | faults | lookups answered / failed during faults | converged (s) | "
              "entries lost | full syncs asked | crashed | peak RSS (MiB) | verdict |\n"
              "|---|---|---|---|---|---|---|---|---|")
    print(header, flush=True)
    failed = []
    harness_failed = []  # the harness broke (not a verdict on the cluster)
    rows = []
    for seed in seeds:
        try:
            r = one(seed, args)
        except Exception as e:  # noqa: BLE001 - a harness failure fails the seed, visibly
            r = {"seed": seed, "faults": {}, "lookups": {"answered": 0, "failed": 0},
                 "converged_s": None, "full_syncs": 0, "crashed": [], "lost": None, "ok": False}
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
            f.write(header + "\n" + "\n".join(rows) + "\n")
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
        print(f"FAILED seed {seed}; replay: /usr/bin/python3 tests/chaos/chaos.py --seed {seed} "
              f"--nodes {args.nodes} --duration {args.duration}{plant}{members}",
              file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
