#!/usr/bin/python3
"""CPU and context switches of running node processes, per thread name.

    /usr/bin/python3 bench/thread_switches.py PID[,PID...] [SECONDS]

Reads /proc/PID/task/*/{comm,status,stat} twice, SECONDS apart (default 5),
and prints, per thread name summed over the processes, the context switches
(voluntary and not) per second and the CPU milliseconds per second. On the
2-core VM the cluster figures in bench/RESULTS.md come from, most of a node's
CPU under ingest is the kernel switching threads (perf: pvm_irq_enable), so
switches per second is the figure that says whether a change to the data
path took hops out of it.
"""
import collections
import glob
import os
import sys
import time

TICKS = os.sysconf("SC_CLK_TCK")


def snapshot(pids):
    threads = {}
    for pid in pids:
        for task in glob.glob(f"/proc/{pid}/task/*"):
            try:
                name = open(task + "/comm").read().strip()
                status = open(task + "/status").read()
                stat = open(task + "/stat").read().rsplit(")", 1)[1].split()
            except OSError:
                continue  # the thread ended meanwhile
            switches = sum(int(status.split(key)[1].split()[0])
                           for key in ("\nvoluntary_ctxt_switches:", "nonvoluntary_ctxt_switches:"))
            cpu_ticks = int(stat[11]) + int(stat[12])  # utime + stime
            threads[(pid, task)] = (name, switches, cpu_ticks)
    return threads


def main():
    pids = sys.argv[1].split(",")
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 5.0
    before = snapshot(pids)
    time.sleep(seconds)
    after = snapshot(pids)
    switches, cpu, count = collections.Counter(), collections.Counter(), collections.Counter()
    for key, (name, s, c) in after.items():
        if key in before:
            switches[name] += s - before[key][1]
            cpu[name] += c - before[key][2]
            count[name] += 1
    for name, s in switches.most_common():
        print(f"{name:20s} threads={count[name]:4d} switches/s={s / seconds:9.0f} "
              f"cpu_ms/s={cpu[name] * 1000 / TICKS / seconds:7.1f}")
    print(f"total switches/s {sum(switches.values()) / seconds:.0f} "
          f"cpu_ms/s {sum(cpu.values()) * 1000 / TICKS / seconds:.1f}")


if __name__ == "__main__":
    main()
