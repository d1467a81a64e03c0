"""Prometheus for real (docs/prometheus.md): Debian's `prometheus` scrapes a
three-node lmcc cluster with the shipped deploy/prometheus/prometheus.yml and
evaluates the shipped deploy/prometheus/lmcc-alerts.yml; every check goes
through Prometheus' own HTTP API (/api/v1/query, /api/v1/rules,
/api/v1/alerts), and promtool checks what ships.

The cluster, its nodes and the fake LMCache workers are the integration
suite's (tests/integration: conftest.py, lmcc_cluster.py, lmcc_worker.py).
Prometheus runs with the shipped scrape configuration, changed only where a
test must change it: 1 s scrape and evaluation intervals, the test nodes'
ports for the `make run` ones, and the rule file's absolute path.

What each LMCache gauge means per node (README "Metrics"), hence the queries
that must equal the cluster's figures:
  - kv_pool_keys_count: the entries (key, worker) of the slots the node is
    the primary of, so sum() over the nodes is /controller/key-stats'
    total_key_count;
  - registered_workers_count: the replicated Directory's size, the same on
    every node, so max() (and min()) is the cluster's worker count and sum()
    is the node count times it;
  - lmcc_index_keys: the distinct keys the node holds as primary or replica,
    so sum() is R times the cluster's distinct keys.

Synchronisation is by polling with a deadline (wait_until), never by sleeping.
"""

from __future__ import annotations

import http.client
import json
import math
import os
import random
import re
import signal
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
DEPLOY = REPO / "deploy" / "prometheus"
SCRAPE_CONFIG = DEPLOY / "prometheus.yml"
RULES = DEPLOY / "lmcc-alerts.yml"
DASHBOARD = DEPLOY / "grafana-lmcc.json"

sys.path.insert(0, str(REPO / "tests" / "integration"))

from conftest import free_ports, unique_ip, wait_until  # noqa: E402
from lmcc_cluster import Cluster  # noqa: E402
from lmcc_worker import LOCATION, FakeWorker, chunk_hashes  # noqa: E402

# A failing test's report gets failure_logs() (below).
pytest_plugins = ["failure_logs"]

PROMETHEUS = os.environ.get("LMCC_PROMETHEUS", "/usr/bin/prometheus")
PROMTOOL = os.environ.get("LMCC_PROMTOOL", "/usr/bin/promtool")

# The alerts issue 42 asks for, by the names lmcc-alerts.yml gives them.
ASKED_ALERTS = {"LmccNodeDown", "LmccSlotsUnderReplicated", "LmccReplicationLag",
                "LmccFullSyncsAsked", "LmccPullBackPressure", "LmccStoreCommitFailures",
                "LmccMemoryNearBound"}


def require_prometheus() -> None:
    for tool in (PROMETHEUS, PROMTOOL):
        if not (Path(tool).is_file() and os.access(tool, os.X_OK)):
            pytest.fail(f"{tool} not found: Debian's `prometheus` package provides it "
                        "(deploy/install-deps.sh installs it)", pytrace=False)


def await_value(fetch: Callable[[], Any], ok: Callable[[Any], bool], message: str,
                timeout: float = 15.0) -> Any:
    """Polls fetch() until ok(value); returns that value. The error shows the last one."""
    seen: list[Any] = [None]

    def check():
        seen[0] = fetch()
        return ok(seen[0])

    try:
        wait_until(check, timeout=timeout, interval=0.1, message=message)
    except AssertionError as e:
        raise AssertionError(f"{e}\n  last value: {seen[0]!r}") from None
    return seen[0]


def await_equal(fetch: Callable[[], Any], want: Any, message: str, timeout: float = 15.0) -> Any:
    """Polls fetch() until it returns `want`."""
    return await_value(fetch, lambda v: v == want, f"{message} (want {want!r})", timeout)


# -- PromQL: the metric names an expression uses -----------------------------------------------

