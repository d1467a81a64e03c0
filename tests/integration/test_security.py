"""The HTTP API's token and HTTPS (gateway/http_access.hpp, docs/operations.md
"Securing the API"): calls that change state need the bearer token when one is
configured (401 without, 403 with the wrong one, nothing changed either way);
LMCache's read path stays open unless the operator closes it; probes always
answer; HTTPS refuses a plain-text client and keeps serving. Between nodes
(docs/security.md "Between nodes"): mutual TLS on every channel, a node of
another CA or without TLS refused, logged and counted."""

import http.client
import os
import signal
import socket
import subprocess
import time

import pytest

from conftest import BINARY, unique, unique_ip, wait_until
from lmcc_worker import LOCATION

TOKEN = "s3cret-token-for-the-api-0123456789"


@pytest.fixture
def tokened(node_factory):
    return node_factory(env={"LMCC_API_TOKEN": TOKEN})


def registered(node, make_worker, n=1):
    inst = unique("sec")
    ws = [make_worker(node, inst, i) for i in range(n)]
    for w in ws:
        w.register()
    return ws


def test_a_change_without_the_token_is_refused_and_changes_nothing(tokened, make_worker):
    [w] = registered(tokened, make_worker)
    body = {"instance_id": w.instance_id, "location": LOCATION}
    missing = tokened.post("/clear", body)
    assert missing.status == 401, missing
    assert "Bearer" in missing.json()["detail"]
    wrong = tokened.post("/clear", body, token="not-the-token-at-all-xx")
    assert wrong.status == 403, wrong
    assert w.control.requests("ClearWorkerMsg") == []  # nothing reached the worker
    for path, payload in (("/pin", {"instance_id": w.instance_id, "location": LOCATION,
                                     "tokens": [1, 2]}),
                          ("/cluster/members", {"members": ["n1"]}),
                          ("/admin/snapshot", {"dir": "/tmp/never"}),
                          ("/admin/faults", {"fail_commits": 1})):
        assert tokened.post(path, payload).status == 401, path
    assert tokened.event_count("http_token_missing") >= 5
    assert tokened.event_count("http_token_wrong") >= 1
    ok = tokened.post("/clear", body, token=TOKEN)
    assert ok.status == 200, ok
    wait_until(lambda: len(w.control.requests("ClearWorkerMsg")) == 1,
               message="the worker got the clear sent with the token")
    assert "http-access-refused path=/clear" in tokened.log_text()
    assert TOKEN not in tokened.log_text()


def test_lmcache_reads_and_probes_stay_open_by_default(tokened, make_worker):
    registered(tokened, make_worker)
    assert tokened.post("/lookup", {"tokens": list(range(512))}).status == 200
    for path in ("/metrics", "/controller/workers", "/controller/key-stats", "/healthz",
                 "/readyz"):
        assert tokened.get(path).status == 200, path


def test_reads_can_be_closed_too_but_probes_stay_open(node_factory, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")  # a trailing newline is trimmed
    node = node_factory("--api-token-file", str(token_file), "--api-token-for-reads", "on")
    assert node.post("/lookup", {"tokens": [1, 2, 3]}).status == 401
    assert node.get("/metrics").status == 401
    assert node.get("/metrics", token=TOKEN).status == 200
    assert node.post("/lookup", {"tokens": [1, 2, 3]}, token=TOKEN).status == 200
    assert node.get("/healthz").status == 200
    assert node.get("/readyz").status == 200


@pytest.mark.parametrize("setting,message", [
    ({"env": {"LMCC_API_TOKEN": "short"}}, "at least 16 are required"),
    ({"args": ("--api-token-file", "/nonexistent/token")}, "cannot read the API token file"),
    ({"args": ("--http-tls-cert-file", "/nonexistent/cert.pem")},
     "lmcc_http_tls_cert_file and lmcc_http_tls_key_file: set both or neither"),
])
def test_a_bad_security_setting_stops_the_node_with_a_clear_error(node_factory, setting, message):
    node = node_factory(*setting.get("args", ()), env=setting.get("env"), expect_ready=False)
    assert node.returncode not in (None, 0)
    assert message in node.log_text()


@pytest.fixture(scope="module")
def certificates(tmp_path_factory):
    """A CA, a server certificate for 127.0.0.1 signed by it, and its key."""
    d = tmp_path_factory.mktemp("tls")

    def run(*args):
        subprocess.run(["openssl", *args], check=True, cwd=d, capture_output=True)

    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
        "-days", "2", "-subj", "/CN=lmcc test CA")
    run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "node.key", "-out", "node.csr",
        "-subj", "/CN=127.0.0.1")
    (d / "ext.cnf").write_text("subjectAltName=IP:127.0.0.1\n")
    run("x509", "-req", "-in", "node.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-out", "node.pem", "-days", "2", "-extfile", "ext.cnf")
    return d


