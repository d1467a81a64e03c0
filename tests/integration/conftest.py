"""Fixtures for the wire-level integration suite: real `lmcc node` processes on
127.0.0.1 driven by fake workers (lmcc_worker.py) over real ZMQ and HTTP sockets.

    def test_x(node_factory, make_worker):
        node = node_factory("--control-timeout-ms", "500")
        w = make_worker(node, "inst-a")
        w.register()
        wait_until(lambda: node.get("/readyz")[0] == 200)

Every node is stopped with SIGTERM at teardown, which must end it with exit code
0 within 5 s. A failing test gets the tail of every live node's log attached.

Synchronisation is always by polling a condition with a deadline (wait_until),
never by sleeping.
"""

from __future__ import annotations

import http.client
import itertools
import json
import os
import random
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Callable, Optional

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from lmcc_worker import FakeWorker  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[2]
BINARY = Path(os.environ.get("LMCC_BINARY", REPO_ROOT / "build" / "lmcc"))

# The node's short timeouts for this suite (the flags' defaults are 30 s / 300 s).
CONTROL_TIMEOUT_MS = 500
STARTUP_DEADLINE_S = 15.0
SHUTDOWN_DEADLINE_S = 5.0

STDBUF = ["stdbuf", "-oL", "-eL"] if shutil.which("stdbuf") else []

# The 13 LMCache gauges (spec 5.3), exact names.
LMCACHE_GAUGES = [
    "lmcache:cache_controller_kv_pool_keys_count",
    "lmcache:cache_controller_registered_workers_count",
    "lmcache:cache_controller_pull_socket_message_count",
    "lmcache:cache_controller_reply_socket_message_count",
    "lmcache:cache_controller_pull_socket_has_pending",
    "lmcache:cache_controller_reply_socket_has_pending",
    "lmcache:cache_controller_pull_socket_active_requests",
    "lmcache:cache_controller_reply_socket_active_requests",
    "lmcache:cache_controller_kv_op_seq_discontinuity_count",
    "lmcache:cache_controller_full_sync_workers_syncing",
    "lmcache:cache_controller_full_sync_workers_completed",
    "lmcache:cache_controller_full_sync_global_progress",
    "lmcache:cache_controller_full_sync_missing_batches_total",
]


# -- polling ------------------------------------------------------------------------------


