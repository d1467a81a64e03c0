"""The chaos checker's invariant 4 (full syncs follow proofs, and only proofs),
read from the nodes' own log lines, and a worker's story for a failure's report.
Used by chaos.py; tested by test_audit.py."""

from __future__ import annotations

import datetime
import re
from pathlib import Path

LOG_LINE = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3})\] \[\w+\] (\S+) ?(.*)$")


def log_events(paths) -> list[tuple[float, str, dict[str, str]]]:
    """(time, event, key=value fields) of every line of the given node logs, in time order."""
    out = []
    for path in paths:
        for line in Path(path).read_text(errors="replace").splitlines():
            m = LOG_LINE.match(line)
            if m:
                t = datetime.datetime.strptime(m[1], "%Y-%m-%d %H:%M:%S.%f").timestamp()
                fields = dict(kv.split("=", 1) for kv in m[3].split() if "=" in kv)
                out.append((t, m[2], fields))
    out.sort(key=lambda e: e[0])
    return out


def full_sync_audit(events, since: float) -> list[str]:
    """Invariant 4's violations after wall time `since` (empty: it holds)."""
    who = {f["uid"]: (f["instance"], f["worker"]) for _, _, f in events
           if {"uid", "instance", "worker"} <= f.keys()}
    proofs, asks, resets, starts = [], [], [], []
    every_worker = []  # proofs for every worker (index-lost: copies gone on every owner)
    for t, event, f in events:
        key = (f.get("instance"), f.get("worker"))
        if event == "index-lost":
            every_worker.append(t)
        elif event in ("seq-gap-proven", "full-sync-needed-after-restart",
                     "worker-frames-not-forwarded") or (
                event == "worker-taken-over" and f.get("resync", "no") != "no"):
            proofs.append((t, key))
        elif event == "worker-entity-split" and f.get("uid") in who:
            proofs.append((t, who[f["uid"]]))
        elif f.get("action") == "full-sync-requested" and f.get("worker_uid") in who:
            # Any other finding the node states asks a worker for a full sync
            # (slot copies that conflict for a holder, ...) names it by uid.
            proofs.append((t, who[f["worker_uid"]]))
        elif event == "full-sync-requested":
            asks.append((t, key, f.get("reason")))
        elif event in ("worker-reregistered", "worker-registered", "worker-deregistered"):
            resets.append((t, key))
        elif event == "full-sync-start":
            starts.append((t, key))
    problems = []
    for t, key, reason in asks:
        if t < since:
            continue
        retry = reason == "sync_failed_retry" and any(k == key and ta < t for ta, k, _ in asks)
        if not retry and not any(k == key and tp <= t for tp, k in proofs) and not any(
                tp <= t for tp in every_worker):
            problems.append(f"{key[0]}/{key[1]} asked for a full sync ({reason}) with no proof")
    for tp, key in proofs:
        if tp < since:
            continue
        # Answered: asked after the proof, registered again, or a full sync
        # (asked just before the proof) that starts after it and so replaces
        # everything the proof doubts (chaos seed 1346: asked 38 ms before a
        # split proof, started 3 ms after it).
        if not any(k == key and ta >= tp for ta, k, _ in asks) and not any(
                k == key and tr >= tp for tr, k in resets + starts):
            problems.append(f"{key[0]}/{key[1]}: a proof at {tp:.3f} never asked it for a full sync")
    return problems


def worker_story(paths, instance: str, worker: int, limit: int = 80) -> str:
    """Every line the nodes logged about one worker (by its ids or its uid), in
    time order and prefixed with the node, for a failed invariant's report."""
    key = f"instance={instance} worker={worker} "
    logged = [(Path(path).parent.name, line) for path in paths
              for line in Path(path).read_text(errors="replace").splitlines()]
    uids = {m[1] for _, line in logged if key in line
            for m in [re.search(r" uid=(\d+)", line)] if m}
    lines = [f"{line[:25]} {node} {line[25:]}" for node, line in logged
             if key in line or any(f"uid={u} " in line + " " for u in uids)]
    lines.sort()
    shown = lines[-limit:]
    return "\n".join([f"{instance}/{worker}: the last {len(shown)} of {len(lines)} lines"] + shown)