PROMQL_KEYWORDS = {"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring",
                   "group_left", "group_right", "inf", "nan", "atan2"}


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects: identifiers that are not
    functions or aggregations (followed by '('), keywords, label names (inside
    {} or a by/on/... list), durations or numbers."""
    grafana = re.fullmatch(r"\s*label_values\((.*),\s*[a-zA-Z_][a-zA-Z0-9_]*\s*\)\s*", expr, re.S)
    if grafana:  # a Grafana template query: label_values(SELECTOR, LABEL)
        expr = grafana.group(1)
    s = re.sub(r'"(?:\\.|[^"\\])*"', '""', expr)
    s = re.sub(r"\{[^}]*\}", " ", s)
    s = re.sub(r"\[[^\]]*\]", " ", s)
    s = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", s)
    s = re.sub(r"(?<![a-zA-Z0-9_:])[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?", " ", s)
    names = set()
    for m in re.finditer(r"[a-zA-Z_:][a-zA-Z0-9_:]*", s):
        if s[m.end():].lstrip().startswith("(") or m.group(0) in PROMQL_KEYWORDS:
            continue
        names.add(m.group(0))
    return names


def label_matchers(expr: str, label: str) -> list[tuple[str, str]]:
    """(operator, value) of every matcher on `label` in the expression."""
    return [(op, value) for op, value in
            re.findall(r'\b' + label + r'\s*(=~|!~|!=|=)\s*"((?:\\.|[^"\\])*)"', expr)]


def as_bool(expr: str) -> str:
    """The expression with every comparison a `bool` one (label matchers and
    strings untouched): it keeps the series a filtering comparison drops."""
    return re.sub(r'\{[^}]*\}|"(?:\\.|[^"\\])*"|(==|!=|>=|<=|>(?!=)|<(?!=))(?!\s*bool\b)',
                  lambda m: m.group(0) if m.group(1) is None else m.group(1) + " bool", expr)


def exposition_names(text: str) -> set[str]:
    """Every series name in a Prometheus text exposition (a histogram family
    gives its _bucket, _sum and _count)."""
    names = set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(None, 3)
            names.add(name)
            if kind.strip() == "histogram":
                names.update({name + "_bucket", name + "_sum", name + "_count"})
        elif line and not line.startswith("#"):
            names.add(re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", line).group(0))
    return names


def dashboard_queries(dashboard: dict) -> list[str]:
    """Every PromQL expression of the Grafana JSON: panel targets and template
    variables' queries."""
    out: list[str] = []

    def walk(x):
        if isinstance(x, dict):
            if isinstance(x.get("expr"), str):
                out.append(x["expr"])
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    walk(dashboard.get("panels", []))
    for var in dashboard.get("templating", {}).get("list", []):
        if var.get("type") == "query":
            q = var.get("query")
            out.append(q["query"] if isinstance(q, dict) else q)
    return out


def grafana_to_promql(expr: str) -> str:
    """A dashboard expression as Prometheus runs it once Grafana has filled in
    its variables (every node, a 1 m rate interval)."""
    return expr.replace("$__rate_interval", "1m").replace("$node", ".*")


# -- Prometheus ------------------------------------------------------------------------


