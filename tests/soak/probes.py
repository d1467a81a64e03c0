"""The soak's lookups: HTTP /lookup and BatchedP2PLookupMsg of the workers'
prompts at steady rates, spread over the nodes that are up, each recorded
for the availability rule (tests/chaos/availability.py) and its latency kept
for the per-minute p99.

One thread per (node, kind), each at rate / nodes, so a node that answers
slowly (partitioned, on a slow link) slows only its own share. A node taken
down is not asked: the fault runner takes the node's gate (held by a probe
while its request is in flight) before it kills or freezes it, so no lookup
is sent to a node the harness is about to take down, and none is in flight
when it does.
"""
from __future__ import annotations

import random
import sys
import threading
import time
from pathlib import Path

import zmq

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
from lmcc_worker import p2p_lookup_msg, pack, unpack  # noqa: E402

CHUNK = 256
TIMEOUT_S = 15.0  # the chaos runner's: a lookup slower than this failed
# The P2P asker: an instance no worker has (the controller excludes the
# asker's own instance from the answer, spec 4.6).
ASKER = "soak-prober"


class NodeGates:
    """Per node: whether it is down, and a lock held while a probe's request
    to it is in flight."""

    def __init__(self, n: int):
        self.locks = [threading.Lock() for _ in range(n)]
        self.down = [False] * n

    def take_down(self, i: int) -> None:
        with self.locks[i]:
            self.down[i] = True

    def bring_up(self, i: int) -> None:
        with self.locks[i]:
            self.down[i] = False


class Probes:
    def __init__(self, cluster, gates: NodeGates, prompts: list[dict], avail: dict,
                 lookup_rate: float, p2p_rate: float, seed: int):
        """prompts: [{"instance", "tokens", "keys"}], in the Availability's
        prompt order; avail: {"lookup": Availability, "p2p": Availability}."""
        self.cluster = cluster
        self.gates = gates
        self.prompts = prompts
        self.avail = avail
        self.rates = {"lookup": lookup_rate, "p2p": p2p_rate}
        self.seed = seed
        self.lock = threading.Lock()
        # (kind, sent, latency_s or None): drained by the sampler each interval.
        self.recent: list[tuple[str, float, float | None]] = []
        self.stop_event = threading.Event()
        self.threads: list[threading.Thread] = []

    def start(self) -> None:
        n = len(self.cluster.nodes)
        for kind, rate in self.rates.items():
            if rate <= 0:
                continue
            for i in range(n):
                t = threading.Thread(target=self._run, args=(kind, i, rate / n),
                                     name=f"soak-{kind}-n{i + 1}", daemon=True)
                t.start()
                self.threads.append(t)

    def stop(self) -> None:
        self.stop_event.set()
        for t in self.threads:
            t.join(timeout=TIMEOUT_S + 5)

    def drain(self) -> list[tuple[str, float, float | None]]:
        with self.lock:
            out, self.recent = self.recent, []
        return out

    def _run(self, kind: str, i: int, rate: float) -> None:
        rng = random.Random(f"{self.seed}-{kind}-{i}")
        period = 1.0 / rate
        next_at = time.monotonic() + rng.uniform(0, period)
        sock = None
        ctx = zmq.Context.instance()
        while not self.stop_event.is_set():
            delay = next_at - time.monotonic()
            if delay > 0 and self.stop_event.wait(delay):
                break
            next_at = max(next_at + period, time.monotonic())
            p = rng.randrange(len(self.prompts))
            with self.gates.locks[i]:
                if self.gates.down[i]:
                    continue
                node = self.cluster.nodes[i]
                sent = time.monotonic()
                layout, error = None, ""
                try:
                    if kind == "lookup":
                        layout, error = self._lookup(node, p)
                    else:
                        if sock is None:
                            sock = self._dealer(ctx, node)
                        layout, error = self._p2p(sock, p)
                        if layout is None:  # a late reply must not answer the next request
                            sock.close(linger=0)
                            sock = None
                except Exception as e:  # noqa: BLE001 - a failed lookup is counted
                    error = f"{type(e).__name__}: {e}"
                answered = time.monotonic()
            self.avail[kind].record(self.cluster.ids[i], p, sent, answered, layout, error)
            with self.lock:
                self.recent.append((kind, sent, answered - sent if layout is not None else None))
        if sock is not None:
            sock.close(linger=0)

    def _lookup(self, node, p: int):
        r = node.post("/lookup", {"tokens": self.prompts[p]["tokens"]}, timeout=TIMEOUT_S)
        if r.status == 200:
            return r.json()["layout_info"], ""
        return None, f"HTTP {r.status} {r.text[:200]}"

    @staticmethod
    def _dealer(ctx, node):
        s = ctx.socket(zmq.DEALER)
        s.setsockopt(zmq.LINGER, 0)
        s.setsockopt(zmq.RCVTIMEO, int(TIMEOUT_S * 1000))
        s.setsockopt(zmq.SNDTIMEO, int(TIMEOUT_S * 1000))
        s.connect(f"tcp://{node.reply_url}")
        return s

    def _p2p(self, sock, p: int):
        """The answer as a /lookup layout ({instance: [location, tokens]}), so
        that the availability rule judges both alike."""
        sock.send_multipart([b"", pack(p2p_lookup_msg(self.prompts[p]["keys"], ASKER, 0))])
        try:
            frames = sock.recv_multipart()
        except zmq.Again:
            return None, "no reply within the timeout"
        reply = unpack(frames[-1])
        if reply.get("type") != "BatchedP2PLookupRetMsg":
            return None, f"unexpected reply {str(reply)[:200]}"
        instance, location, hits, _url = reply["layout_info"][0]
        return ({instance: [location, hits * CHUNK]} if instance else {}), ""
