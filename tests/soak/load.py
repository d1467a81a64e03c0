"""The soak's load: one `lmcc-bench soak` process (apps/lmcc-bench/
scenario_soak.cpp) whose LMCache-protocol workers push to the cluster, and
the harness's side of its stdin/stdout protocol (soak_control.hpp).

Why lmcc-bench and not the Python fake workers of the integration suite:
at 20 k ops/s and millions of live keys a Python worker costs a core of its
own and keeps every key in a set (~100 B a key, 300 MB at 3 M), and the chaos
runner's twin doubles that against a reference node. lmcc-bench's workers
keep their ground truth as a range: worker w holds key(w, i) for lo <= i < hi
(evicts take the oldest key, admits the next index) plus its prompts, so the
truth is exact at any size and costs nothing, and the end check
(soak_verify.hpp) asks every node about every live key.

    load = Load(binary, nodes, out_dir, rate=20000, live_keys=3_000_000, ...)
    load.start()                       # returns once the workers registered
    load.command("restart 3")          # a worker fault; waits for the ack
    load.status                        # the last status line (a dict)
    verdict = load.stop(timeout)       # stop, converge, exact check
"""
from __future__ import annotations

import json
import subprocess
import threading
from pathlib import Path


class Load:
    def __init__(self, binary: Path, nodes: list, out: Path, *, rate: float, live_keys: int,
                 workers: int, prompts: int, prompt_chunks: int, converge_s: float,
                 max_seconds: float, seed: int, status_interval: float = 5.0):
        self.out = out
        self.corpus_path = out / "corpus.json"
        endpoints = ",".join(f"127.0.0.1:{n.pull_port}/{n.reply_port}/{n.http_port}"
                             for n in nodes)
        self.args = [str(binary), "soak", "--nodes", endpoints, "--workers", str(workers),
                     "--tp", "1", "--instance-prefix", "soak", "--rate", str(rate),
                     "--live-keys", str(live_keys), "--prompts", str(prompts),
                     "--prompt-chunks", str(prompt_chunks), "--heartbeat-interval", "1",
                     "--full-sync-on-request", "--settle-timeout", str(converge_s),
                     "--duration", str(max_seconds), "--seed", str(seed),
                     "--status-interval", str(status_interval), "--corpus",
                     str(self.corpus_path), "--json", str(out / "load-report.json")]
        self.proc: subprocess.Popen | None = None
        self.status: dict = {}
        self.syncs: list[dict] = []
        self.verdict: dict | None = None
        self.ready: dict | None = None
        self.lines: list[str] = []  # what was not a JSON line (the report table)
        self._acks = 0
        self._cond = threading.Condition()
        self._reader: threading.Thread | None = None

    def start(self, timeout: float = 300.0) -> dict:
        self.proc = subprocess.Popen(self.args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=open(self.out / "load.log", "wb"), text=True,
                                     bufsize=1)
        self._reader = threading.Thread(target=self._read, name="soak-load-reader", daemon=True)
        self._reader.start()
        with self._cond:
            if not self._cond.wait_for(lambda: self.ready or self.proc.poll() is not None,
                                       timeout=timeout):
                raise RuntimeError(f"lmcc-bench soak not ready within {timeout:.0f} s")
        if not self.ready:
            raise RuntimeError(f"lmcc-bench soak exited with {self.proc.poll()}: see "
                               f"{self.out / 'load.log'}")
        return self.ready

    def corpus(self) -> dict:
        return json.loads(self.corpus_path.read_text())

    def _read(self) -> None:
        for line in self.proc.stdout:
            line = line.rstrip("\n")
            try:
                msg = json.loads(line) if line.startswith("{") else None
            except ValueError:
                msg = None
            with self._cond:
                if msg is None:
                    self.lines.append(line)
                elif msg.get("event") == "ready":
                    self.ready = msg
                elif msg.get("event") in ("status", "stopped"):
                    self.status = msg
                elif msg.get("event") == "sync":
                    self.syncs.append(msg)
                elif msg.get("event") == "ack":
                    self._acks += 1
                elif msg.get("event") == "verdict":
                    self.status = msg
                    self.verdict = msg
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def command(self, text: str, timeout: float = 10.0) -> None:
        """Sends a worker command and waits until lmcc-bench has handed it to
        the worker (its ack line)."""
        with self._cond:
            want = self._acks + 1
            self.proc.stdin.write(text + "\n")
            self.proc.stdin.flush()
            if not self._cond.wait_for(lambda: self._acks >= want or not self.alive(),
                                       timeout=timeout):
                raise RuntimeError(f"no ack from lmcc-bench for '{text}' within {timeout:.0f} s")

    def stop(self, timeout: float) -> dict | None:
        """Stops the load; lmcc-bench then checks the cluster against the
        truth (for up to its --settle-timeout, then a full count); returns
        its verdict line (None if it died or overran `timeout`)."""
        with self._cond:
            try:
                self.proc.stdin.write("stop\n")
                self.proc.stdin.flush()
            except (BrokenPipeError, OSError):
                pass
            self._cond.wait_for(lambda: self.verdict is not None or not self.alive(),
                                timeout=timeout)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self._reader:
            self._reader.join(timeout=5)
        return self.verdict

    def kill(self) -> None:
        if self.alive():
            self.proc.kill()
            self.proc.wait()