class Prometheus:
    """Debian's prometheus on a free loopback port with a temp storage dir."""

    def __init__(self, workdir: Path, config_text: str):
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.config = workdir / "prometheus.yml"
        self.config.write_text(config_text)
        self.log_path = workdir / "prometheus.log"
        self.proc: subprocess.Popen | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> "Prometheus":
        for attempt in range(3):
            self.port = free_ports(1, reserve=True)[0]
            args = [PROMETHEUS, f"--config.file={self.config}",
                    f"--storage.tsdb.path={self.workdir / f'data-{attempt}'}",
                    f"--web.listen-address=127.0.0.1:{self.port}"]
            with open(self.log_path, "ab") as log:
                self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                                             stdin=subprocess.DEVNULL, cwd=self.workdir)
            try:
                wait_until(lambda: self.proc.poll() is not None or self._ready(), timeout=30,
                           interval=0.1, message=f"prometheus ready on {self.url}")
            except AssertionError as e:
                self.stop()
                raise AssertionError(f"{e}\n{self.log_tail()}") from None
            if self.proc.poll() is None:
                return self
            if "address already in use" not in self.log_tail():
                break  # not a port taken in between: no point retrying
        raise AssertionError(f"prometheus did not start:\n{self.log_tail()}")

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(self.url + "/-/ready", timeout=2) as r:
                return r.status == 200
        except (OSError, http.client.HTTPException):  # not up yet, or not Prometheus
            return False

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def log_tail(self, lines: int = 40) -> str:
        text = self.log_path.read_text(errors="replace").splitlines() if self.log_path.exists() else []
        return f"--- {self.log_path} ---\n" + "\n".join(text[-lines:])

    # -- the HTTP API ----------------------------------------------------------------

    def api(self, path: str, **params: str) -> Any:
        """GET /api/v1/<path>; the `data` of a successful answer."""
        url = f"{self.url}/api/v1/{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                body = json.load(r)
        except urllib.error.HTTPError as e:
            body = json.loads(e.read() or b"{}")
        assert body.get("status") == "success", f"GET {url}: {body}"
        return body["data"]

    def query(self, expr: str) -> list[dict]:
        """An instant query's vector: [{"metric": {...}, "value": [t, "v"]}, ...]."""
        data = self.api("query", query=expr)
        if data["resultType"] == "scalar":
            return [{"metric": {}, "value": data["result"]}]
        assert data["resultType"] == "vector", f"{expr}: {data}"
        return data["result"]

    def value(self, expr: str) -> float | None:
        """The value of a query that yields one element; None when it yields none."""
        result = self.query(expr)
        assert len(result) <= 1, f"{expr} gave {len(result)} series: {result}"
        return float(result[0]["value"][1]) if result else None

    def by_node(self, expr: str) -> dict[str, float]:
        return {r["metric"].get("node", "?"): float(r["value"][1]) for r in self.query(expr)}

    def alerts(self) -> list[dict]:
        return self.api("alerts")["alerts"]

    def rules(self) -> list[dict]:
        return [rule for group in self.api("rules")["groups"] for rule in group["rules"]]


def scrape_config(nodes, rules_path: Path) -> str:
    """The shipped prometheus.yml with the test's intervals, the test nodes for
    the `make run` targets (same order: n1, n2, n3) and the rules' absolute path."""
    text = SCRAPE_CONFIG.read_text()
    subs = [("scrape_interval: 15s", "scrape_interval: 1s"),
            ("evaluation_interval: 15s", "evaluation_interval: 1s"),
            ("scrape_timeout: 5s", "scrape_timeout: 1s"),
            ("  - lmcc-alerts.yml", f"  - {json.dumps(str(rules_path))}")]
    subs += [(f'"127.0.0.1:{9000 + 10 * i}"', f'"127.0.0.1:{n.http_port}"')
             for i, n in enumerate(nodes)]
    for old, new in subs:
        assert text.count(old) == 1, (f"{SCRAPE_CONFIG} no longer holds {old!r} exactly once: "
                                      "update scrape_config() in this test")
        text = text.replace(old, new)
    return text


# -- the cluster, its workers and Prometheus ----------------------------------------------------


@dataclass
class Stack:
    cluster: Cluster
    workers: list[FakeWorker]
    prompts: list[list[int]]
    prom: Prometheus
    entries: int        # (key, worker) pairs the workers hold: /controller/key-stats' total
    distinct_keys: int  # keys held by any worker
    lookups: int = 0    # POST /lookup calls made so far
    p2p_lookups: int = 0

    def lookup_everywhere(self) -> None:
        for node in self.cluster.nodes:
            for prompt in self.prompts:
                node.lookup(prompt)
                self.lookups += 1

    def p2p_everywhere(self) -> None:
        for w in self.workers:
            w.p2p_lookup(chunk_hashes(self.prompts[0]))
            self.p2p_lookups += 1


def start_workers(cluster: Cluster, rng: random.Random) -> tuple[list[FakeWorker], list[list[int]]]:
    """Four workers (instance a with ranks 0 and 1, b, c), spread over the
    nodes; prompts shared between workers, so that one key has several
    holders (entries > distinct keys), and keys of their own."""
    nodes = cluster.nodes
    ids = [("prom-a", 0), ("prom-a", 1), ("prom-b", 0), ("prom-c", 0)]
    workers = []
    try:
        for i, (instance, rank) in enumerate(ids):
            w = FakeWorker(nodes[i % len(nodes)], instance, rank, ip=unique_ip())
            workers.append(w)
            w.register()
    except BaseException:
        for w in workers:
            w.close()
        raise
    prompts = [[rng.randrange(1, 1 << 30) for _ in range(256 * 8)] for _ in range(5)]
    held = {0: (0, 1), 1: (1, 2), 2: (3,), 3: (3, 4)}
    for i, w in enumerate(workers):
        for p in held[i]:
            w.admit_tokens(prompts[p])
        w.admit([rng.randrange(1, 1 << 62) for _ in range(100)])
    return workers, prompts


