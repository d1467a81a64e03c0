#!/usr/bin/python3
"""A soak: a three-node cluster under a steady load and a fault every few
minutes, for as long as asked, then checked exactly.

    /usr/bin/python3 tests/soak/soak.py --minutes 30            # make soak
    /usr/bin/python3 tests/soak/soak.py --smoke                 # 2 minutes, small
    /usr/bin/python3 tests/soak/graphs.py RUN_DIR               # the graphs again

What runs (real `lmcc node` processes on loopback, R = 2, every link between
nodes through a TCP proxy the faults can cut: tests/integration/lmcc_cluster.py):
  - the load (load.py): `lmcc-bench soak`, whose LMCache-protocol workers
    (one per instance, spread over the nodes) push --rate ops/s in total
    until they hold --live-keys keys, then one evict per admit, so the index
    stays at that size; they heartbeat and run every full sync asked of them;
    their ground truth is exact at any size (a key range per worker);
  - lookups (probes.py): HTTP /lookup and P2P lookups of the workers' prompts
    at --lookup-rate and --p2p-rate, spread over the nodes that are up;
  - faults (soak_schedule.py, faults.py): one every --gap seconds, drawn
    from the chaos kinds with the chaos planner's parameters (kill -9 first
    and a quarter of the time), planned from --seed;
  - samples (sampler.py): every --sample-s seconds each node's RSS, open
    fds, threads, CPU, data dir and index keys, the load's counters and the
    lookups' latency percentiles.
At the end every fault is healed, the load stops and the run checks
(report.md says PASS or FAIL and why):
  1. no acknowledged entry lost, and convergence: within --converge seconds
     every node's copies equal the workers' ground truth exactly (per
     instance counts through every node, every live key looked up through
     every node, and the nodes' index keys summed = R x the truth:
     apps/lmcc-bench/soak_verify.hpp says why that is exact);
  2. availability (tests/chaos/availability.py's rule, for /lookup and for
     P2P): lookups sent to nodes that are up answered (>= 99.9 %), and
     complete for what the last fence saw on every node unless every owner of
     the missing chunk was unreachable within the failure detector's window;
     an instance whose worker restarted or ran a full sync (which clears its
     location first) is not required until the next fence after that;
  3. no node died that no fault killed, every clean stop exited 0;
  4. RSS and the data dir within their bounds at every sample, and no upward
     trend in fds or threads once the index holds its size (checks.py says
     the bounds and why).
The run's directory (--out, printed) holds samples.jsonl/.csv, the graphs
(graphs/*.png), timeline.log, the plan, availability-*.json, report.md/.json,
the load's log and the nodes' logs (data dirs are removed when it passes).
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import shutil
import signal
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO / "tests" / "chaos"))
sys.path.insert(0, str(REPO / "tests" / "integration"))

import checks  # noqa: E402
import soak_schedule  # noqa: E402

FAILURE_TIMEOUT_S = 2.0  # lmcc_cluster_failure_timeout_ms: the window of the availability rule
FENCE_EVERY_S = 60.0


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=30.0, help="length of the load (default 30)")
    ap.add_argument("--rate", type=float, default=20000, help="ops/s of all workers together")
    ap.add_argument("--live-keys", type=int, default=3_000_000,
                    help="keys the workers hold once grown (the index's size)")
    ap.add_argument("--workers", type=int, default=6, help="LMCache workers (one per instance)")
    ap.add_argument("--prompts", type=int, default=4, help="prompts each worker admits (pinned)")
    ap.add_argument("--prompt-chunks", type=int, default=8, help="256-token chunks per prompt")
    ap.add_argument("--lookup-rate", type=float, default=10.0, help="HTTP /lookup per second")
    ap.add_argument("--p2p-rate", type=float, default=10.0, help="P2P lookups per second")
    ap.add_argument("--gap", default="60-180", help="seconds between faults, A-B (uniform)")
    ap.add_argument("--faults", default=",".join(soak_schedule.DEFAULT_KINDS),
                    help="comma-separated fault kinds (tests/chaos/schedule.py's)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--converge", type=float, default=30.0,
                    help="seconds the cluster gets to equal the truth after the load stops "
                         "(the chaos runner's --converge)")
    ap.add_argument("--sample-s", type=float, default=60.0, help="seconds between samples")
    ap.add_argument("--smoke", action="store_true",
                    help="a 2-minute run at small rates and sizes (proves the harness works)")
    ap.add_argument("--hold-on-fail", type=float, default=0.0, metavar="SECONDS",
                    help="when the exact check fails, keep the cluster up this long to look at it")
    ap.add_argument("--lmcc", default=str(REPO / "build" / "lmcc"))
    ap.add_argument("--bench", default=str(REPO / "build" / "lmcc-bench"))
    ap.add_argument("--out", default=str(REPO / "build" / "soak"),
                    help="runs go to OUT/<UTC date and time>")
    for name, default in vars(checks.Limits()).items():
        ap.add_argument(f"--{name.replace('_', '-')}", type=float, default=default,
                        help=f"check bound (default {default:g}; see checks.py)")
    args = ap.parse_args(argv)
    if args.smoke:
        for key, value in (("minutes", 2.0), ("rate", 2000.0), ("live_keys", 50_000),
                           ("gap", "20-40"), ("sample_s", 10.0), ("lookup_rate", 5.0),
                           ("p2p_rate", 5.0)):
            if getattr(args, key) == ap.get_default(key):
                setattr(args, key, value)
    return args


class Soak:
    def __init__(self, args, out: Path):
        self.args = args
        self.out = out
        self.limits = checks.Limits(**{k: getattr(args, k) for k in vars(checks.Limits())})
        self.timeline = open(out / "timeline.log", "a", buffering=1)
        self.t0 = time.monotonic()
        self.crashes: list[str] = []
        self.stop_problems: list[str] = []

    def note(self, text: str) -> None:
        self.timeline.write(f"{time.strftime('%H:%M:%S', time.gmtime())} "
                            f"+{time.monotonic() - self.t0:7.1f} s {text}\n")

    def restart_crashed(self) -> None:
        """A node that died with no fault on it is a finding; it is started
        again so that the run goes on."""
        for i, n in enumerate(self.cluster.nodes):
            if not self.gates.down[i] and n.proc is not None and n.proc.poll() is not None:
                what = (f"{self.cluster.ids[i]} (pid {n.proc.pid}) exited with "
                        f"{n.proc.returncode} at +{time.monotonic() - self.t0:.0f} s, no fault on it")
                self.crashes.append(what)
                self.note(f"CRASH: {what}; restarting it")
                n.start(keep_ports=True)

    def wait_until(self, at: float) -> None:
        """Until monotonic time `at`, looking for crashed nodes each second
        and taking a fence every FENCE_EVERY_S of a whole cluster (what is
        required of lookups after a worker restarted or synced comes back
        with the next fence)."""
        while (left := at - time.monotonic()) > 0:
            time.sleep(min(1.0, left))  # a planned time, not a condition to await
            self.restart_crashed()
            if time.monotonic() - self.last_fence >= FENCE_EVERY_S and not self.faults.whole():
                self.faults.fence()
                self.last_fence = time.monotonic()

    def run(self) -> int:
        from availability import Availability, Ring
        from faults import FaultRunner
        from lmcc_cluster import Cluster
        from load import Load
        from probes import NodeGates, Probes
        from sampler import Sampler

        a = self.args
        minutes_s = a.minutes * 60
        gap = tuple(float(x) for x in a.gap.split("-"))
        kinds = tuple(a.faults.split(",")) if a.faults else ()
        plan = soak_schedule.plan(a.seed, minutes_s, kinds, a.workers, gap) if kinds else []
        (self.out / "faults-plan.json").write_text(json.dumps(plan, indent=1) + "\n")
        for f in plan:
            self.note(f"planned: {soak_schedule.describe(f)}")
        extra = ("--lmcc_fault_injection=on", "--health-check-interval", "1",
                 "--lmcc_log_level=info")
        self.cluster = Cluster(self.out / "cluster", n=3, proxied=True, extra=extra).start()
        self.gates = NodeGates(3)
        load = Load(Path(a.bench), self.cluster.nodes, self.out, rate=a.rate,
                    live_keys=a.live_keys, workers=a.workers, prompts=a.prompts,
                    prompt_chunks=a.prompt_chunks, converge_s=a.converge,
                    max_seconds=minutes_s + 3600, seed=a.seed)
        probes = sampler = None
        result = 1
        try:
            load.start()
            self.t0 = time.monotonic()
            self.note(f"load started: {' '.join(load.args)}")
            corpus = load.corpus()
            prompts = [{"instance": inst["instance_id"], "worker": inst["worker"],
                        "tokens": p["tokens"], "keys": p["keys"]}
                       for inst in corpus["instances"] for p in inst["prompts"]]
            status = self.cluster.status(self.cluster.nodes[0])
            ring = Ring(self.cluster.ids, slots=status["slots"], replicas=status["replicas"])
            instances = sorted({p["instance"] for p in prompts})
            avail = {k: Availability(ring, [p["keys"] for p in prompts], instances,
                                     list(self.cluster.ids), window=FAILURE_TIMEOUT_S)
                     for k in ("lookup", "p2p")}
            faults = FaultRunner(self.cluster, self.gates, avail, load, prompts, self.note)
            self.faults = faults
            self.await_prompts(prompts)
            faults.fence()
            self.last_fence = time.monotonic()
            probes = Probes(self.cluster, self.gates, prompts, avail, a.lookup_rate, a.p2p_rate,
                            a.seed)
            probes.start()
            sampler = Sampler(self.cluster, self.gates, load, probes, self.out / "samples.jsonl",
                              a.sample_s, self.t0)
            sampler.start()
            for f in plan:
                self.wait_until(self.t0 + f["at"])
                if not load.alive():
                    raise RuntimeError("the load (lmcc-bench soak) died: see load.log")
                sampler.fault(f"{f['kind']}: {soak_schedule.describe(f)}")
                faults.run(f)
            self.wait_until(self.t0 + minutes_s)
            self.note("the load's time is up: every fault healed; waiting for a whole cluster")
            faults.await_whole("the end")
            probes.stop()
            self.note("lookups stopped; stopping the load, which then checks the cluster")
            verdict = load.stop(timeout=a.converge + 1800)
            self.note(f"verdict: {json.dumps(verdict)[:2000] if verdict else 'none'}")
            if a.hold_on_fail and not (verdict and verdict["verdict"]["exact"]):
                urls = ", ".join(n.http_url for n in self.cluster.nodes)
                print(f"soak: the exact check failed; the cluster stays up {a.hold_on_fail:g} s: "
                      f"{urls}", flush=True)
                time.sleep(a.hold_on_fail)  # for a person to look, not a condition
            sampler.stop()
            self.restart_crashed()
            self.stop_cluster()
            result = self.report(plan, faults, avail, load, sampler, verdict)
        finally:
            if probes:
                probes.stop_event.set()
            load.kill()
            for n in self.cluster.nodes:
                try:
                    os.kill(n.proc.pid, signal.SIGCONT)  # a frozen node must be able to die
                except (ProcessLookupError, AttributeError, TypeError):
                    pass
                n.kill()
            for proxy in self.cluster.proxies.values():
                proxy.close()
        if result == 0:
            for d in (self.out / "cluster").glob("n*/data"):
                shutil.rmtree(d, ignore_errors=True)
        return result

    def await_prompts(self, prompts, timeout: float = 120.0) -> None:
        """Until every node answers every prompt in full (the first fence's
        baseline), bounded."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if all(n.lookup(p["tokens"]).get(p["instance"], [None, 0])[1]
                       == len(p["keys"]) * 256 for n in self.cluster.nodes for p in prompts):
                    return
            except AssertionError:
                pass  # a node not answering yet
            time.sleep(0.2)
        self.note("not every prompt was answered in full by every node before the first fence")

    def stop_cluster(self) -> None:
        for i, n in enumerate(self.cluster.nodes):
            try:
                rc = n.stop()
            except AssertionError as e:
                rc = f"no exit within the stop deadline ({str(e)[:200]})"
            if rc != 0:
                self.stop_problems.append(f"{self.cluster.ids[i]} exited with {rc} on SIGTERM "
                                          "at the end")
        self.cluster.heal()

    # -- the report --------------------------------------------------------------------

    def report(self, plan, faults, avail, load, sampler, verdict) -> int:
        from graphs import render

        a = self.args
        samples = sampler.samples
        write_csv(samples, self.out / "samples.csv")
        syncs_excused = {k: excuse_syncs(av, load.syncs, load_instances(load)) for k, av in
                         avail.items()}
        judged = {}
        for kind, av in avail.items():
            counts, problems = av.judge(lambda t: f"+{t - self.t0:.1f} s")
            counts["excused_by_sync_or_restart"] = syncs_excused[kind]
            judged[kind] = (counts, problems)
            (self.out / f"availability-{kind}.json").write_text(av.dumps())
        rows: list[checks.Finding] = []
        exact = bool(verdict and verdict["verdict"]["exact"])
        rows.append(checks.Finding(
            f"no entry lost; every node equals the ground truth within {a.converge:g} s", exact,
            (f"{verdict['verdict']['truth_keys']:,} keys x {verdict['verdict']['copies']} copies: "
             f"every node equal by a check begun {verdict['converged_s']:.1f} s after the load "
             f"stopped (the check took {verdict['check_s']:.1f} s)" if exact else
             (verdict["verdict"]["detail"] + "; per node: " + "; ".join(
                 f"{n['node']} missing {n['missing']} of {n['keys_checked']} checked, "
                 f"counts {'ok' if n['counts_ok'] else n['counts_detail']}"
                 for n in verdict["verdict"]["nodes"]) if verdict else
              "no verdict from the load (see load.log)"))))
        for kind, (counts, problems) in judged.items():
            total = counts["answered"] + counts["failed"]
            rows.append(checks.Finding(
                f"{'HTTP /lookup' if kind == 'lookup' else 'P2P lookups'} answered (>= 99.9 %) "
                "and complete", not problems,
                f"{counts['answered']:,} of {total:,} answered, {counts['failed']} failed; "
                f"complete {counts['complete']:,}, incomplete {counts['incomplete']}, excused "
                f"{counts['excused']} (owners unreachable), "
                f"{counts['excused_by_sync_or_restart']} not required (worker restarted or "
                "syncing)" + (f"; first problem: {problems[0]}" if problems else ""), counts))
        rows.append(checks.Finding("no node died that no fault killed; clean stops exit 0",
                                   not self.crashes and not self.stop_problems,
                                   "; ".join(self.crashes + self.stop_problems) or "none"))
        rows.append(checks.Finding("faults run as planned", not faults.problems,
                                   "; ".join(faults.problems) or f"{len(plan)} faults"))
        rows.extend(checks.resource_findings(samples, list(self.cluster.ids), self.limits))
        ok = all(r.ok for r in rows)
        graphs = render(samples, self.out / "graphs", self.limits)
        figures = summary(samples, load, verdict, plan, a, self.t0)
        write_report(self.out, a, rows, ok, figures, graphs, judged)
        print(f"soak: {'PASS' if ok else 'FAIL'}; report: {self.out / 'report.md'}", flush=True)
        return 0 if ok else 1


