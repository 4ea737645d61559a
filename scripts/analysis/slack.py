#!/usr/bin/env python3
"""Where the GPU and cache gaps sit: the measurements behind docs/BOUNDS.md, "What is still
loose", recomputed from a run directory's frames (independently of the Rust code).

Usage: python3 scripts/analysis/slack.py [RUN_DIR]   (default runs/demo; needs pyarrow and
PyYAML, which scripts/test installs). Prints, per workload:
- how much of K, the cores and the RAM the included attempts use over [0, D];
- per schedule (best_gpu, fifo): makespan, T_run (time something runs), the GPU union, Z
  (running but no request pending), S1 (total request time), the mean depth S1/union, the
  second-moment quantity S1^2 / integral(n^2), and the RAM-energy floor of T_run;
- in best_cache, per class of blob (task: <= 10 users, repository: 11-99, global: >= 100),
  the GiB-h its blobs are open against their per-blob floors (the longest user, the users'
  duration / K and their RAM energy), and the repository layers' summed windows against
  their floors in seconds.
"""
import os
import sys

import pyarrow.parquet as pq
import yaml

RUN = sys.argv[1] if len(sys.argv) > 1 else "runs/demo"


def frame(name, columns=None):
    return pq.read_table(os.path.join(RUN, name + ".parquet"), columns=columns).to_pydict()


def union(intervals):
    total, cur = 0.0, None
    for a, b in sorted(intervals):
        if cur is None or a > cur[1]:
            if cur is not None:
                total += cur[1] - cur[0]
            cur = [a, b]
        else:
            cur[1] = max(cur[1], b)
    return total + (cur[1] - cur[0] if cur else 0.0)


def depth_moments(intervals):
    """(union, integral of n, integral of n^2) of the in-flight count n(t)."""
    events = sorted([(a, 1) for a, _ in intervals] + [(b, -1) for _, b in intervals])
    n, last, u, i1, i2 = 0, None, 0.0, 0.0, 0.0
    for t, dn in events:
        if last is not None and n > 0:
            dt = t - last
            u, i1, i2 = u + dt, i1 + n * dt, i2 + n * n * dt
        n, last = n + dn, t
    return u, i1, i2


cfg = yaml.safe_load(open(os.path.join(RUN, "pipeline.yaml")))
att = frame("attempts", ["workload", "attempt_id", "included", "duration_s", "quota_cores", "quota_gib"])
req = frame("requests", ["workload", "attempt_id", "start_offset_s", "end_offset_s"])
sch = frame("schedules")
ab = frame("attempt_blobs")
blobs = frame("blobs")
gib = {d: b / 2**30 for d, b in zip(blobs["digest"], blobs["compressed_bytes"])}

for w in cfg["search"]["order"]:
    caps = cfg["workloads"][w]["replay"]
    inc = {
        a: (d, c, m)
        for ww, a, i, d, c, m in zip(att["workload"], att["attempt_id"], att["included"], att["duration_s"], att["quota_cores"], att["quota_gib"])
        if ww == w and i
    }
    starts = {}
    for ww, s, a, x, y in zip(sch["workload"], sch["schedule"], sch["attempt_id"], sch["start_s"], sch["end_s"]):
        if ww == w:
            starts.setdefault(s, {})[a] = (x, y)
    fifo = starts["fifo"]
    D = max(y for _, y in fifo.values())
    e_k = sum(d for d, _, _ in inc.values())
    e_c = sum(d * c for d, c, _ in inc.values())
    e_m = sum(d * m for d, _, m in inc.values())
    print(f"{w}: {len(inc)} included, D = {D:.0f} s; use of [0, D]: K {e_k / caps['concurrency'] / D:.1%}, "
          f"cores {e_c / caps['cpu_cores'] / D:.1%}, RAM {e_m / caps['ram_gib'] / D:.1%}")
    ram_floor = e_m / caps["ram_gib"]
    reqs = [(a, s, e) for ww, a, s, e in zip(req["workload"], req["attempt_id"], req["start_offset_s"], req["end_offset_s"]) if ww == w and a in inc]
    for name in ("best_gpu", "fifo"):
        st = starts[name]
        shifted = [(st[a][0] + s, st[a][0] + e) for a, s, e in reqs]
        u, i1, i2 = depth_moments(shifted)
        t_run = union(list(st.values()))
        mk = max(y for _, y in st.values())
        print(f"  {name}: makespan {mk:,.0f} s, T_run {t_run:,.0f} s, union {u:,.0f} s, Z {t_run - u:,.0f} s, "
              f"S1 {i1 / 3600:.1f} h, mean depth {i1 / u:.2f}, S1^2/int n^2 {i1 * i1 / i2 / 3600:.2f} h, "
              f"RAM-energy floor of T_run {ram_floor:,.0f} s")
    users = {}
    for ww, a, d in zip(ab["workload"], ab["attempt_id"], ab["digest"]):
        if ww == w and a in inc:
            users.setdefault(d, []).append(a)
    st = starts["best_cache"]
    windows = floors = 0.0
    by_class = {}
    for d, u in users.items():
        win = max(st[a][1] for a in u) - min(st[a][0] for a in u)
        # The per-blob floor: the longest user, and the K and RAM energy of the users.
        floor = max(
            max(inc[a][0] for a in u),
            sum(inc[a][0] for a in u) / caps["concurrency"],
            sum(inc[a][0] * inc[a][2] for a in u) / caps["ram_gib"],
        )
        kind = "task (<= 10 users)" if len(u) <= 10 else "repository (11-99)" if len(u) < 100 else "global (>= 100)"
        w_h, f_h = by_class.get(kind, (0.0, 0.0))
        by_class[kind] = (w_h + win * gib[d] / 3600, f_h + floor * gib[d] / 3600)
        if kind.startswith("repository"):
            windows, floors = windows + win, floors + floor
    print(f"  best_cache, repository layers: windows {windows:,.0f} s, per-blob floors {floors:,.0f} s")
    for kind, (w_h, f_h) in sorted(by_class.items()):
        print(f"    {kind}: {w_h:.2f} GiB-h open, {f_h:.2f} GiB-h of per-blob floors, {w_h - f_h:.2f} above")