_running: list["Stack"] = []


def failure_logs() -> list[tuple[str, str]]:
    """Report sections for a failing test (failure_logs.py): the log tails of
    the lmcc nodes still running and of Prometheus."""
    out = []
    for s in _running:
        out += [(f"lmcc node log {n.http_url}", n.log_tail(120))
                for n in s.cluster.nodes if n.alive()]
        out.append(("prometheus log", s.prom.log_tail(60)))
    return out


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    require_prometheus()
    tmp = tmp_path_factory.mktemp("prometheus")
    cluster = Cluster(tmp / "cluster").start()
    workers: list[FakeWorker] = []
    prom = None
    try:
        workers, prompts = start_workers(cluster, random.Random(42))
        entries = sum(w.key_count() for w in workers)
        distinct = len(set().union(*(w.keys[LOCATION] for w in workers)))
        prom = Prometheus(tmp / "prom", scrape_config(cluster.nodes, RULES)).start()
        s = Stack(cluster, workers, prompts, prom, entries, distinct)
        await_equal(lambda: prom.value('sum(up{job="lmcc"})'), float(len(cluster.nodes)),
                    "Prometheus scraped every node")
        # Every lookup series exists before Prometheus' first scrape of the
        # test's traffic, so that rate() over it sees that traffic.
        s.lookup_everywhere()
        s.p2p_everywhere()
        _running.append(s)
        yield s
    finally:
        _running.clear()
        for w in workers:
            w.close()
        if prom is not None:
            prom.stop()
        cluster.stop()


# -- promtool on what ships ------------------------------------------------------------------


def test_promtool_accepts_the_shipped_config_and_rules():
    require_prometheus()
    config = subprocess.run([PROMTOOL, "check", "config", str(SCRAPE_CONFIG)],
                            capture_output=True, text=True, timeout=60)
    out = config.stdout + config.stderr
    assert config.returncode == 0, out
    # The rule file is found relative to prometheus.yml and checked with it.
    assert "SUCCESS: 1 rule files found" in out, out

    rules = subprocess.run([PROMTOOL, "check", "rules", str(RULES)],
                           capture_output=True, text=True, timeout=60)
    out = rules.stdout + rules.stderr
    assert rules.returncode == 0, out
    found = re.search(r"SUCCESS: (\d+) rules found", out)
    assert found and int(found.group(1)) >= len(ASKED_ALERTS), out


# -- Prometheus scraping the cluster ----------------------------------------------------------


def test_prometheus_scrapes_every_node_under_its_id(stack):
    prom, nodes = stack.prom, stack.cluster.nodes
    want = {f"127.0.0.1:{n.http_port}": node_id for n, node_id in zip(nodes, stack.cluster.ids)}

    def targets():
        return {r["metric"]["instance"]: (r["metric"].get("node"), r["value"][1])
                for r in prom.query('up{job="lmcc"}')}

    await_equal(targets, {inst: (node_id, "1") for inst, node_id in want.items()},
                "every node scraped (up == 1) with its `node` label")
    # What the dashboard's node variable lists.
    assert sorted(prom.api("label/node/values", **{"match[]": 'up{job="lmcc"}'})) == \
        sorted(stack.cluster.ids)