def load_instances(load) -> dict[int, str]:
    return {inst["worker"]: inst["instance_id"] for inst in load.corpus()["instances"]}


def excuse_syncs(avail, syncs: list[dict], instance_of: dict[int, str]) -> int:
    """A full sync clears the worker's location when it starts (spec 4.9), so
    its instance's prompts are not required from the sync's start until the
    first fence after it completed (a failed sync: after the next one that
    completed), as for a worker restart. Returns the lookups so relieved."""
    windows: dict[str, list[tuple[float, float]]] = {}
    for w in sorted({s["worker"] for s in syncs}):
        mine = sorted((s for s in syncs if s["worker"] == w), key=lambda s: s["start"])
        for k, s in enumerate(mine):
            end = next((x["end"] for x in mine[k:] if x["complete"]), float("inf"))
            windows.setdefault(instance_of[w], []).append((s["start"], end))
    fences = sorted(avail.fences)
    relieved = 0
    for lk in avail.lookups:
        hit = False
        for inst, need in lk.required.items():
            if not need:
                continue
            for start, end in windows.get(inst, []):
                until = next((f for f in fences if f > end), float("inf"))
                if start <= lk.answered and lk.sent < until:
                    lk.required[inst] = 0
                    hit = True
                    break
        relieved += hit
    return relieved


