"""The chaos checker's invariant 6: lookups during faults are answered, and
complete for every entry the cluster acknowledged before the fault.

The rule, per run (chaos.py feeds it; test_availability.py tests it):

  Answered. Every /lookup the workload sends goes to a node that is up (not
  killed, frozen or restarting); at least 99.9 % of them get HTTP 200 with an
  answer (so on a run of a few hundred lookups, none may fail).

  Acknowledged. An entry counts as acknowledged only once a *fence* saw it: the
  runner stops the workload, waits until every node reports every peer live,
  none refilling, no sub-batch queued for a peer and no ingest op in flight
  (replication_lag_sub_batches and ingest_inflight_ops of /cluster/status: a
  sub-batch's credits come back only when every owner applied and committed
  it), asks every node /lookup for every prompt, and asks again for the two
  zeros. A node reads the slots it owns from its own copy, so with every node
  asked, every owner's copy of every prompt's chunks was read. For prompt p
  and instance I, verified(p, I) is the smallest prefix any node answered,
  capped by what the workers hold (their ground truth). Fences are planned
  (schedule.py) FENCE_LEAD schedule seconds before each node fault, with the
  workload running in between; a fence whose conditions do not come within
  its bound is skipped and the last one stands.

  Required. At a lookup of p, instance I must be credited with at least the
  leading chunks k < verified(p, I) whose key no worker of I has touched since
  the fence: evicted, or held when the worker restarted (its entries dropped
  with its incarnation), or whose slot lost every copy in a double disk loss
  (all owners under some member set in effect since the fence lost their
  disks). Admits never lower what is required, and what a worker of I holds
  beyond the requirement is not judged here (invariant 1 is).

  Excused. A lookup at node x that credits I with fewer chunks than required
  stops at chunk k = the answer's prefix. It is excused when every owner x
  reads k's slot from was unreachable from x at some moment from the failure
  detector's window
  (lmcc_cluster_failure_timeout_ms, 2 s) before the lookup was sent until it
  was answered: down (killed, frozen, restarting), back from a disk loss and
  still refilling (its copy is gone), or cut from x (x or the owner
  partitioned, or the one-way cut between them), or x itself down (a node
  that was killed, frozen or restarting has lost its links to every peer, and
  its peers theirs to it, until it rejoins them; a frozen node even takes its
  peers for down on waking, their greetings unread). x itself is never
  unreachable from x unless refilling. Slow links and slow or failing disks
  excuse nothing: reads are hedged and the index lives in memory. The owners
  x reads a slot from follow x's own view of the member set, read from its
  log (`cluster-members ... state=`): a committed view's owners, or while a
  change is joint the previous owners (the new ones still copy); a view x
  held at any moment of the lookup may excuse it. A node back from a disk
  loss starts from the initial member set until its peers tell it more.

  Said unsure. A short answer no unreachable owner excuses is excused when
  it said that its prefix may be short from where it stops: the node's reply
  carries Lmcc-Unsure-From-Tokens (gateway/http_api.hpp) at or below the
  prefix it credited I with. A node writes it when some chunk from there on
  was read only from copies their owners were uncertain of (missed ops; a
  slot gained and not yet copied; a node back empty) or from no owner. What
  this excuses is an answer given mid-repair, not a loss: the uncertainty
  itself is judged elsewhere (a cluster not whole 30 s after a heal fails the
  seed, and every copy must equal the workers' truth at the end). Counted on
  their own ("unsure": excused by the node's word alone) so that a run shows
  how many it had.

  Anything else short is a violation: the seed fails, naming the lookup, the
  node, the prompt, the instance, the chunk, its key, slot and owners, and the
  fence that verified it.

A key's owners are computed as the nodes compute them (cluster/hash.hpp,
ring.cpp, membership.cpp): slot = mix64(key) mod slots; the ring holds 1024
points per configured node (standby nodes included) at fnv1a(id, i); the
owners are the first R members met walking clockwise from the slot's point.
test_availability.py pins this against the C++ tests' values, and
test_owners_live.py against a running cluster's own counts.
"""
from __future__ import annotations

import bisect
import dataclasses
import json
import sys
from dataclasses import dataclass, field

MASK = (1 << 64) - 1
CHUNK = 256


# -- placement, as the nodes compute it ----------------------------------------------------

def mix64(x: int) -> int:
    x &= MASK
    x ^= x >> 30
    x = (x * 0xBF58476D1CE4E5B9) & MASK
    x ^= x >> 27
    x = (x * 0x94D049BB133111EB) & MASK
    x ^= x >> 31
    return x