def test_sum_over_the_nodes_of_the_lmcache_gauges_equals_the_cluster(stack):
    prom, nodes = stack.prom, stack.cluster.nodes
    n_workers = len(stack.workers)

    # The cluster's own figures, as every node reports them.
    def key_stats():
        return [(s["total_key_count"], s["total_worker_count"])
                for s in (n.get("/controller/key-stats").json() for n in nodes)]

    await_equal(key_stats, [(stack.entries, n_workers)] * len(nodes),
                "/controller/key-stats on every node == the workers' entries and count")
    for n in nodes:
        assert len(n.workers()) == n_workers

    # Keys: each node counts the entries of the slots it is the primary of.
    keys = 'lmcache:cache_controller_kv_pool_keys_count{job="lmcc"}'
    await_equal(lambda: prom.value(f"sum({keys})"), float(stack.entries),
                f"sum({keys}) == total_key_count")
    per_node = prom.by_node(keys)
    assert sorted(per_node) == sorted(stack.cluster.ids), per_node
    assert all(0 < v < stack.entries for v in per_node.values()), (
        f"each node should hold a share of the {stack.entries} entries: {per_node}")

    # Workers: the replicated Directory, the same on every node.
    workers = 'lmcache:cache_controller_registered_workers_count{job="lmcc"}'
    await_equal(lambda: (prom.value(f"max({workers})"), prom.value(f"min({workers})"),
                         prom.value(f"sum({workers})")),
                (float(n_workers), float(n_workers), float(n_workers * len(nodes))),
                f"max() == min() == total_worker_count, sum() == nodes x it ({workers})")

    # Every copy: each node's distinct keys, primary and replica.
    replicas = nodes[0].get("/cluster/status").json()["replicas"]
    await_equal(lambda: prom.value('sum(lmcc_index_keys{job="lmcc"})'),
                float(replicas * stack.distinct_keys),
                f"sum(lmcc_index_keys) == {replicas} x the distinct keys")


def test_histogram_quantile_gives_plausible_lookup_latencies(stack):
    prom = stack.prom
    lookups = 'lmcc_request_duration_seconds_count{job="lmcc", op="http /lookup"}'
    p2p = 'lmcc_request_duration_seconds_count{job="lmcc", op="BatchedP2PLookupMsg"}'
    # Prometheus holds the series from before the traffic below (the fixture's lookups).
    await_equal(lambda: (prom.value(f"sum({lookups})"), prom.value(f"sum({p2p})")),
                (float(stack.lookups), float(stack.p2p_lookups)),
                "the fixture's lookups scraped")
    for _ in range(10):
        stack.lookup_everywhere()
        stack.p2p_everywhere()
    # Every observation reaches Prometheus, counted exactly.
    await_equal(lambda: (prom.value(f"sum({lookups})"), prom.value(f"sum({p2p})")),
                (float(stack.lookups), float(stack.p2p_lookups)),
                "sum of the lookup histograms' _count == the lookups made")

    for op in ("http /lookup", "BatchedP2PLookupMsg"):
        rate = (f'sum by (le) (rate(lmcc_request_duration_seconds_bucket'
                f'{{job="lmcc", op="{op}"}}[30s]))')
        p50 = prom.value(f"histogram_quantile(0.5, {rate})")
        p99 = prom.value(f"histogram_quantile(0.99, {rate})")
        assert p50 is not None and p99 is not None, (op, p50, p99)
        assert math.isfinite(p50) and math.isfinite(p99), (op, p50, p99)
        assert 0 < p50 <= p99 < 1.0, f"{op}: p50 {p50} s, p99 {p99} s"


def test_the_shipped_rules_load_evaluate_and_stay_quiet_on_a_healthy_cluster(stack):
    prom = stack.prom

    def evaluated():
        rules = prom.rules()
        return rules if rules and all(
            r["health"] == "ok" and not r["lastEvaluation"].startswith("0001-")
            for r in rules) else None

    rules = wait_until(evaluated, timeout=15, interval=0.2,
                       message="every shipped rule evaluated with health ok")
    names = {r["name"] for r in rules}
    assert ASKED_ALERTS <= names, f"missing alerts: {ASKED_ALERTS - names}"
    assert all(r["type"] == "alerting" for r in rules)
    # A healthy cluster raises nothing (not even pending).
    assert prom.alerts() == [], prom.alerts()

    # Each rule can fire: with its comparisons made `bool` (0 or 1 instead of
    # a filter) its query matches live series, one per node or one for the
    # cluster, so no selector or vector match leaves it empty for ever. Full
    # syncs asked is the exception: its events exist only once one was asked.
    ids = set(stack.cluster.ids)
    for rule in rules:
        probe = as_bool(rule["query"])
        nodes = sorted(r["metric"].get("node", "") for r in prom.query(probe))
        if rule["name"] == "LmccFullSyncsAsked":
            assert set(nodes) <= ids, (probe, nodes)
        else:
            assert nodes in (sorted(ids), [""]), f"{rule['name']}: {probe} gave {nodes}"


