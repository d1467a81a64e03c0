"""The soak's samples: once an interval (a minute by default), every node's
resident memory, open file descriptors, threads and CPU (from /proc of its
process), its data dir's size (the bytes of its files) and index keys (from
its /metrics), the load's status, and the lookups' latencies since the last
sample. Each sample is appended to samples.jsonl as it is taken (so a run
that dies keeps what it measured) and handed to checks.py at the end.

    sampler = Sampler(cluster, gates, load, probes, out / "samples.jsonl", interval=60, t0=...)
    sampler.start(); ...; sampler.stop()
"""
from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

MIB = 1 << 20
TICKS = os.sysconf("SC_CLK_TCK")


def proc_figures(pid: int) -> dict | None:
    """VmRSS (MiB), threads, open fds and CPU seconds of a process; None if gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        stat = Path(f"/proc/{pid}/stat").read_text()
        fds = len(os.listdir(f"/proc/{pid}/fd"))
    except (OSError, ValueError):
        return None
    out = {"fds": fds}
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            out["rss_mib"] = int(line.split()[1]) / 1024
        elif line.startswith("Threads:"):
            out["threads"] = int(line.split()[1])
    # Fields after the command name (which may hold spaces) closed by ')'.
    fields = stat[stat.rindex(")") + 2:].split()
    out["cpu_s"] = (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime
    out["start_ticks"] = int(fields[19])
    return out


def dir_bytes(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            try:
                total += os.stat(os.path.join(root, f)).st_size
            except OSError:
                pass  # removed while walking (a compaction)
    return total


def metric_values(text: str, names: tuple[str, ...]) -> dict[str, float]:
    out = {}
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        key, _, value = line.rpartition(" ")
        if key in names:
            out[key] = float(value)
    return out


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


class Sampler:
    METRICS = ("lmcc_index_keys", "lmcc_store_log_bytes", "lmcc_store_snapshot_bytes",
               "lmcc_store_disk_bytes")

    def __init__(self, cluster, gates, load, probes, path: Path, interval: float, t0: float):
        self.cluster = cluster
        self.gates = gates
        self.load = load
        self.probes = probes
        self.path = path
        self.interval = interval
        self.t0 = t0
        self.samples: list[dict] = []
        self._last: dict[str, tuple[float, float, int]] = {}  # node -> (mono, cpu_s, start)
        self._stop = threading.Event()
        self._faults: list[str] = []
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="soak-sampler", daemon=True)

    def fault(self, text: str) -> None:
        """A fault to show on the next sample's row."""
        with self._lock:
            self._faults.append(text)

    def start(self) -> None:
        self.take()  # the baseline
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=self.interval + 30)
        self.take()

    def _run(self) -> None:
        next_at = time.monotonic() + self.interval
        while not self._stop.wait(max(0.0, next_at - time.monotonic())):
            next_at += self.interval
            self.take()

    def node_sample(self, i: int) -> dict | None:
        node, name = self.cluster.nodes[i], self.cluster.ids[i]
        if self.gates.down[i] or node.proc is None or node.proc.poll() is not None:
            return None  # down (a fault, or a crash the runner restarts)
        p = proc_figures(node.proc.pid)
        if p is None:
            return None
        now = time.monotonic()
        last = self._last.get(name)
        cpu_cores = None
        if last and last[2] == p["start_ticks"] and now > last[0]:
            cpu_cores = (p["cpu_s"] - last[1]) / (now - last[0])
        self._last[name] = (now, p["cpu_s"], p["start_ticks"])
        out = {"pid": node.proc.pid, "rss_mib": round(p["rss_mib"], 1), "fds": p["fds"],
               "threads": p["threads"], "cpu_s": p["cpu_s"],
               "cpu_cores": None if cpu_cores is None else round(cpu_cores, 3),
               "data_mib": round(dir_bytes(node.workdir / "data") / MIB, 1)}
        try:
            m = metric_values(node.get("/metrics", timeout=10).text, self.METRICS)
            out["index_keys"] = m.get("lmcc_index_keys")
            out["log_mib"] = round(m.get("lmcc_store_log_bytes", 0) / MIB, 1)
            out["snapshot_mib"] = round(m.get("lmcc_store_snapshot_bytes", 0) / MIB, 1)
        except Exception:  # noqa: BLE001 - a node too busy to answer: its /proc figures stand
            out["index_keys"] = None
        return out

    def take(self) -> dict:
        now = time.monotonic()
        recent = self.probes.drain() if self.probes else []
        with self._lock:
            faults, self._faults = self._faults, []
        status = dict(self.load.status) if self.load else {}
        s = {"t": round(now - self.t0, 1), "wall": time.strftime("%H:%M:%S", time.gmtime()),
             "loadavg": round(os.getloadavg()[0], 2),
             "nodes": {self.cluster.ids[i]: self.node_sample(i)
                       for i in range(len(self.cluster.nodes))},
             "ops_sent": status.get("ops_sent"), "truth_keys": status.get("truth_keys"),
             "holding": bool(status.get("holding")), "full_syncs": status.get("full_syncs"),
             "skipped_ops": status.get("skipped_ops"), "faults": faults}
        for kind in ("lookup", "p2p"):
            lat = [x[2] * 1000 for x in recent if x[0] == kind and x[2] is not None]
            s[f"{kind}_count"] = sum(1 for x in recent if x[0] == kind)
            s[f"{kind}_failed"] = sum(1 for x in recent if x[0] == kind and x[2] is None)
            s[f"{kind}_p50_ms"] = percentile(lat, 0.50)
            s[f"{kind}_p99_ms"] = percentile(lat, 0.99)
            s[f"{kind}_max_ms"] = max(lat) if lat else None
        prev = self.samples[-1] if self.samples else None
        if prev and prev.get("ops_sent") is not None and s["ops_sent"] is not None:
            s["ops_per_s"] = round((s["ops_sent"] - prev["ops_sent"]) / max(1e-9, s["t"] - prev["t"]))
        self.samples.append(s)
        with open(self.path, "a") as f:
            f.write(json.dumps(s) + "\n")
        return s