def fnv1a(*fields) -> int:
    """fnv1a_hasher fed field by field: str with an 8-byte length prefix, int as 8 bytes."""
    h = 0xCBF29CE484222325
    for f in fields:
        data = (len(f.encode()).to_bytes(8, "little") + f.encode()) if isinstance(f, str) else \
            (f & MASK).to_bytes(8, "little")
        for b in data:
            h = ((h ^ b) * 0x100000001B3) & MASK
    return mix64(h)


def slot_of(key: int, slots: int) -> int:
    """A worker's key (Python's int, possibly negative: the wire carries it as
    a 64-bit two's complement) to its slot."""
    return mix64(key & MASK) & (slots - 1)


class Ring:
    """The ring over every configured node id; owners depend on the member set."""

    def __init__(self, ids: list[str], slots: int = 4096, virtual_nodes: int = 1024,
                 replicas: int = 2):
        self.ids = sorted(ids)
        self.slots, self.replicas = slots, replicas
        points = sorted((fnv1a(node, i), n) for n, node in enumerate(self.ids)
                        for i in range(virtual_nodes))
        self.points = [p for p, _ in points]
        self.owner = [n for _, n in points]
        self._pref: dict[int, list[str]] = {}

    def preference(self, slot: int) -> list[str]:
        if slot not in self._pref:
            at = slot * ((1 << 64) // self.slots)
            start = bisect.bisect_left(self.points, at) % len(self.points)
            seen: list[str] = []
            for step in range(len(self.points)):
                node = self.ids[self.owner[(start + step) % len(self.points)]]
                if node not in seen:
                    seen.append(node)
                    if len(seen) == len(self.ids):
                        break
            self._pref[slot] = seen
        return self._pref[slot]

    def owners(self, slot: int, members) -> list[str]:
        """The slot's owners, primary first, when `members` own data."""
        return [n for n in self.preference(slot) if n in members][: self.replicas]

    def slot_counts(self, members) -> dict[str, tuple[int, int]]:
        """(primary, replica) slot counts per member, as /cluster/status reports them."""
        out = {m: [0, 0] for m in members}
        for s in range(self.slots):
            for rank, n in enumerate(self.owners(s, members)):
                out[n][0 if rank == 0 else 1] += 1
        return {m: (p, r) for m, (p, r) in out.items()}


# -- what a lookup credits --------------------------------------------------------------------

def credited(hashes: list[int], held: set[int]) -> int:
    """Leading chunks of a prompt (its chunk hashes) held by one instance."""
    k = 0
    while k < len(hashes) and hashes[k] in held:
        k += 1
    return k


def chunks_of(layout: dict, instance: str) -> int:
    """The chunks a /lookup answer (layout_info) credits an instance with."""
    entry = layout.get(instance)
    return int(entry[1]) // CHUNK if entry else 0


# -- the rule ------------------------------------------------------------------------------

@dataclass
class Lookup:
    seq: int
    node: str
    prompt: int
    sent: float
    answered: float
    required: dict[str, int]
    layout: dict | None      # None: failed
    error: str = ""
    fence: int = 0
    unsure_from: int | None = None  # the reply's Lmcc-Unsure-From-Tokens (tokens)


@dataclass
class Availability:
    """Fed by the runner as the run goes; judge() at the end. Times are
    time.monotonic(); nodes are ids ("n1"); instances are instance ids."""
    ring: Ring
    prompts: list[list[int]]          # each prompt's chunk hashes
    instances: list[str]
    members: list[str]
    window: float = 2.0               # the failure detector's timeout (s)
    fences: list[float] = field(default_factory=list)
    verified: dict[tuple[int, str], int] = field(default_factory=dict)
    touched: set[tuple[str, int]] = field(default_factory=set)
    # (since, member set): each set the runner saw accepted, in order.
    member_history: list[tuple[float, frozenset]] = field(default_factory=list)
    # node -> [(since, state, members)]: the member set it placed slots by, as
    # its log says ("joint" while a change moves slots, then "committed").
    views: dict[str, list[tuple[float, str, frozenset]]] = field(default_factory=dict)
    # [node, kind, start, end]: kind "down" or "empty" (refilling); end None while on.
    outages: list[list] = field(default_factory=list)
    cuts: list[list] = field(default_factory=list)   # [a, b, start, end]: a and b cannot talk
    lookups: list[Lookup] = field(default_factory=list)
    fences_skipped: int = 0
    excused: list[str] = field(default_factory=list)  # judge(): why each excused lookup was

    def __post_init__(self):
        self.member_history = [(float("-inf"), frozenset(self.members))]

    # -- fed by the runner -----------------------------------------------------------

    def fence(self, at: float, answers: dict[str, list[dict]],
              truth: dict[str, set[int]]) -> None:
        """A fence's answers: node -> the layout of each prompt, in order;
        truth: instance -> the keys its workers hold."""
        self.fences.append(at)
        self.verified = {}
        for p, hashes in enumerate(self.prompts):
            for inst in self.instances:
                have = credited(hashes, truth.get(inst, set()))
                for layouts in answers.values():
                    have = min(have, chunks_of(layouts[p], inst))
                self.verified[(p, inst)] = have
        self.touched = set()

    def touch(self, instance: str, keys) -> None:
        """Keys an instance's worker evicted, or held when it restarted."""
        for k in keys:
            self.touched.add((instance, k))

    def members_changed(self, members, at: float) -> None:
        self.member_history.append((at, frozenset(members)))

    def member_sets(self, start: float, end: float) -> list[frozenset]:
        """The member sets that may have placed data from `start` to `end`: the
        one in effect at `start`, the one before it (a change may still be
        moving slots), and every one adopted until `end`."""
        at = max(k for k, (t, _) in enumerate(self.member_history) if t <= start)
        last = max(k for k, (t, _) in enumerate(self.member_history) if t <= end)
        return [ms for _, ms in self.member_history[max(0, at - 1): last + 1]]

    def disks_lost(self, nodes, at: float) -> None:
        """Every copy of the slots all of whose owners (under some member set in
        effect since the fence) are among `nodes` is gone."""
        lost = set(nodes)
        sets = self.member_sets(self.fences[-1] if self.fences else at, at)
        for hashes in self.prompts:
            for key in hashes:
                slot = slot_of(key, self.ring.slots)
                if any(set(self.ring.owners(slot, ms)) <= lost for ms in sets):
                    for inst in self.instances:
                        self.touched.add((inst, key))

    def view(self, node: str, at: float, state: str, members) -> None:
        """From `at` on, `node` places slots by `members` ("joint": a change to
        them still moves slots; "committed"). Before its first view a node
        places by the initial members, committed."""
        self.views.setdefault(node, []).append((at, state, frozenset(members)))
        self.views[node].sort(key=lambda v: v[0])

    def serving(self, node: str, start: float, end: float) -> list[frozenset]:
        """The sets of owners `node` may have read a slot's keys from between
        `start` and `end`, one per view it held: a committed view's owners; a
        joint view's previous owners, which lookups read while the new ones
        copy (only with none of them reachable may a copying one answer, and
        partially)."""
        committed = frozenset(self.members)
        held: list[tuple[str, frozenset, frozenset]] = []
        current = ("committed", committed, committed)
        for at, state, members in self.views.get(node, []):
            before = current[1] if current[0] == "committed" else current[2]
            if at <= start:
                current = (state, members, before)
            elif at <= end:
                held.append((state, members, before))
        return [ms if state == "committed" else prev for state, ms, prev in [current] + held]

    def outage(self, node: str, kind: str, at: float) -> None:
        self.outages.append([node, kind, at, None])

    def outage_over(self, node: str, kind: str, at: float) -> None:
        for o in self.outages:
            if o[0] == node and o[1] == kind and o[3] is None:
                o[3] = at

    def cut(self, a: str, b: str, at: float) -> None:
        self.cuts.append([a, b, at, None])

    def cuts_over(self, at: float) -> None:
        for c in self.cuts:
            if c[3] is None:
                c[3] = at

    def required(self, prompt: int) -> dict[str, int]:
        hashes = self.prompts[prompt]
        out = {}
        for inst in self.instances:
            k = 0
            verified = self.verified.get((prompt, inst), 0)
            while k < verified and (inst, hashes[k]) not in self.touched:
                k += 1
            out[inst] = k
        return out

    def record(self, node: str, prompt: int, sent: float, answered: float, layout: dict | None,
               error: str = "", unsure_from: int | None = None) -> None:
        """One lookup of the workload; what it must credit is taken now."""
        self.lookups.append(Lookup(len(self.lookups), node, prompt, sent, answered,
                                   self.required(prompt), layout, error, len(self.fences) - 1,
                                   unsure_from))

    # -- judged at the end -----------------------------------------------------------

    def unreachable(self, x: str, owner: str, start: float, end: float) -> str:
        """Why `owner` was unreachable from `x` at some moment of [start, end]
        ("" if it never was)."""
        def overlaps(a, b):
            return a <= end and (b is None or b >= start)
        for node, kind, a, b in self.outages:
            if node == owner and overlaps(a, b) and (owner != x or kind == "empty"):
                return f"{owner} {kind}"
            if node == x != owner and kind == "down" and overlaps(a, b):
                return f"{x} itself down"
        if owner != x:
            for p, q, a, b in self.cuts:
                if {p, q} == {x, owner} and overlaps(a, b):
                    return f"{x} and {owner} cut"
        return ""

    def judge(self, when=lambda t: f"{t:.3f}") -> tuple[dict, list[str]]:
        """Counts (answered, failed, complete, incomplete, excused) and the
        violations, each naming its lookup; `when` writes a time."""
        counts = {"answered": 0, "failed": 0, "complete": 0, "incomplete": 0, "excused": 0,
                  "unsure": 0}
        self.excused = []
        failures: list[str] = []
        problems: list[str] = []
        for lk in self.lookups:
            where = (f"lookup {lk.seq} at {when(lk.sent)} to {lk.node} "
                     f"({lk.answered - lk.sent:.3f} s), prompt {lk.prompt}")
            if lk.layout is None:
                counts["failed"] += 1
                failures.append(f"{where}: failed ({lk.error})")
                continue
            counts["answered"] += 1
            short = {inst: (chunks_of(lk.layout, inst), need) for inst, need in lk.required.items()
                     if chunks_of(lk.layout, inst) < need}
            if not short:
                counts["complete"] += 1
                continue
            fence = self.fences[lk.fence]
            sets = self.serving(lk.node, lk.sent, lk.answered)
            unexcused = []
            reasons = []
            for inst, (got, need) in sorted(short.items()):
                key = self.prompts[lk.prompt][got]
                slot = slot_of(key, self.ring.slots)
                # Excused if, by some view the node held meanwhile, every
                # owner it would read the slot from was unreachable from it.
                for ms in sets:
                    owners = self.ring.owners(slot, ms)
                    why = [self.unreachable(lk.node, o, lk.sent - self.window, lk.answered)
                           for o in owners]
                    if all(why):
                        break
                if not all(why) and lk.unsure_from is not None and got * CHUNK >= lk.unsure_from:
                    # A reachable owner, but the node said its answer may be
                    # short from here (every owner it read was uncertain).
                    reasons.append(f"{inst} chunk {got} (the node said unsure from "
                                   f"{lk.unsure_from} tokens)")
                    continue
                reasons.append(f"{inst} chunk {got} ({'; '.join(why)})")
                if not all(why):
                    unexcused.append(
                        f"{where}: instance {inst} credited {got * CHUNK} tokens, "
                        f"{need * CHUNK} required (verified by the fence at {when(fence)});"
                        f" missing chunk {got} key {key} slot {slot}, read from owners "
                        f"{','.join(owners)}, of which reachable from {lk.node}: "
                        + ",".join(o for o, w in zip(owners, why) if not w))
            if unexcused:
                counts["incomplete"] += 1
                problems.extend(unexcused)
            else:
                counts["excused"] += 1
                if any("the node said unsure" in r for r in reasons):
                    counts["unsure"] += 1
                self.excused.append(f"{where}: " + ", ".join(reasons))
        total = counts["answered"] + counts["failed"]
        if counts["failed"] > int(total * 0.001):
            problems = failures + problems
        return counts, problems

    # -- kept beside a seed's logs, judged again ----------------------------------------

    def dumps(self) -> str:
        """Everything judge() reads, as JSON (availability.json in a seed's directory)."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "ring"}
        out["ring"] = {"ids": self.ring.ids, "slots": self.ring.slots,
                       "replicas": self.ring.replicas}
        out["lookups"] = [dataclasses.asdict(lk) for lk in self.lookups]
        out["verified"] = [[p, inst, n] for (p, inst), n in self.verified.items()]
        out["touched"] = sorted(self.touched)
        out["member_history"] = [[t if t > float("-inf") else None, sorted(ms)]
                                 for t, ms in self.member_history]
        out["views"] = {n: [[t, st, sorted(ms)] for t, st, ms in v] for n, v in self.views.items()}
        return json.dumps(out)

    @classmethod
    def loads(cls, text: str) -> "Availability":
        d = json.loads(text)
        a = cls(Ring(**d.pop("ring")), d.pop("prompts"), d.pop("instances"), d.pop("members"),
                window=d.pop("window"))
        a.lookups = [Lookup(**lk) for lk in d.pop("lookups")]
        a.verified = {(p, inst): n for p, inst, n in d.pop("verified")}
        a.touched = {tuple(x) for x in d.pop("touched")}
        a.member_history = [(float("-inf") if t is None else t, frozenset(ms))
                            for t, ms in d.pop("member_history")]
        a.views = {n: [(t, st, frozenset(ms)) for t, st, ms in v]
                   for n, v in d.pop("views").items()}
        for k, v in d.items():
            setattr(a, k, v)
        return a


if __name__ == "__main__":
    # Judges a kept run again: availability.py <seed dir>/availability.json
    counts, problems = Availability.loads(open(sys.argv[1]).read()).judge()
    print(counts)
    print("\n".join(problems))

