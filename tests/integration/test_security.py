"""The HTTP API's token and HTTPS (gateway/http_access.hpp, docs/operations.md
"Securing the API"): calls that change state need the bearer token when one is
configured (401 without, 403 with the wrong one, nothing changed either way);
LMCache's read path stays open unless the operator closes it; probes always
answer; HTTPS refuses a plain-text client and keeps serving."""

import http.client
import socket
import subprocess

import pytest

from conftest import BINARY, unique, wait_until
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
