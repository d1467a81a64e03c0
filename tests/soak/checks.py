"""The soak's end-of-run checks on the per-minute samples: bounds and trends.
Pure functions of the samples (test_checks.py tests them without a cluster).

A sample is one row of samples.jsonl (sampler.py): its time `t` (seconds
since the load started), `holding` (the workers hold their target index size,
so the index no longer grows) and, per node id, a dict with `rss_mib`, `fds`,
`threads`, `cpu_cores`, `data_mib` and `index_keys` (None while the node is
down).

Bounds, and why:
  RSS <= rss_base_mib + rss_per_entry_b x the node's index keys. The node's
  own target for a steady index (bench/RESULTS.md, issues 9-10) is 40 B per
  entry + 128 MiB; a soak adds what faults make a node hold for a while: up to
  lmcc_peer_buffer_ops of ops re-sent to each unreachable peer and a refill's
  or a membership change's slot copies in flight. So the default is 40 B per
  entry + 384 MiB (the 128 MiB plus 256 MiB of that).
  Data dir <= disk_base_mib + disk_per_entry_b x the node's index keys. What a
  node keeps on disk is one slot snapshot of its index (9-12 B per entry,
  bench/RESULTS.md), the op log since the last snapshot round (a round starts
  once the log grew max(lmcc_snapshot_log_mb = 32 MiB, 50 % of the last
  round)), the previous round's files until RocksDB compacts them away (one
  more snapshot), and RocksDB's WAL: the live file (what both families'
  memtables hold, up to 2 x 32 MiB) plus older files up to
  lmcc_rocksdb_max_wal_mb (64 MiB; before that bound RocksDB let them grow to
  four times all memtables, and a 2-hour soak's data dir peaked at 228 MiB).
  Hence 3 x 12 = 36 B per entry + 32 + 64 MiB, rounded to 40 B per entry +
  128 MiB; a WAL at its bound is the spike the 128 MiB leaves room for.
  Both bounds are checked on every sample of every node, not only at the end.
No upward trend in file descriptors or threads: over the samples taken once
the index holds its size, per node, the Theil-Sen slope (the median of the
slopes between every pair of samples, which a few samples taken during a
fault do not move) times the length of that span must stay within a
tolerance (fds: 32, threads: 8): a leak of one descriptor per fault, or one
per minute, exceeds it within the run; the normal coming and going of
connections does not. Restarts of a node start its counts afresh, which only
lowers the slope.
RSS and the data dir get the same trend figure in the report (informative: a
bounded quantity may still creep; the bound is what fails the run).
"""
from __future__ import annotations

from dataclasses import dataclass, field

MIB = 1 << 20


@dataclass
class Limits:
    rss_base_mib: float = 384.0
    rss_per_entry_b: float = 40.0
    disk_base_mib: float = 128.0
    disk_per_entry_b: float = 40.0
    fds_tolerance: float = 32.0
    threads_tolerance: float = 8.0


@dataclass
class Finding:
    name: str
    ok: bool
    detail: str
    figures: dict = field(default_factory=dict)


def theil_sen_slope(points: list[tuple[float, float]]) -> float:
    """The median of the slopes between every pair of points with distinct x
    (0 with fewer than two such points)."""
    slopes = sorted((y2 - y1) / (x2 - x1)
                    for i, (x1, y1) in enumerate(points)
                    for x2, y2 in points[i + 1:] if x2 != x1)
    if not slopes:
        return 0.0
    mid = len(slopes) // 2
    return slopes[mid] if len(slopes) % 2 else (slopes[mid - 1] + slopes[mid]) / 2


def series(samples: list[dict], node: str, key: str) -> list[tuple[float, float]]:
    """(t, value) of one node's figure, the samples where it was read."""
    out = []
    for s in samples:
        v = (s.get("nodes", {}).get(node) or {}).get(key)
        if v is not None:
            out.append((s["t"], float(v)))
    return out


def holding(samples: list[dict]) -> list[dict]:
    """The samples taken once the index reached its size (and every later one)."""
    for k, s in enumerate(samples):
        if s.get("holding"):
            return samples[k:]
    return []


def trend(samples: list[dict], node: str, key: str, tolerance: float) -> Finding:
    """No upward trend in `key` on `node` over `samples` (see the docstring)."""
    points = series(samples, node, key)
    if len(points) < 3:
        return Finding(f"{node} {key} trend", True,
                       f"{len(points)} samples: too few to judge a trend",
                       {"samples": len(points)})
    slope = theil_sen_slope(points)
    span = points[-1][0] - points[0][0]
    rise = slope * span
    ok = rise <= tolerance
    return Finding(f"{node} {key} trend", ok,
                   f"Theil-Sen slope {slope * 3600:+.1f}/h over {span / 60:.1f} min = "
                   f"{rise:+.1f} (tolerance {tolerance:g}); first {points[0][1]:g}, "
                   f"last {points[-1][1]:g}",
                   {"slope_per_hour": slope * 3600, "rise": rise, "samples": len(points)})


def bound(samples: list[dict], node: str, key: str, base_mib: float, per_entry_b: float) -> Finding:
    """Every sample of `key` (MiB) on `node` within base_mib + per_entry_b x
    the node's index keys at that sample."""
    worst = None  # (excess, t, value, limit)
    peak = 0.0
    for s in samples:
        n = s.get("nodes", {}).get(node) or {}
        v, keys = n.get(key), n.get("index_keys")
        if v is None:
            continue
        limit = base_mib + per_entry_b * (keys or 0) / MIB
        peak = max(peak, v)
        if worst is None or v - limit > worst[0]:
            worst = (v - limit, s["t"], v, limit)
    if worst is None:
        return Finding(f"{node} {key} bound", False, "never sampled")
    excess, t, v, limit = worst
    ok = excess <= 0
    return Finding(f"{node} {key} bound", ok,
                   f"peak {peak:.0f} MiB; closest to the bound at +{t / 60:.1f} min: "
                   f"{v:.0f} MiB of {limit:.0f} MiB ({base_mib:g} MiB + {per_entry_b:g} B x "
                   f"index keys)" + ("" if ok else f": {excess:.0f} MiB over"),
                   {"peak_mib": peak, "worst_excess_mib": excess})


def resource_findings(samples: list[dict], nodes: list[str], limits: Limits) -> list[Finding]:
    """The bounds on RSS and the data dir (every sample) and the trends of
    fds and threads (failing) and of RSS and the data dir (informative) over
    the holding samples."""
    out: list[Finding] = []
    held = holding(samples)
    for node in nodes:
        out.append(bound(samples, node, "rss_mib", limits.rss_base_mib, limits.rss_per_entry_b))
        out.append(bound(samples, node, "data_mib", limits.disk_base_mib,
                         limits.disk_per_entry_b))
        out.append(trend(held, node, "fds", limits.fds_tolerance))
        out.append(trend(held, node, "threads", limits.threads_tolerance))
        for key in ("rss_mib", "data_mib"):
            f = trend(held, node, key, float("inf"))
            f.name += " (informative)"
            out.append(f)
    if not held:
        out.append(Finding("index reached its size", False,
                           "the workers never held their target index size: no trend judged"))
    return out