def write_csv(samples: list[dict], path: Path) -> None:
    nodes = sorted({n for s in samples for n in s["nodes"]})
    per_node = ("pid", "rss_mib", "fds", "threads", "cpu_cores", "data_mib", "index_keys",
                "log_mib", "snapshot_mib")
    head = ["t", "wall", "loadavg", "ops_sent", "ops_per_s", "truth_keys", "holding",
            "full_syncs", "skipped_ops", "lookup_count", "lookup_failed", "lookup_p50_ms",
            "lookup_p99_ms", "p2p_count", "p2p_failed", "p2p_p50_ms", "p2p_p99_ms", "faults"]
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(head + [f"{n}_{k}" for n in nodes for k in per_node])
        for s in samples:
            w.writerow([";".join(s["faults"]) if k == "faults" else s.get(k) for k in head] +
                       [(s["nodes"].get(n) or {}).get(k) for n in nodes for k in per_node])


def summary(samples, load, verdict, plan, args, t0) -> dict:
    end = verdict or load.status or {}
    held = checks.holding(samples)
    rates = [s["ops_per_s"] for s in held if s.get("ops_per_s") is not None]
    keys = [sum((n or {}).get("index_keys") or 0 for n in s["nodes"].values()) for s in held]
    return {
        "ops_sent": end.get("ops_sent"),
        "ops_per_s_held_median": sorted(rates)[len(rates) // 2] if rates else None,
        "skipped_ops": end.get("skipped_ops"),
        "truth_keys_end": end.get("truth_keys"),
        "index_keys_all_nodes_max": max(keys) if keys else None,
        "holding_from_min": round(held[0]["t"] / 60, 1) if held else None,
        "full_syncs": end.get("full_syncs"), "full_sync_requests": end.get("full_sync_requests"),
        "restarts": end.get("restarts"), "stream_faults": end.get("stream_faults"),
        "faults": [soak_schedule.describe(f) for f in plan],
        "converged_s": verdict.get("converged_s") if verdict else None,
        "loadavg_median": sorted(s["loadavg"] for s in samples)[len(samples) // 2]
        if samples else None,
    }


def write_report(out: Path, args, rows, ok, figures, graphs, judged) -> None:
    cmd = " ".join(sys.argv)
    lines = [f"# Soak {out.name}: {'PASS' if ok else 'FAIL'}", "",
             f"Command: `{cmd}`", "",
             f"Machine: {platform.node()}, {os.cpu_count()} cores, load average median "
             f"{figures['loadavg_median']}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
             "", f"Load: {args.rate:g} ops/s over {args.workers} workers, index held at "
             f"{args.live_keys:,} keys (from minute {figures['holding_from_min']}); "
             f"{figures['ops_sent']:,} ops sent (median {figures['ops_per_s_held_median']} ops/s "
             f"while held, {figures['skipped_ops']} let go while a worker could not send); "
             f"{figures['full_syncs']} full syncs, {figures['restarts']} worker restarts.", "",
             f"Faults ({len(figures['faults'])}): " + "; ".join(figures["faults"]), "",
             "| check | verdict | detail |", "|---|---|---|"]
    for r in rows:
        lines.append(f"| {r.name} | {'PASS' if r.ok else 'FAIL'} | {r.detail} |")
    lines += [""] + [f"![{p.stem}](graphs/{p.name})" for p in graphs] + [""]
    for kind, (_counts, problems) in judged.items():
        if problems:
            lines += [f"## {kind}: first problems", ""] + [f"- {p}" for p in problems[:20]] + [""]
    (out / "report.md").write_text("\n".join(lines))
    (out / "report.json").write_text(json.dumps(
        {"ok": ok, "figures": figures, "args": vars(args),
         "checks": [{"name": r.name, "ok": r.ok, "detail": r.detail, "figures": r.figures}
                    for r in rows]}, indent=1, default=str) + "\n")


def main() -> int:
    args = parse_args()
    # SIGTERM ends the run as Ctrl-C does: the nodes and the load are stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    out = Path(args.out) / time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    (out / "bin").mkdir(parents=True)
    # Copies: a rebuild of the build dir during the run must not swap them.
    for name, src in (("lmcc", args.lmcc), ("lmcc-bench", args.bench)):
        shutil.copy2(src, out / "bin" / name)
    args.lmcc, args.bench = str(out / "bin" / "lmcc"), str(out / "bin" / "lmcc-bench")
    os.environ["LMCC_BINARY"] = args.lmcc
    import conftest  # the integration suite's node process, with a soak's deadlines
    conftest.BINARY = Path(args.lmcc)
    conftest.STARTUP_DEADLINE_S = 300.0  # a restart loads millions of entries
    conftest.SHUTDOWN_DEADLINE_S = 120.0
    print(f"soak: {args.minutes:g} min, {args.rate:g} ops/s, {args.live_keys:,} keys; run dir "
          f"{out}", flush=True)
    return Soak(args, out).run()


if __name__ == "__main__":
    sys.exit(main())
