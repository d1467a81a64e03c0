"""A cluster of `lmcc node` processes on loopback for the integration suite, and a
facade that lets the single-node suite drive a cluster through several nodes."""

from __future__ import annotations

import json
import secrets
from pathlib import Path

import pytest

from conftest import Node, free_ports, wait_until
from tcp_proxy import TcpProxy


class Cluster:
    """N `lmcc node` processes that form one cluster (real processes, loopback)."""

    def __init__(self, tmp: Path, n: int = 3, replicas: int = 2, extra: tuple[str, ...] = (),
                 proxied: bool = False, standby: frozenset[str] = frozenset()):
        """proxied: every node reaches each peer through its own TcpProxy
        (tcp_proxy.py), so partition() can cut any pair of nodes. standby: ids
        configured as standby nodes (known, owning nothing until POST
        /cluster/members adds them)."""
        self.standby = standby
        self.tmp = tmp
        tmp.mkdir(parents=True, exist_ok=True)
        self.secret_file = tmp / "cluster.secret"
        self.secret_file.write_text(secrets.token_hex(32))
        self.secret_file.chmod(0o600)
        self.cluster_ports = free_ports(n, reserve=True)
        self.ids = [f"n{i + 1}" for i in range(n)]
        self.members = json.dumps([self.entry(i, p) for i, p in zip(self.ids, self.cluster_ports)])
        # (from, to) -> the proxy `from` dials to reach `to`.
        self.proxies: dict[tuple[str, str], TcpProxy] = {}
        if proxied:
            for a in self.ids:
                for b, port in zip(self.ids, self.cluster_ports):
                    if a != b:
                        self.proxies[(a, b)] = TcpProxy(port)
        self.nodes: list[Node] = []
        for i, node_id in enumerate(self.ids):
            workdir = tmp / node_id
            workdir.mkdir(parents=True, exist_ok=True)
            self.nodes.append(Node(workdir, self.args(node_id, replicas) + tuple(extra)))

    def members_seen_by(self, node_id: str) -> str:
        """The member list node_id is given: the same ids and order on every node
        (placement hashes the ids only); peers' ports are its proxies' if any."""
        if not self.proxies:
            return self.members
        return json.dumps([self.entry(i, p if i == node_id else self.proxies[(node_id, i)].port)
                           for i, p in zip(self.ids, self.cluster_ports)])

    def entry(self, node_id: str, port: int) -> dict:
        e = {"id": node_id, "host": "127.0.0.1", "port": port}
        if node_id in self.standby:
            e["standby"] = True
        return e

    def args(self, node_id: str, replicas: int, secret_file: Path | None = None) -> tuple[str, ...]:
        return ("--node-id", node_id, "--cluster-members", self.members_seen_by(node_id),
                "--replicas", str(replicas), "--cluster-secret-file",
                str(secret_file or self.secret_file))

    def partition(self, side: set[str]) -> None:
        """Cuts every link between the nodes in `side` and the others (both
        directions); needs proxied=True."""
        assert self.proxies, "partition() needs Cluster(proxied=True)"
        for (a, b), proxy in self.proxies.items():
            if (a in side) != (b in side):
                proxy.pause()

    def cut_one_way(self, a: str, b: str) -> None:
        """An asymmetric partition: the connection `a` dials to `b` stops
        (both directions of that TCP stream), the one `b` dials to `a` still
        works; needs proxied=True."""
        self.proxies[(a, b)].pause()

    def slow(self, node_id: str, seconds: float) -> None:
        """Every link to and from `node_id` delays each chunk by `seconds`."""
        for (a, b), proxy in self.proxies.items():
            if node_id in (a, b):
                proxy.delay = seconds

    def heal(self) -> None:
        for proxy in self.proxies.values():
            proxy.resume()
            proxy.delay = 0.0

    def start(self) -> "Cluster":
        try:
            for node in self.nodes:
                node.start()
            self.wait_joined()
        except BaseException:
            for node in self.nodes:  # no node outlives a cluster that failed to start
                node.kill()
            raise
        return self

    def status(self, node: Node) -> dict:
        r = node.get("/cluster/status")
        assert r.status == 200, r
        return r.json()

    def wait_joined(self, nodes: list[Node] | None = None) -> None:
        nodes = nodes or self.nodes

        def joined():
            statuses = [self.status(n) for n in nodes]
            return (all(s["all_live"] for s in statuses)
                    and len({s["ring_version"] for s in statuses}) == 1)

        wait_until(joined, timeout=20, message="every node sees every other")

    def stop(self) -> None:
        self.heal()
        problems = []
        for node in self.nodes:
            if node.alive():
                rc = node.stop()
                if rc != 0:
                    problems.append(f"{node.workdir.name} exited with {rc}:\n{node.log_tail()}")
        for proxy in self.proxies.values():
            proxy.close()
        if problems:
            pytest.fail("\n\n".join(problems), pytrace=False)




class SpreadNode:
    """Looks like one Node to the single-node tests, but is a cluster: fake
    workers push to one node, send requests to another and heartbeats to a
    third; HTTP calls go to each node in turn. So every test of the suite
    checks that the cluster answers as one controller does."""

    def __init__(self, cluster: Cluster):
        self.cluster = cluster
        a, b, c = (cluster.nodes * 3)[:3]
        self.pull_url = a.pull_url
        self.reply_url = b.reply_url
        self.heartbeat_url = c.heartbeat_url
        self._next = 0

    def _http_node(self) -> Node:
        node = self.cluster.nodes[self._next % len(self.cluster.nodes)]
        self._next += 1
        return node

    def __getattr__(self, name):
        # request/get/post/metrics/workers/key_count/lookup/... on the next node;
        # http_url and the rest on that node as well.
        return getattr(self._http_node(), name)