def test_every_metric_the_rules_and_the_dashboard_name_exists(stack):
    prom, nodes = stack.prom, stack.cluster.nodes
    # The extractor on a known expression first.
    assert metric_names('sum by (le) (rate(a_bucket{op="x", job=~"$j"}[5m])) > 0.9 * b:c '
                        'and on (instance) (up == 0) or vector(1e3) + last_over_time(d[1d])') \
        == {"a_bucket", "b:c", "up", "d"}
    assert metric_names('label_values(up{job="lmcc"}, node)') == {"up"}
    assert as_bool('a{x!="1"} > 0 or b >= bool 2 and c == 0') == \
        'a{x!="1"} > bool 0 or b >= bool 2 and c == bool 0'

    rule_exprs = {r["name"]: r["query"] for r in prom.rules()}
    dashboard = json.loads(DASHBOARD.read_text())
    dash_exprs = dashboard_queries(dashboard)
    assert len(dash_exprs) >= 20, dash_exprs
    used: dict[str, set[str]] = {}
    for where, expr in [*rule_exprs.items(), *(("dashboard", e) for e in dash_exprs)]:
        for name in metric_names(expr):
            used.setdefault(name, set()).add(where)

    # `up` is Prometheus' own series for each target; the rest must be on /metrics.
    assert prom.value('count(up{job="lmcc"})') == float(len(nodes))
    exported = [exposition_names(n.get("/metrics").text) for n in nodes]
    missing = {name: sorted(where) for name, where in used.items()
               if name != "up" and not all(name in e for e in exported)}
    assert not missing, f"metrics named but not exported by every node: {missing}"
    assert len(used) >= 20, sorted(used)

    # Label values: every op the queries name is observed by the nodes (after
    # the fixture's lookups); every event is one the sources count.
    all_exprs = [*rule_exprs.values(), *dash_exprs]
    ops_exported = set()
    for n in nodes:
        ops_exported |= set(re.findall(r'lmcc_request_duration_seconds_count\{op="([^"]+)"',
                                       n.get("/metrics").text))
    for expr in all_exprs:
        for op, value in label_matchers(expr, "op"):
            assert op == "=" and value in ops_exported, (expr, value, sorted(ops_exported))
    literals = set()
    for folder in ("cluster", "index", "registry", "actors", "apps/lmcc", "gateway"):
        for path in (REPO / folder).rglob("*.[ch]pp"):
            literals |= set(re.findall(r'"([a-z0-9_]+)"', path.read_text(errors="replace")))
    for expr in all_exprs:
        for op, value in label_matchers(expr, "event"):
            for alternative in value.split("|"):
                prefix = re.split(r"[.*+?()\[\]]", alternative)[0] if op == "=~" else alternative
                assert any(lit == prefix or (op == "=~" and lit.startswith(prefix))
                           for lit in literals), f"event {alternative!r} in {expr!r}: no such event"

    # Every dashboard query runs in Prometheus once Grafana filled in its variables.
    for expr in dash_exprs:
        if expr.startswith("label_values("):
            continue
        prom.api("query", query=grafana_to_promql(expr))


def test_a_killed_node_raises_node_down_under_replicated_and_peer_alerts(stack):
    """Last: it kills n3 (kill -9)."""
    prom = stack.prom
    n1, n2, n3 = stack.cluster.nodes
    status = n3.get("/cluster/status").json()
    assert status["node"] == "n3"
    copies = status["slots_primary"] + status["slots_replica"]
    n3.kill()

    def raised():
        out = {}
        for a in prom.alerts():
            if a["state"] not in ("pending", "firing"):
                continue
            labels = a["labels"]
            out[(labels["alertname"], labels.get("node"))] = float(a["value"])
        return out

    want = {("LmccNodeDown", "n3"), ("LmccSlotsUnderReplicated", None),
            ("LmccPeerUnreachable", "n1"), ("LmccPeerUnreachable", "n2")}
    seen = await_value(raised, lambda r: want <= set(r), timeout=20,
                       message=f"alerts {sorted(want, key=str)} pending or firing")
    # The value: n3's slot copies (primary and replica), each now one copy short.
    assert seen[("LmccSlotsUnderReplicated", None)] == float(copies), (seen, copies)
    assert seen[("LmccNodeDown", "n3")] == 0.0
    # n1 and n2 each see two of three members live.
    assert seen[("LmccPeerUnreachable", "n1")] == 2.0
    assert seen[("LmccPeerUnreachable", "n2")] == 2.0
