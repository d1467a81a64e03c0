"""The soak's fault runner: carries out one planned fault (soak_schedule.py)
and its heals on the cluster, as the chaos runner does (tests/chaos/chaos.py,
Run.execute and Run.heal), and tells the availability rule what was down or
cut when. Before a node fault it waits for a whole cluster and takes a fence
(availability.py): every node's answers to every prompt, /lookup and P2P.

A kill -9, a freeze or a clean stop first takes the node's gate (probes.py),
so that no probe is in flight to it; its workers keep their sockets on it
(LMCache workers configured with one node's URLs) and reconnect when it is
back, or see their frames lost with it, which the cluster must prove and ask
a full sync for.
"""
from __future__ import annotations

import os
import shutil
import signal
import time

import zmq

from lmcc_worker import p2p_lookup_msg, pack, send_garbage_frames, unpack

from probes import ASKER, CHUNK

WHOLE_WAIT_S = 120.0  # for a whole cluster before a node fault and at the end
NODE_FAULTS = ("kill9", "freeze", "clean_restart", "partition", "asym_partition", "slow_links",
               "disk_errors", "slow_disk", "disk_loss", "double_disk_loss")


class FaultRunner:
    def __init__(self, cluster, gates, avail: dict, load, prompts: list[dict], note):
        """avail: {"lookup": Availability, "p2p": Availability}; prompts as
        probes.Probes takes them; note(text) writes the timeline."""
        self.cluster = cluster
        self.gates = gates
        self.avail = avail
        self.load = load
        self.prompts = prompts
        self.note = note
        self.ids = cluster.ids
        self.emptied: set[int] = set()
        self.problems: list[str] = []
        self.waits: list[float] = []

    # -- the cluster's condition ---------------------------------------------------------

    def whole(self) -> str:
        """Why the cluster is not whole ("" when it is): a node not answering,
        not seeing every member live, or still copying its slots back."""
        for i, n in enumerate(self.cluster.nodes):
            if self.gates.down[i]:
                return f"{self.ids[i]} is down"
            try:
                s = n.get("/cluster/status", timeout=5).json()
            except Exception as e:  # noqa: BLE001 - not answering is not whole
                return f"{self.ids[i]} did not answer /cluster/status ({type(e).__name__})"
            if not s["refilling"] and i in self.emptied:
                self.emptied.discard(i)
                for a in self.avail.values():
                    a.outage_over(self.ids[i], "empty", time.monotonic())
                self.note(f"{self.ids[i]} refilled")
            if not s["all_live"]:
                return f"{self.ids[i]} sees {s['live_members']} members live"
            if s["refilling"]:
                return f"{self.ids[i]} is refilling"
        return ""

    def await_whole(self, before: str) -> bool:
        start = time.monotonic()
        why = self.whole()
        while why and time.monotonic() - start < WHOLE_WAIT_S:
            time.sleep(0.2)
            why = self.whole()
        waited = time.monotonic() - start
        self.waits.append(waited)
        if waited > 1:
            self.note(f"waited {waited:.1f} s for a whole cluster before {before}"
                      + (f"; still {why}" if why else ""))
        if why:
            self.problems.append(f"the cluster was not whole {WHOLE_WAIT_S:.0f} s after the "
                                 f"last heal, before {before}: {why}")
        return not why

    def fence(self) -> None:
        """Every node's /lookup and P2P answers to every prompt (the baseline
        of what must be answered completely until the next fence)."""
        start = time.monotonic()
        got = {"lookup": {}, "p2p": {}}
        ctx = zmq.Context.instance()
        try:
            for i, n in enumerate(self.cluster.nodes):
                got["lookup"][self.ids[i]] = [n.lookup(p["tokens"]) for p in self.prompts]
                sock = ctx.socket(zmq.DEALER)
                sock.setsockopt(zmq.LINGER, 0)
                sock.setsockopt(zmq.RCVTIMEO, 15_000)
                sock.connect(f"tcp://{n.reply_url}")
                try:
                    layouts = []
                    for p in self.prompts:
                        sock.send_multipart([b"", pack(p2p_lookup_msg(p["keys"], ASKER, 0))])
                        inst, loc, hits, _ = unpack(sock.recv_multipart()[-1])["layout_info"][0]
                        layouts.append({inst: [loc, hits * CHUNK]} if inst else {})
                    got["p2p"][self.ids[i]] = layouts
                finally:
                    sock.close(linger=0)
        except Exception as e:  # noqa: BLE001 - a fence needs every answer; the last one stands
            for a in self.avail.values():
                a.fences_skipped += 1
            self.note(f"fence skipped: {type(e).__name__}: {e}")
            return
        truth: dict[str, set[int]] = {}
        for p in self.prompts:
            truth.setdefault(p["instance"], set()).update(p["keys"])
        for kind, a in self.avail.items():
            a.fence(time.monotonic(), got[kind], truth)
        verified = sum(self.avail["lookup"].verified.values())
        self.note(f"fence: {verified} chunks verified in {time.monotonic() - start:.2f} s")

    # -- faults ---------------------------------------------------------------------------

    def run(self, fault: dict) -> None:
        """The fault now, then its heals at their planned delays."""
        ev, kind = fault["event"], fault["kind"]
        if kind in NODE_FAULTS:
            self.await_whole(kind)
            self.fence()
        at = time.monotonic()
        self.note(f"fault {kind}: {ev}")
        self.execute(kind, ev)
        for h in sorted(fault["heals"], key=lambda h: h["at"]):
            delay = at + h["at"] - time.monotonic()
            if delay > 0:
                time.sleep(delay)  # the planned length of the fault, not a wait for a condition
            self.note(f"heal {h.get('what', h['kind'])} n{h['node'] + 1}")
            self.heal(h)

    def outage(self, i: int, kind: str) -> None:
        for a in self.avail.values():
            a.outage(self.ids[i], kind, time.monotonic())

    def execute(self, kind: str, ev: dict) -> None:
        nodes, ids = self.cluster.nodes, self.ids
        if kind in ("kill9", "disk_loss", "double_disk_loss"):
            for i in ev["nodes"]:
                self.gates.take_down(i)
                self.outage(i, "down")
                self.note(f"  kill -9 {ids[i]} pid={nodes[i].proc.pid}")
                nodes[i].kill()
                if kind != "kill9":
                    shutil.rmtree(nodes[i].workdir / "data", ignore_errors=True)
                    self.emptied.add(i)
            if kind == "double_disk_loss":
                for a in self.avail.values():
                    a.disks_lost([ids[i] for i in ev["nodes"]], time.monotonic())
        elif kind == "freeze":
            i = ev["nodes"][0]
            self.gates.take_down(i)
            self.outage(i, "down")
            os.kill(nodes[i].proc.pid, signal.SIGSTOP)
        elif kind == "clean_restart":
            i = ev["nodes"][0]
            self.gates.take_down(i)
            self.outage(i, "down")
            rc = nodes[i].stop()
            if rc != 0:
                self.problems.append(f"{ids[i]} exited with {rc} on a clean stop")
            nodes[i].start(keep_ports=True)
            self.up(i)
        elif kind == "partition":
            i = ev["nodes"][0]
            self.cluster.partition({ids[i]})
            for other in ids:
                if other != ids[i]:
                    for a in self.avail.values():
                        a.cut(ids[i], other, time.monotonic())
        elif kind == "asym_partition":
            i = ev["nodes"][0]
            self.cluster.cut_one_way(ids[i], ids[ev["peer"]])
            for a in self.avail.values():
                a.cut(ids[i], ids[ev["peer"]], time.monotonic())
        elif kind == "slow_links":
            self.cluster.slow(ids[ev["nodes"][0]], ev["delay_s"])
        elif kind in ("disk_errors", "slow_disk"):
            i = ev["nodes"][0]
            body = ({"fail_all_commits": True} if kind == "disk_errors" else
                    {"commit_delay_us": ev["commit_delay_us"]})
            self.admin(i, body)
        elif kind == "clock_jump":
            self.admin(ev["node"], {"clock_jump_ms": ev["by_ms"]})
        elif kind == "garbage":
            send_garbage_frames(nodes[ev["node"]].pull_url, ev["bytes_seed"], ev["frames"])
        elif kind == "worker_restart":
            w = ev["worker"]
            instance = next(p["instance"] for p in self.prompts if p["worker"] == w)
            for a in self.avail.values():  # its cache goes with the old process
                a.touch(instance, [k for p in self.prompts if p["worker"] == w for k in p["keys"]])
            self.load.command(f"restart {w}")
        elif kind == "dup_frames":
            self.load.command(f"dup {ev['worker']} {ev['count']}")
        elif kind == "reorder_frames":
            self.load.command(f"reorder {ev['worker']} {','.join(map(str, ev['order']))}")
        else:
            raise ValueError(f"no way to run a {kind} fault")

    def admin(self, i: int, body: dict) -> None:
        r = self.cluster.nodes[i].post("/admin/faults", body, timeout=10)
        if r.status != 200:
            self.problems.append(f"{self.ids[i]} refused POST /admin/faults {body}: {r}")

    def up(self, i: int) -> None:
        self.gates.bring_up(i)
        for a in self.avail.values():
            a.outage_over(self.ids[i], "down", time.monotonic())

    def heal(self, h: dict) -> None:
        i, what = h["node"], h.get("what")
        node = self.cluster.nodes[i]
        if h["kind"] == "recovered":
            return  # the next node fault waits for a whole cluster anyway
        if what == "restart":
            node.start(keep_ports=True)
            self.up(i)
            if i in self.emptied:  # its copies are gone until it has copied them back
                self.outage(i, "empty")
        elif what == "thaw":
            os.kill(node.proc.pid, signal.SIGCONT)
            self.up(i)
        elif what == "heal":
            self.cluster.heal()
            for a in self.avail.values():
                a.cuts_over(time.monotonic())
        elif what == "disk":
            self.admin(i, {"fail_all_commits": False, "commit_delay_us": 0})
        elif what == "clock":
            offset = node.post("/admin/faults", {"clock_jump_ms": 0},
                               timeout=10).json()["clock_offset_ms"]
            if offset:
                self.admin(i, {"clock_jump_ms": -offset})
        else:
            raise ValueError(f"no way to heal {h}")