def test_https_serves_the_api_and_refuses_plain_text(node_factory, make_worker, certificates):
    node = node_factory("--http-tls-cert-file", str(certificates / "node.pem"),
                        "--http-tls-key-file", str(certificates / "node.key"),
                        tls_ca=certificates / "ca.pem")
    assert node.http_url.startswith("https://")
    registered(node, make_worker)
    assert node.post("/lookup", {"tokens": list(range(256))}).status == 200
    # A plain-text client on the TLS port gets no HTTP answer.
    plain = http.client.HTTPConnection("127.0.0.1", node.http_port, timeout=5)
    with pytest.raises((http.client.HTTPException, ConnectionError, socket.timeout)):
        plain.request("GET", "/healthz")
        plain.getresponse()
    plain.close()
    assert node.alive()
    assert node.get("/healthz").status == 200  # and HTTPS goes on
    assert "tls=true" in node.log_text()


def secured_node(node_factory, certificates, tmp_path):
    """A node serving HTTPS whose every read and change needs the token (from
    a file): (the token file, the node)."""
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    node = node_factory("--http-tls-cert-file", str(certificates / "node.pem"),
                        "--http-tls-key-file", str(certificates / "node.key"),
                        "--api-token-file", str(token_file), "--api-token-for-reads", "on",
                        tls_ca=certificates / "ca.pem", token=TOKEN)
    return token_file, node


def test_the_lmcc_client_speaks_https_and_bears_the_token(node_factory, make_worker, certificates,
                                                          tmp_path):
    """`lmcc lookup` against a node serving HTTPS with reads closed: refused
    without the token, answered with --token-file (or $LMCC_API_TOKEN) and
    --ca-file; a certificate from another CA is refused."""
    token_file, node = secured_node(node_factory, certificates, tmp_path)
    registered(node, make_worker)
    prompt = tmp_path / "prompt.json"
    prompt.write_text("[1, 2, 3]")
    endpoint = f"127.0.0.1:{node.http_port}"

    def lookup(*flags, env=None):
        return subprocess.run([str(BINARY), "lookup", str(prompt), "--endpoints", endpoint,
                               "--output", "json", *flags], capture_output=True, text=True,
                              timeout=30, env=env)

    no_token = lookup("--ca-file", str(certificates / "ca.pem"), env={})
    assert no_token.returncode != 0 and "HTTP 401" in no_token.stderr, no_token.stderr
    with_file = lookup("--ca-file", str(certificates / "ca.pem"), "--token-file", str(token_file),
                       env={})
    # Answered (exit 1: no instance holds this prompt; 0 would be a hit).
    assert with_file.returncode == 1 and '"layout_info": {}' in with_file.stdout, with_file.stderr
    with_env = lookup("--ca-file", str(certificates / "ca.pem"), env={"LMCC_API_TOKEN": TOKEN})
    assert with_env.returncode == 1 and "layout_info" in with_env.stdout, with_env.stderr
    other_ca = lookup("--ca-file", str(certificates / "node.pem"), env={"LMCC_API_TOKEN": TOKEN})
    assert other_ca.returncode == 2, other_ca.stdout  # not signed by that "CA": no answer
    plain = lookup(env={"LMCC_API_TOKEN": TOKEN})
    assert plain.returncode == 2, plain.stdout


