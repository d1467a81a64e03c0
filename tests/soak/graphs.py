"""The soak's graphs: PNGs of the samples over time, one figure per quantity
(RSS with its bound, CPU, data dir with its bound, lookup p99, fds and
threads, index keys), faults marked as vertical lines, and one overview of
the four the report shows. Debian's python3-matplotlib, headless (Agg).

    /usr/bin/python3 tests/soak/graphs.py RUN_DIR     # again, from samples.jsonl
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

MIB = 1 << 20
COLORS = {"n1": "tab:blue", "n2": "tab:orange", "n3": "tab:green"}


def minutes(samples):
    return [s["t"] / 60 for s in samples]


def node_ids(samples):
    return sorted({n for s in samples for n in s.get("nodes", {})})


def node_series(samples, node, key):
    xs, ys = [], []
    for s in samples:
        v = (s.get("nodes", {}).get(node) or {}).get(key)
        if v is not None:
            xs.append(s["t"] / 60)
            ys.append(v)
    return xs, ys


def mark_faults(ax, samples, labels=True):
    """A vertical line at each sample that saw a fault (kinds in small print)."""
    for s in samples:
        if s.get("faults"):
            ax.axvline(s["t"] / 60, color="grey", lw=0.6, ls=":")
            if labels:
                ax.text(s["t"] / 60, 1.0, " " + ",".join(sorted({f.split(":")[0] for f in s["faults"]})),
                        transform=ax.get_xaxis_transform(), rotation=90, va="top", ha="right",
                        fontsize=6, color="dimgrey")


def plot_nodes(ax, samples, key, ylabel, bound=None):
    for n in node_ids(samples):
        xs, ys = node_series(samples, n, key)
        ax.plot(xs, ys, marker=".", ms=3, lw=1.2, color=COLORS.get(n), label=n)
        if bound:
            bx, by = [], []
            for s in samples:
                keys = (s.get("nodes", {}).get(n) or {}).get("index_keys")
                if keys is not None:
                    bx.append(s["t"] / 60)
                    by.append(bound[0] + bound[1] * keys / MIB)
            ax.plot(bx, by, lw=0.8, ls="--", color=COLORS.get(n), alpha=0.6)
    ax.set_ylabel(ylabel)
    ax.set_xlabel("minutes since the load started")
    ax.grid(alpha=0.3)
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=7, loc="lower right")
    mark_faults(ax, samples)


def plot_p99(ax, samples):
    for kind, color in (("lookup", "tab:purple"), ("p2p", "tab:red")):
        xs = [s["t"] / 60 for s in samples if s.get(f"{kind}_p99_ms") is not None]
        ys = [s[f"{kind}_p99_ms"] for s in samples if s.get(f"{kind}_p99_ms") is not None]
        ax.plot(xs, ys, marker=".", ms=3, lw=1.2, color=color,
                label="HTTP /lookup" if kind == "lookup" else "P2P lookup")
    ax.set_ylabel("p99 latency per interval (ms)")
    ax.set_xlabel("minutes since the load started")
    ax.set_yscale("log")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7, loc="upper right")
    mark_faults(ax, samples)


def figure(path: Path, title: str, draw, size=(8, 3.6)) -> None:
    fig, ax = plt.subplots(figsize=size)
    draw(ax)
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def render(samples: list[dict], out: Path, limits=None) -> list[Path]:
    """Writes the PNGs into `out`; returns their paths."""
    out.mkdir(parents=True, exist_ok=True)
    rss = (limits.rss_base_mib, limits.rss_per_entry_b) if limits else None
    disk = (limits.disk_base_mib, limits.disk_per_entry_b) if limits else None
    panels = {
        "rss": ("Resident memory per node (dashed: the bound)",
                lambda ax: plot_nodes(ax, samples, "rss_mib", "VmRSS (MiB)", rss)),
        "cpu": ("CPU per node",
                lambda ax: plot_nodes(ax, samples, "cpu_cores", "cores (CPU s per s)")),
        "disk": ("Data dir per node (dashed: the bound)",
                 lambda ax: plot_nodes(ax, samples, "data_mib", "data dir (MiB)", disk)),
        "lookup_p99": ("Lookup latency, p99 per interval", lambda ax: plot_p99(ax, samples)),
        "fds": ("Open file descriptors per node",
                lambda ax: plot_nodes(ax, samples, "fds", "open fds")),
        "threads": ("Threads per node", lambda ax: plot_nodes(ax, samples, "threads", "threads")),
        "index": ("Index keys per node (primary and replica copies)",
                  lambda ax: plot_nodes(ax, samples, "index_keys", "keys")),
    }
    paths = []
    for name, (title, draw) in panels.items():
        p = out / f"{name}.png"
        figure(p, title, draw)
        paths.append(p)
    fig, axes = plt.subplots(2, 2, figsize=(12, 7))
    for ax, name in zip(axes.flat, ("rss", "cpu", "disk", "lookup_p99")):
        title, draw = panels[name]
        draw(ax)
        ax.set_title(title, fontsize=10)
    fig.tight_layout()
    p = out / "overview.png"
    fig.savefig(p, dpi=80)
    plt.close(fig)
    paths.append(p)
    return paths


if __name__ == "__main__":
    run = Path(sys.argv[1])
    rows = [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines() if line]
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from checks import Limits  # noqa: E402
    for p in render(rows, run / "graphs", Limits()):
        print(p)