def wait_until(predicate: Callable[[], Any], timeout: float = 10.0, interval: float = 0.02,
               message: str = "condition") -> Any:
    """Polls `predicate` until it returns something truthy (returned) or `timeout`
    seconds pass (AssertionError naming `message` and the last value seen)."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        last = predicate()
        if last:
            return last
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {message}; last value: {last!r}")
        time.sleep(interval)


# -- unique names -------------------------------------------------------------------------

_counter = itertools.count(1)


def unique(prefix: str) -> str:
    """A name no other test in this session uses (instance ids, sync ids)."""
    return f"{prefix}-{next(_counter)}"


_ip_counter = itertools.count(0)


def unique_ip() -> str:
    """A loopback address of its own (all of 127/8 is loopback on Linux), so that
    /query_instance can tell workers apart and each fake REP binds its own ip."""
    n = next(_ip_counter)
    return f"127.0.{10 + n // 250}.{n % 250 + 2}"


# -- the node process -----------------------------------------------------------------------


# Ports handed out with reserve=True (a cluster's member list names them before
# its nodes bind them): later calls never return them.
_reserved_ports: set[int] = set()


def _ephemeral_range() -> tuple[int, int]:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low, high = (int(x) for x in f.read().split())
            return low, high
    except (OSError, ValueError):
        return 32768, 60999


def _port_candidates() -> range:
    """Ports below the kernel's ephemeral range, one eighth of them per
    process (by pid), so two suites running at once (ctest -j2) rarely pick
    the same port in the moment between picking and binding it."""
    low, top = 10000, _ephemeral_range()[0]
    share = (top - low) // 8
    if share < 500:  # an unusual port range: take what there is
        return range(1024, top)
    first = low + (os.getpid() % 8) * share
    return range(first, first + share)


_port_rng = random.Random()  # ports only: the tests' seeded generators stay untouched


def free_ports(n: int, reserve: bool = False) -> list[int]:
    """n distinct free TCP ports on 127.0.0.1, none of them reserved before.
    Not from the kernel's ephemeral range: a released ephemeral port can become
    the local port of any outbound connection (another node connecting to its
    peers, a test's client) before the node given it binds it -- seen as
    "address already in use" at start and as clusters that never formed
    (6 of 20 starts of a three-node cluster with its ports in that range)."""
    candidates = _port_candidates()
    ports: list[int] = []
    for _ in range(100 * n + 1000):
        if len(ports) == n:
            break
        port = _port_rng.choice(candidates)
        if port in _reserved_ports or port in ports:
            continue
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            continue
        finally:
            s.close()
        ports.append(port)
    if len(ports) < n:
        raise RuntimeError(f"no {n} free ports in {candidates}")
    if reserve:
        _reserved_ports.update(ports)
    return ports


class HttpResponse:
    def __init__(self, status: int, body: bytes, content_type: str,
                 headers: Optional[dict[str, str]] = None):
        self.status = status
        self.body = body
        self.content_type = content_type
        self.headers = headers or {}  # as sent (names as the server wrote them)

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", "replace")

    def json(self) -> Any:
        return json.loads(self.body)

    def __iter__(self):  # status, json = node.post(...)
        yield self.status
        try:
            yield self.json()
        except ValueError:
            yield self.text

    def __repr__(self) -> str:
        return f"<HTTP {self.status} {self.text[:300]!r}>"


_live_nodes: list["Node"] = []
_live_lock = threading.Lock()


class Node:
    """One `lmcc node` process with free ports on 127.0.0.1."""

    def __init__(self, workdir: Path, extra_args: tuple[str, ...],
                 env: Optional[dict[str, str]] = None, tls_ca: Optional[Path] = None,
                 token: Optional[str] = None):
        self.workdir = workdir
        self.extra_args = extra_args
        self.env = env or {}
        # HTTPS (lmcc_http_tls_*): requests verify the node against this CA.
        self.tls_ca = tls_ca
        # The API token every request bears (request(token=...) overrides it).
        self.token = token
        self.proc: Optional[subprocess.Popen] = None
        self.log_path: Optional[Path] = None
        self.returncode: Optional[int] = None

    # -- addresses ---------------------------------------------------------------

    @property
    def http_url(self) -> str:
        scheme = "https" if self.tls_ca else "http"
        return f"{scheme}://127.0.0.1:{self.http_port}"

    @property
    def pull_url(self) -> str:
        return f"127.0.0.1:{self.pull_port}"

    @property
    def reply_url(self) -> str:
        return f"127.0.0.1:{self.reply_port}"

    @property
    def heartbeat_url(self) -> str:
        return f"127.0.0.1:{self.heartbeat_port}"

    # -- lifecycle ---------------------------------------------------------------

    def start(self, keep_ports: bool = False, expect_ready: bool = True) -> "Node":
        """Starts the process (new free ports unless keep_ports: a restart on the
        same addresses, which the workers' sockets reconnect to). With
        expect_ready=False it returns once the process has exited or is ready."""
        assert BINARY.exists(), f"lmcc binary not found at {BINARY} (set LMCC_BINARY)"
        for attempt in range(3):
            if not keep_ports:
                self.http_port, self.pull_port, self.reply_port, self.heartbeat_port = free_ports(4)
            self.starts = getattr(self, "starts", 0) + 1
            self.log_path = self.workdir / f"node-{self.http_port}-{self.starts}.log"
            ports = json.dumps({"pull": self.pull_port, "reply": self.reply_port,
                                "heartbeat": self.heartbeat_port})
            # stdbuf: spdlog writes to stdout, which is block-buffered into a file;
            # line buffering keeps the log complete up to the moment of a failure.
            # Flags the test did not give itself get the suite's defaults.
            defaults = []
            for flag, value in (("--host", "127.0.0.1"),
                                ("--control-timeout-ms", str(CONTROL_TIMEOUT_MS))):
                if flag not in self.extra_args:
                    defaults += [flag, value]
            args = [*STDBUF, str(BINARY), "node", "--port", str(self.http_port),
                    "--monitor-ports", ports, "--log-level", "debug",
                    "--data-dir", str(self.workdir / "data"), *defaults, *self.extra_args]
            self.args = args
            self.returncode = None
            log = open(self.log_path, "wb")
            # stdbuf works by LD_PRELOAD; under `make test-asan` ASan must stay first
            # in the library list, so tell it not to insist on that.
            env = {**os.environ, **self.env}
            env["ASAN_OPTIONS"] = ":".join(
                filter(None, [env.get("ASAN_OPTIONS", ""), "verify_asan_link_order=0"]))
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                                         cwd=self.workdir, stdin=subprocess.DEVNULL, env=env)
            log.close()
            with _live_lock:
                _live_nodes.append(self)
            try:
                wait_until(self._ready_or_dead, timeout=STARTUP_DEADLINE_S, interval=0.02,
                           message=f"GET /readyz == 200 on {self.http_url}")
            except AssertionError:
                self.kill()
                raise AssertionError(f"node did not become ready:\n{self.log_tail()}")
            if self.proc.poll() is None:
                return self
            # Exited during start-up: most likely a port taken in between; retry.
            self.returncode = self.proc.returncode
            with _live_lock:
                _live_nodes.remove(self)
            if not expect_ready:
                return self
            if attempt == 2 or keep_ports or "cannot bind" not in self.log_text():
                raise AssertionError(f"node exited with {self.returncode} during start-up:\n"
                                     f"{self.log_tail()}")
        raise AssertionError("unreachable")

    def _ready_or_dead(self) -> bool:
        if self.proc.poll() is not None:
            return True
        try:
            return self.get("/readyz", timeout=2).status == 200
        except (OSError, http.client.HTTPException):
            # HTTPException: something else answers on the port picked for this
            # node (another suite's process took it in between); this node then
            # fails to bind, exits, and start() retries on fresh ports.
            return False

    def stop(self) -> int:
        """SIGTERM; returns the exit code (AssertionError if it takes over 5 s)."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=SHUTDOWN_DEADLINE_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                self._forget()
                raise AssertionError(f"node did not exit within {SHUTDOWN_DEADLINE_S}s of SIGTERM:\n"
                                     f"{self.log_tail()}")
        self.returncode = self.proc.returncode
        self._forget()
        return self.returncode

    def restart(self, *extra_args: str, hard: bool = False,
                expect_ready: bool = True) -> "Node":
        """Stops the node (SIGTERM, or SIGKILL when hard) and starts it again on the
        same ports and data dir, with extra_args replacing the test's own flags."""
        if hard:
            self.kill()
        else:
            assert self.stop() == 0, self.log_tail()
        if extra_args:
            self.extra_args = tuple(extra_args)
        return self.start(keep_ports=True, expect_ready=expect_ready)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._forget()

    def _forget(self) -> None:
        with _live_lock:
            if self in _live_nodes:
                _live_nodes.remove(self)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path else ""

    def log_tail(self, lines: int = 80) -> str:
        text = self.log_text().splitlines()
        return f"--- {self.log_path} (last {lines} lines) ---\n" + "\n".join(text[-lines:])

    # -- HTTP ------------------------------------------------------------------------

    def request(self, method: str, path: str, body: Any = None, timeout: float = 30,
                content_type: str = "application/json",
                token: Optional[str] = None) -> HttpResponse:
        """token: the bearer token to send; None: the node's own (self.token);
        "": none."""
        data = None
        if body is not None:
            if isinstance(body, (bytes, bytearray)):
                data = bytes(body)
            elif isinstance(body, str):
                data = body.encode()
            else:
                data = json.dumps(body).encode()
        req = urllib.request.Request(self.http_url + path, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", content_type)
        bearer = self.token if token is None else token
        if bearer:
            req.add_header("Authorization", f"Bearer {bearer}")
        context = ssl.create_default_context(cafile=str(self.tls_ca)) if self.tls_ca else None
        try:
            with urllib.request.urlopen(req, timeout=timeout, context=context) as resp:
                return HttpResponse(resp.status, resp.read(), resp.headers.get("Content-Type", ""),
                                    dict(resp.headers.items()))
        except urllib.error.HTTPError as e:
            return HttpResponse(e.code, e.read(), e.headers.get("Content-Type", ""))

    def get(self, path: str, timeout: float = 30, token: Optional[str] = None) -> HttpResponse:
        return self.request("GET", path, timeout=timeout, token=token)

    def post(self, path: str, body: Any, timeout: float = 30,
             token: Optional[str] = None) -> HttpResponse:
        return self.request("POST", path, body, timeout=timeout, token=token)

    # -- observations ----------------------------------------------------------------

    def metrics(self) -> dict[str, float]:
        """Every sample line of /metrics: 'name{labels}' (as printed) -> value."""
        r = self.get("/metrics")
        assert r.status == 200, r
        out = {}
        for line in r.text.splitlines():
            if not line or line.startswith("#"):
                continue
            key, _, value = line.rpartition(" ")
            out[key] = float(value)
        return out

    def gauge(self, name: str) -> float:
        return self.metrics()[f'lmcache:cache_controller_{name}{{role="controller"}}']

    def event_count(self, event: str) -> float:
        return self.metrics().get(f'lmcc_events_total{{event="{event}"}}', 0.0)

    def workers(self, instance_id: Optional[str] = None) -> list[dict]:
        path = "/controller/workers" + (f"?instance_id={instance_id}" if instance_id else "")
        r = self.get(path)
        if r.status == 404:
            return []
        assert r.status == 200, r
        return r.json()["workers"]

    def key_count(self, instance_id: str, worker_id: Optional[int] = None) -> int:
        """Keys the node holds for an instance (or one of its workers); -1 if unknown."""
        ws = self.workers(instance_id)
        if worker_id is not None:
            ws = [w for w in ws if w["worker_id"] == worker_id]
        if not ws:
            return -1
        return sum(w["key_count"] for w in ws)

    def lookup(self, tokens: list[int]) -> dict:
        r = self.post("/lookup", {"tokens": tokens})
        assert r.status == 200, r
        return r.json()["layout_info"]


class NodeFactory:
    def __init__(self, tmp_dir: Path):
        self.tmp_dir = tmp_dir
        self.nodes: list[Node] = []

    def __call__(self, *extra_args: str, env: Optional[dict[str, str]] = None,
                 tls_ca: Optional[Path] = None, token: Optional[str] = None,
                 expect_ready: bool = True) -> Node:
        workdir = self.tmp_dir / f"n{len(self.nodes)}"
        workdir.mkdir(parents=True, exist_ok=True)
        node = Node(workdir, tuple(extra_args), env=env, tls_ca=tls_ca, token=token)
        self.nodes.append(node)
        return node.start(expect_ready=expect_ready)

    def stop_all(self) -> None:
        problems = []
        for node in self.nodes:
            if node.proc is None or node.returncode is not None:
                continue  # never started, or stopped (and checked) by the test itself
            was_alive = node.alive()
            try:
                rc = node.stop()
            except AssertionError as e:
                problems.append(str(e))
                continue
            if rc != 0:
                state = "on SIGTERM" if was_alive else "before teardown (crashed?)"
                problems.append(f"node exited with {rc} {state}:\n{node.log_tail()}")
        if problems:
            pytest.fail("\n\n".join(problems), pytrace=False)


@pytest.fixture
def node_factory(tmp_path):
    """Starts fresh nodes for one test: node_factory("--flag", "value") -> Node."""
    factory = NodeFactory(tmp_path)
    yield factory
    factory.stop_all()


@pytest.fixture(scope="module")
def module_node_factory(tmp_path_factory):
    """Like node_factory, but the nodes live for the whole test module."""
    factory = NodeFactory(tmp_path_factory.mktemp("module-nodes"))
    yield factory
    factory.stop_all()


@pytest.fixture(scope="module")
def node(module_node_factory, tmp_path_factory):
    """One node shared by a module's tests; tests keep apart by unique instance ids.

    With LMCC_TEST_CLUSTER=1 it is a three-node cluster instead, driven through
    all three nodes (lmcc_cluster.SpreadNode): the same tests then check that a
    cluster answers as one controller does."""
    if not os.environ.get("LMCC_TEST_CLUSTER"):
        yield module_node_factory()
        return
    from lmcc_cluster import Cluster, SpreadNode

    cluster = Cluster(tmp_path_factory.mktemp("cluster")).start()
    with _live_lock:
        _live_nodes.extend(cluster.nodes)
    try:
        yield SpreadNode(cluster)
    finally:
        cluster.stop()


# -- fake workers -----------------------------------------------------------------------------


@pytest.fixture
def make_worker():
    """make_worker(node, instance_id, worker_id=0, **kwargs) -> FakeWorker (closed at teardown).
    Each worker gets a loopback ip of its own unless `ip=` is given."""
    made: list[FakeWorker] = []

    def make(node: Node, instance_id: str, worker_id: int = 0, **kwargs) -> FakeWorker:
        kwargs.setdefault("ip", unique_ip())
        w = FakeWorker(node, instance_id, worker_id, **kwargs)
        made.append(w)
        return w

    yield make
    for w in made:
        w.close()


# -- tests of one node's own counters --------------------------------------------------------


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "single_node(why): checks one node's own counters or ports; skipped when the "
        "suite runs against a cluster (LMCC_TEST_CLUSTER=1)")


def pytest_collection_modifyitems(config, items):
    if not os.environ.get("LMCC_TEST_CLUSTER"):
        return
    # Against a cluster, run the tests of the shared `node`; the others start
    # nodes of their own and run in the single-node pass already.
    deselected = [item for item in items if "node" not in item.fixturenames]
    items[:] = [item for item in items if "node" in item.fixturenames]
    config.hook.pytest_deselected(items=deselected)
    for item in items:
        marker = item.get_closest_marker("single_node")
        if marker is not None:
            item.add_marker(pytest.mark.skip(reason="one node's own view: " + marker.args[0]))


# -- failure reports: attach the node logs ----------------------------------------------------


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed and report.when in ("call", "setup"):
        with _live_lock:
            nodes = list(_live_nodes)
        for node in nodes:
            report.sections.append((f"lmcc node log {node.http_url}", node.log_tail(120)))