def test_lmcc_bench_runs_against_https_with_the_token(node_factory, certificates, tmp_path):
    """lmcc-bench keeps its HTTPS connection open between reads; the node
    closes idle ones, and the bench's next write met a reset connection
    (SIGPIPE, exit 141) before it ignored the signal."""
    token_file, node = secured_node(node_factory, certificates, tmp_path)
    bench = BINARY.parent / "lmcc-bench"
    r = subprocess.run([str(bench), "lookup", "--pull", node.pull_url, "--reply", node.reply_url,
                        "--http", f"127.0.0.1:{node.http_port}",
                        "--http-ca-file", str(certificates / "ca.pem"),
                        "--api-token-file", str(token_file), "--duration", "2"],
                       capture_output=True, text=True, timeout=120, env={})
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "RESULT: PASS" in r.stdout


# -- mutual TLS between nodes ---------------------------------------------------------------


class ClusterPki:
    """CAs made with the openssl command: `ours`, the cluster's, with a
    certificate per node id; `theirs`, another CA, with certificates for
    strangers. issue(ca, node_id) -> (cert, key)."""

    def __init__(self, d):
        self.d = d
        for ca in ("ours", "theirs"):
            self.run("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                     "-nodes", "-keyout", f"{ca}-ca.key", "-out", f"{ca}-ca.pem", "-days", "2",
                     "-subj", f"/CN=lmcc {ca} test CA")

    def run(self, *args):
        subprocess.run(["openssl", *args], check=True, cwd=self.d, capture_output=True)

    def ca(self, ca):
        return self.d / f"{ca}-ca.pem"

    def issue(self, ca, node_id):
        name = f"{ca}-{node_id}"
        self.run("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                 "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={node_id}")
        (self.d / f"{name}.cnf").write_text(
            "basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth,clientAuth\n"
            f"subjectAltName=DNS:{node_id},IP:127.0.0.1\n")
        self.run("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}-ca.pem", "-CAkey",
                 f"{ca}-ca.key", "-CAcreateserial", "-out", f"{name}.pem", "-days", "2",
                 "-extfile", f"{name}.cnf")
        return self.d / f"{name}.pem", self.d / f"{name}.key"

    def args(self, node_id, ca="ours", trust=("ours",)):
        """A node's lmcc_cluster_tls_* flags: a certificate of `ca`, trusting `trust`."""
        cert, key = self.issue(ca, node_id)
        bundle = self.d / f"trust-{'-'.join(trust)}.pem"
        bundle.write_text("".join(self.ca(c).read_text() for c in trust))
        return ("--cluster-tls-ca-file", str(bundle), "--cluster-tls-cert-file", str(cert),
                "--cluster-tls-key-file", str(key))


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return ClusterPki(tmp_path_factory.mktemp("cluster-tls"))


def established_to(port):
    """Established TCP connections whose local end is `port` (loopback, IPv4)."""
    n = 0
    for line in open("/proc/net/tcp").read().splitlines()[1:]:
        fields = line.split()
        if fields[3] == "01" and int(fields[1].split(":")[1], 16) == port:
            n += 1
    return n


def tls_status(node):
    return node.get("/cluster/status").json()["tls"]


def test_a_cluster_with_mutual_tls_forms_and_answers_lookups_through_any_node(tmp_path, pki):
    """Three nodes with certificates of one CA: the cluster forms with one
    connection per pair (the lower id dials), stays formed, and a lookup
    through any node reads the slots it does not hold from the others over
    TLS (peer reads), answering the whole prefix."""
    from lmcc_cluster import Cluster
    from lmcc_worker import FakeWorker

    cluster = Cluster(tmp_path / "cluster")
    for node, node_id in zip(cluster.nodes, cluster.ids):
        node.extra_args += pki.args(node_id)
    cluster.start()
    try:
        for node in cluster.nodes:
            assert "cluster-listening" in node.log_text() and "tls=true" in node.log_text()
            assert tls_status(node) == {"enabled": True, "refused": 0, "refused_by_peer": 0}
        # n1 dials n2 and n3, n2 dials n3: n1's port has no peer on it, n3's two.
        for port, expected in zip(cluster.cluster_ports, (0, 1, 2)):
            wait_until(lambda: established_to(port) == expected,
                       message=f"{expected} connections on cluster port {port}")
        n1 = cluster.nodes[0]
        w = FakeWorker(n1, unique("tls"), 0, ip=unique_ip())
        try:
            w.register()
            tokens = list(range(7_000_000, 7_000_000 + 256 * 40))  # 40 chunks over many slots
            w.admit_tokens(tokens)
            whole = {w.instance_id: [LOCATION, len(tokens)]}
            for node in cluster.nodes:
                wait_until(lambda: node.lookup(tokens) == whole,
                           message=f"the whole prefix through {node.http_url}")
            # Lookups through every node for longer than CAF's connection
            # timeout (2 x the failure timeout): two connections of a pair
            # used to make BASP drop one there, and the peers with it.
            deadline = time.monotonic() + 5
            rounds = 0
            while time.monotonic() < deadline:
                for node in cluster.nodes:
                    assert node.lookup(tokens) == whole
                rounds += 1
            assert rounds > 10
        finally:
            w.close()
        for node in cluster.nodes:
            status = node.get("/cluster/status").json()
            assert status["all_live"] and status["peers_lost"] == 0, status
            assert status["peer_reads_refused"] == 0
            log = node.log_text()
            assert "cluster-peer-lost" not in log and "cluster-tls-refused" not in log
        # Every lookup above needed peers' slots: the reads went over TLS.
        assert sum(n.event_count("lookup_owner_unreachable") for n in cluster.nodes) == 0
    finally:
        cluster.stop()


def test_over_tls_a_frozen_or_restarted_node_rejoins_with_one_connection_per_pair(tmp_path, pki):
    """With one dialler per pair a node that lost a peer may not dial it back:
    n1 frozen past the failure timeout (it dials both others), then n3 (dialled
    by both) killed and restarted, and each time the cluster is whole again,
    still with one connection per pair."""
    from lmcc_cluster import Cluster

    cluster = Cluster(tmp_path / "cluster")
    for node, node_id in zip(cluster.nodes, cluster.ids):
        node.extra_args += pki.args(node_id)
    cluster.start()
    n1, n2, n3 = cluster.nodes

    def one_connection_per_pair():
        return [established_to(p) for p in cluster.cluster_ports] == [0, 1, 2]

    try:
        os.kill(n1.proc.pid, signal.SIGSTOP)
        try:
            wait_until(lambda: all(not cluster.status(n)["members"][0]["live"] for n in (n2, n3)),
                       timeout=10, message="n1 seen down")
        finally:
            os.kill(n1.proc.pid, signal.SIGCONT)
        cluster.wait_joined()
        wait_until(one_connection_per_pair, message="one connection per pair after the thaw")
        n3.kill()
        wait_until(lambda: all(not cluster.status(n)["members"][2]["live"] for n in (n1, n2)),
                   message="n3 seen down")
        n3.start(keep_ports=True)
        cluster.wait_joined()
        wait_until(one_connection_per_pair, message="one connection per pair after the restart")
        for node in cluster.nodes:
            assert "cluster-tls-refused" not in node.log_text()
    finally:
        cluster.stop()


def test_a_node_with_a_certificate_from_another_ca_is_refused_and_does_not_join(tmp_path, pki):
    """n1 (a standby, so the others form without it) shows a certificate of
    another CA; it trusts ours, so it is we who refuse it. It has the lowest
    id and dials everyone: each node refuses it as it accepts, logs the
    refusal with the certificate it showed, and counts it."""
    from lmcc_cluster import Cluster

    cluster = Cluster(tmp_path / "cluster", n=4, standby=frozenset({"n1"}))
    stranger, *good = cluster.nodes
    stranger.extra_args += pki.args("n1", ca="theirs", trust=("ours", "theirs"))
    for node, node_id in zip(good, cluster.ids[1:]):
        node.extra_args += pki.args(node_id)
    try:
        for node in good:
            node.start()
        cluster.wait_joined(good)
        stranger.start()
        for node in good:
            wait_until(lambda: tls_status(node)["refused"] >= 1,
                       message=f"{node.http_url} refused the stranger")
            assert node.event_count("cluster_tls_refused") >= 1
            line = next(l for l in node.log_text().splitlines() if "cluster-tls-refused" in l)
            assert "channel=cluster" in line and "reason=untrusted-certificate" in line, line
            assert "CN=n1" in line, line
        # It never joined: nobody sees it live, it sees nobody.
        for node in good:
            members = {m["id"]: m for m in cluster.status(node)["members"]}
            assert not members["n1"]["live"], members
            assert "peer=n1" not in " ".join(l for l in node.log_text().splitlines()
                                               if "cluster-peer-joined" in l)
        assert cluster.status(stranger)["live_members"] == 0
        assert "cluster-tls-refused-by-peer node=n1" in stranger.log_text()
    finally:
        cluster.stop()


def test_a_node_without_tls_is_refused(tmp_path, pki):
    """n4 (a standby) has no TLS settings: the TLS nodes dial it and find no
    TLS there, and it dials them in clear and is refused; nobody joins it."""
    from lmcc_cluster import Cluster

    cluster = Cluster(tmp_path / "cluster", n=4, standby=frozenset({"n4"}))
    *good, plain = cluster.nodes
    for node, node_id in zip(good, cluster.ids):
        node.extra_args += pki.args(node_id)
    try:
        for node in good:
            node.start()
        cluster.wait_joined(good)
        plain.start()
        def refusals(node):
            return [l for l in node.log_text().splitlines() if "cluster-tls-refused " in l]

        for node in good:
            # Dialled by us (once our back-off since it was down has run out):
            # named by its member id; dialling us: by its address.
            wait_until(lambda: any("peer=n4" in l for l in refusals(node)), timeout=30,
                       message=f"{node.http_url} dialled the plain node and refused it")
            wait_until(lambda: any("peer=- " in l for l in refusals(node)),
                       message=f"{node.http_url} refused the plain node dialling it")
            lines = refusals(node)
            assert all("channel=cluster" in l for l in lines), lines
            assert all("reason=not-tls" in l or "reason=closed-during-handshake" in l
                       for l in lines), lines
            # Counted as logged (it goes on dialling: at least as many by now).
            assert tls_status(node)["refused"] >= len(lines)
            assert node.event_count("cluster_tls_refused") >= len(lines)
            members = {m["id"]: m for m in cluster.status(node)["members"]}
            assert not members["n4"]["live"], members
        assert cluster.status(plain)["live_members"] == 0
    finally:
        cluster.stop()


@pytest.mark.parametrize("args,message", [
    (("--cluster-tls-ca-file", "/nonexistent/ca.pem"),
     "lmcc_cluster_tls_ca_file, lmcc_cluster_tls_cert_file and lmcc_cluster_tls_key_file: "
     "set all three or none"),
])
def test_half_a_tls_setting_between_nodes_stops_the_node(node_factory, args, message):
    node = node_factory(*args, expect_ready=False)
    assert node.returncode not in (None, 0)
    assert message in node.log_text()
