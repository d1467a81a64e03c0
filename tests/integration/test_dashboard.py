"""The live dashboard (docs/dashboard.md) in a real browser: three nodes and two
fake workers, GET /dashboard on n1 opened in headless Chromium (Debian's
`chromium`, driven over its DevTools protocol with python3-websocket), the DOM
checked against the nodes' own endpoints (three node rows, the key count equal
to /controller/key-stats' total, both workers), then n3 killed with SIGKILL and
the page seen to mark it down within 3 s. Screenshots of the healthy and the
degraded page are saved beside the lmcc binary under test (build/).
"""

from __future__ import annotations

import base64
import json
import random
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

from conftest import BINARY, wait_until
from lmcc_cluster import Cluster
from lmcc_worker import FakeWorker
from fresh_workers import two_fresh_workers

CHROMIUM = shutil.which("chromium")
SCREENSHOT = BINARY.parent / "dashboard.png"
SCREENSHOT_HEALTHY = BINARY.parent / "dashboard-healthy.png"
# How quickly the page must show a killed node as down (issue 42).
DOWN_WITHIN_S = 3.0

# What the test reads of the page: the verdict, the node rows, the tiles.
PAGE_STATE = """JSON.stringify({
  polls: Number(document.body.dataset.polls),
  verdict: document.querySelector('#verdict').dataset.verdict,
  reasons: [...document.querySelectorAll('#verdict li')].map(e => e.textContent),
  nodes: [...document.querySelectorAll('#nodes tbody tr')].map(r => [r.dataset.node, r.dataset.live]),
  keys: document.querySelector('#keys-total').textContent,
  workers: [...document.querySelectorAll('#workers tbody tr[data-instance]')]
             .map(r => [...r.cells].map(c => c.textContent)),
  rates: Object.fromEntries([...document.querySelectorAll('#rates tbody tr')]
             .map(r => [r.dataset.rate, [...r.cells].slice(1, 4).map(c => c.textContent)])),
  events: [...document.querySelectorAll('#events li')].map(e => e.textContent),
})"""


class Browser:
    """Headless Chromium with one page, driven over the DevTools protocol."""

    def __init__(self, width: int = 1400, height: int = 1000):
        import websocket  # python3-websocket (deploy/install-deps.sh)

        self.profile = Path(tempfile.mkdtemp(prefix="lmcc-chromium-"))
        self.proc = subprocess.Popen(
            [CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-extensions", "--disable-background-networking", "--mute-audio",
             f"--user-data-dir={self.profile}", "--remote-debugging-port=0",
             "--remote-allow-origins=*", f"--window-size={width},{height}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            port_file = self.profile / "DevToolsActivePort"
            wait_until(lambda: port_file.exists() and port_file.read_text().strip(), timeout=15,
                       message="chromium's DevToolsActivePort")
            port = int(port_file.read_text().split()[0])
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=5) as r:
                page = next(t for t in json.load(r) if t["type"] == "page")
            self.ws = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=10,
                                                  suppress_origin=True)
        except BaseException:
            self.close()
            raise
        self.next_id = 0
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})

    def call(self, method: str, params: dict | None = None) -> dict:
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params or {}}))
        while True:  # events arrive interleaved with answers; only the answer matters here
            msg = json.loads(self.ws.recv())
            if msg.get("id") == self.next_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg["result"]

    def open(self, url: str) -> None:
        self.call("Page.navigate", {"url": url})

    def evaluate(self, expression: str):
        out = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in out:
            raise RuntimeError(f"page script failed: {out['exceptionDetails']}")
        return out["result"].get("value")

    def state(self) -> dict:
        try:
            return json.loads(self.evaluate(PAGE_STATE))
        except RuntimeError:  # the page is not loaded yet
            return {}

    def screenshot(self, path: Path) -> Path:
        png = self.call("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True})
        path.write_bytes(base64.b64decode(png["data"]))
        return path

    def close(self) -> None:
        if getattr(self, "ws", None) is not None:
            self.ws.close()
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.profile, ignore_errors=True)


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (deploy/install-deps.sh)")
def test_dashboard_shows_the_cluster_and_a_killed_node(tmp_path):
    rng = random.Random(42)
    cluster = Cluster(tmp_path / "cluster").start()
    workers: list[FakeWorker] = []
    browser = None
    try:
        n1, n2, n3 = cluster.nodes
        workers += two_fresh_workers(n1, n2, rng)
        wait_until(lambda: n1.get("/controller/key-stats").json()["total_key_count"] == 50,
                   message="50 keys in the cluster")
        total = n1.get("/controller/key-stats").json()["total_key_count"]

        page = n1.get("/dashboard")
        assert page.status == 200 and page.content_type.startswith("text/html"), page
        assert "<script>" in page.text and "http://" not in page.text.split("<script>")[1]

        browser = Browser()
        browser.open(f"{n1.http_url}/dashboard")

        def healthy():
            s = browser.state()
            return s if (s.get("polls", 0) >= 3 and s["verdict"] == "healthy"
                         and s["nodes"] == [["n1", "up"], ["n2", "up"], ["n3", "up"]]
                         and s["keys"].replace(",", "") == str(total)
                         and len(s["workers"]) == 2) else None

        s = wait_until(healthy, timeout=10, interval=0.1, message="the page shows a healthy cluster")
        # instance, rank, keys, full sync, home
        assert [[w[0], w[1], w[3], w[5], w[6]] for w in s["workers"]] == [
            ["vllm-a", "0", "30", "owed (controller_restart)", "n1"],
            ["vllm-b", "1", "20", "owed (controller_restart)", "n2"]], s["workers"]
        assert any("worker vllm-a rank 0 owes a full sync (controller_restart)" in e
                   for e in s["events"]), s["events"]
        assert s["reasons"] == [], s
        # Rates from /metrics between two polls: the page's own HTTP polls are timed.
        assert s["rates"]["HTTP requests"][0] not in ("–", "0.0"), s["rates"]
        assert s["rates"]["HTTP requests"][1] != "–", s["rates"]
        assert any(e.startswith(tuple("0123456789")) and "watching n1" in e for e in s["events"])
        browser.screenshot(SCREENSHOT_HEALTHY)

        # -- kill -9 of n3: the page marks it down within 3 s
        killed = time.monotonic()
        n3.kill()

        def n3_down():
            s = browser.state()
            return s if dict(map(tuple, s.get("nodes", []))).get("n3") == "down" else None

        s = wait_until(n3_down, timeout=DOWN_WITHIN_S, interval=0.05,
                       message=f"the page marks n3 down within {DOWN_WITHIN_S} s")
        seen_after = time.monotonic() - killed
        print(f"dashboard marked n3 down {seen_after:.2f} s after kill -9")
        assert s["verdict"] == "degraded" and "n3 is down as n1 sees it" in s["reasons"], s
        assert any("n3 is DOWN" in e for e in s["events"]), s["events"]
        assert [n for n in s["nodes"] if n[0] != "n3"] == [["n1", "up"], ["n2", "up"]]

        # The slots n3 held are short of a copy until a membership change.
        s = wait_until(lambda: (lambda s: s if any("slots have fewer than 2 live copies" in r
                                                   for r in s["reasons"]) else None)(browser.state()),
                       timeout=5, interval=0.1, message="under-replicated slots on the page")
        print(f"dashboard screenshots: {SCREENSHOT_HEALTHY} (healthy), "
              f"{browser.screenshot(SCREENSHOT)} (n3 killed)")
    finally:
        if browser is not None:
            browser.close()
        for w in workers:
            w.close()
        cluster.stop()
