"""`lmcc cluster up` and `lmcc cluster restart --rolling`, run as a user runs
them: the launcher starts three real nodes on loopback, prints their
node-ready lines and cluster-ready; a rolling restart under lookups and ingest
restarts every node (new pids) while every lookup of what was stored before
answers completely; afterwards the cluster answers as a single node does, and
SIGTERM to the launcher stops every node cleanly."""

from __future__ import annotations

import queue
import random
import re
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path
from types import SimpleNamespace

from conftest import BINARY, Node, unique, wait_until
from lmcc_worker import chunk_hashes
from test_cluster import Twin, converged_on, reference, settle  # noqa: F401
from test_durability import commands, full_sync


def free_base_port(nodes: int) -> int:
    """A base port whose block (node i: base+10i .. base+10i+4) is free now."""
    rng = random.Random()
    for _ in range(200):
        base = rng.randrange(20_000, 60_000, 10)
        socks = []
        try:
            for i in range(nodes):
                for k in range(5):
                    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                    socks.append(s)
                    s.bind(("127.0.0.1", base + 10 * i + k))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no free port block")


class Launcher:
    """A running `lmcc cluster up`; its stdout lines are collected."""

    def __init__(self, data_dir: Path, nodes: int):
        self.data_dir = data_dir
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        self.stderr = open(data_dir.parent / "launcher.stderr", "w")
        self.proc = subprocess.Popen(
            [str(BINARY), "cluster", "up", "--nodes", str(nodes), "--data-dir", str(data_dir),
             "--host", "127.0.0.1", "--base-port", str(free_base_port(nodes))],
            stdout=subprocess.PIPE, stderr=self.stderr, text=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))

    def wait_line(self, prefix: str, timeout: float = 60) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.2)
            except queue.Empty:
                assert self.proc.poll() is None, f"launcher exited: {self.seen}"
                continue
            self.seen.append(line)
            if line.startswith(prefix):
                return line
        raise AssertionError(f"no {prefix!r} line within {timeout}s; saw {self.seen}")

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=60)
            self.reader.join(timeout=10)  # EOF: every line is in the queue
            while not self.lines.empty():
                self.seen.append(self.lines.get())
            return rc
        finally:
            self.stderr.close()


def node_from_ready_line(line: str, workdir: Path) -> Node:
    fields = dict(re.findall(r"(\w+)=(\S+)", line))
    node = Node(workdir, ())
    node.http_port = int(fields["http"].rsplit(":", 1)[1])
    node.pull_port = int(fields["pull"].rsplit(":", 1)[1])
    node.reply_port = int(fields["reply"].rsplit(":", 1)[1])
    node.heartbeat_port = int(fields["heartbeat"].rsplit(":", 1)[1])
    return node


def test_cluster_up_and_a_rolling_restart_under_load(tmp_path, reference):
    launcher = Launcher(tmp_path / "cluster", 3)
    twins: list[Twin] = []
    try:
        nodes = [node_from_ready_line(launcher.wait_line("node-ready"), tmp_path) for _ in range(3)]
        launcher.wait_line("cluster-ready")
        pids = {n.get("/cluster/status").json()["pid"] for n in nodes}
        assert len(pids) == 3

        rng = random.Random(51)
        tag = unique("up")
        twins = [Twin(SimpleNamespace(nodes=nodes), reference, rng, f"{tag}-{i}", 0)
                 for i in range(4)]
        for t in twins:
            t.register()
        settle(twins, nodes[0], reference)
        base = rng.randrange(1, 1 << 40)
        stored = [[base + p * 10_000 + i for i in range(256 * 4)] for p in range(8)]
        later = [[base + (100 + p) * 10_000 + i for i in range(256 * 2)] for p in range(16)]
        for i, t in enumerate(twins):
            t.admit(chunk_hashes(stored[2 * i]) + chunk_hashes(stored[2 * i + 1]))
        converged_on(nodes, reference, stored, twins, "before the rolling restart")
        want = [reference.lookup(p) for p in stored]

        done = threading.Event()
        failed: list[str] = []
        partial: list[int] = []
        looked = [0]
        not_ready = [0]

        def lookups():
            while not done.is_set():
                for node in nodes:
                    for i, p in enumerate(stored):
                        try:
                            r = node.post("/lookup", {"tokens": p}, timeout=10)
                        except OSError as e:
                            # A node between stop and start: refused, or closed
                            # as its HTTP server stopped (/readyz said 503 from
                            # the start of its stop); a router retries elsewhere.
                            text = str(e).lower()
                            if any(w in text for w in ("refused", "closed", "reset",
                                                       "broken pipe")):
                                not_ready[0] += 1
                            else:
                                failed.append(f"{node.http_port}: {e}")
                            continue
                        if r.status != 200 and b"loading its index" in r.body:
                            # Not ready yet (/readyz says so): a router behind a
                            # Service with a readiness probe does not send here.
                            not_ready[0] += 1
                            continue
                        looked[0] += 1
                        if r.status != 200:
                            failed.append(f"{node.http_port}: HTTP {r.status} {r.body[:200]!r}")
                        elif r.json()["layout_info"] != want[i]:
                            partial.append((time.monotonic(), node.http_port, i,
                                            r.json()["layout_info"], want[i]))

        def ingest():
            for r in range(len(later)):
                if done.is_set():
                    return
                twins[r % len(twins)].admit(chunk_hashes(later[r]))
                done.wait(0.5)

        threads = [threading.Thread(target=lookups), threading.Thread(target=ingest)]
        for th in threads:
            th.start()
        try:
            restart = subprocess.run(
                [str(BINARY), "cluster", "restart", "--rolling", "--data-dir",
                 str(tmp_path / "cluster"), "--timeout", "300"],
                capture_output=True, text=True, timeout=330)
        finally:
            done.set()
            for th in threads:
                th.join()
        print(restart.stdout)
        assert restart.returncode == 0, restart.stderr
        out = restart.stdout.splitlines()
        assert out[0] == "rolling-restart-start nodes=3"
        assert [line.split()[1] for line in out if line.startswith("node-restarted")] == \
            ["node=n1", "node=n2", "node=n3"]
        assert out[-1].startswith("rolling-restart-done nodes=3")
        new_pids = {n.get("/cluster/status").json()["pid"] for n in nodes}
        assert new_pids.isdisjoint(pids) and len(new_pids) == 3

        print(f"rolling restart: {looked[0]} lookups answered, {len(failed)} failed, "
              f"{len(partial)} partial, {not_ready[0]} sent to a node stopped or not ready yet")
        assert failed == [] and partial == [], (failed[:5], partial[:5])
        resynced = 0
        for t in twins:
            if commands(t.c):
                resynced += 1
                full_sync(t.plan[1], t.c, "after-rolling-restart")
        print(f"rolling restart: {resynced}/{len(twins)} workers asked for a full sync")
        converged_on(nodes, reference, stored + later, twins, "after the rolling restart")
    finally:
        for t in twins:
            t.close()
        rc = launcher.stop()
    assert rc == 0
    stopped = [line.split()[1] for line in launcher.seen if line.startswith("node-stopped")]
    # three from the rolling restart, three when the launcher stopped
    assert sorted(stopped) == ["node=n1", "node=n1", "node=n2", "node=n2", "node=n3", "node=n3"]
    assert not (tmp_path / "cluster" / "launcher.pid").exists()
