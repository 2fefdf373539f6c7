#!/usr/bin/env python3
"""Tables (and gnuplot data) from conduit-memory-bench's JSON (--benchmark_out, with
--benchmark_repetitions): the median of the repetitions and their min..max per cell.

  report.py host  HOST.json  [--dat DIR]   allocation and buffer tables; DIR/alloc.dat for the plot
  report.py guest GUEST.json               registration table

Figures: "cpu" = CPU ns per operation (Google Benchmark's cpu_time divided by the operations
one iteration does; for Threads(n) runs it is the average over the threads), robust on a
loaded machine because time spent descheduled is not counted; "wall" = wall-clock
throughput in million operations per second over all threads (items_per_second with
UseRealTime), which is what a contended allocator and a cross-thread hand-off cost but also
absorbs the machine's load.
"""
import json
import statistics
import sys
from collections import defaultdict

ALLOCS = ["pool", "malloc", "mimalloc"]
SIZES = [64, 4096, 65536, 1 << 20]
BATCH = 32


def size_name(n):
    if n >= 1 << 20:
        return f"{n >> 20} MiB"
    if n >= 1 << 10:
        return f"{n >> 10} KiB"
    return f"{n} B"


def load(path):
    with open(path) as f:
        doc = json.load(f)
    runs = defaultdict(list)
    for b in doc["benchmarks"]:
        if b.get("run_type") != "iteration" or b.get("error_occurred"):
            continue
        runs[b["run_name"]].append(b)
    return doc.get("context", {}), runs


def stat(values, fmt):
    if not values:
        return "n/a"
    return f"{fmt(statistics.median(values))} ({fmt(min(values))}..{fmt(max(values))})"


def f_ns(v):
    return f"{v:.0f}" if v >= 100 else f"{v:.1f}"


def f_m(v):
    return f"{v:.2f}" if v < 10 else f"{v:.1f}"


def f_us(v):
    return f"{v:.1f}" if v < 100 else f"{v:.0f}"


def cpu_per_op(reps, ops):
    return [r["cpu_time"] / ops for r in reps]  # time_unit ns (the default)


def wall_mops(reps):
    return [r["items_per_second"] / 1e6 for r in reps if "items_per_second" in r]


def host(path, dat_dir):
    ctx, runs = load(path)
    print(f"host: {ctx.get('host_name', '?')}, kernel {ctx.get('kernel', '?')}, "
          f"{ctx.get('num_cpus', '?')} CPUs, load average {ctx.get('load_avg', '?')}, "
          f"mimalloc {ctx.get('mimalloc', '?')}, malloc from {ctx.get('malloc_provider', '?')}, "
          f"nr_hugepages {ctx.get('nr_hugepages', '?')}")
    print()
    print("Allocate + touch one byte + free, per pair: cpu ns, median (min..max) of the repetitions;")
    print("cross-thread (batches of 32 allocated on one thread, freed on another): ns per allocation and")
    print("per free (cycle counter around the allocator calls only), and wall M pairs/s")
    cols = [("pair 1T", "BM_Alloc_Pair", 1, 1), ("pair 2T", "BM_Alloc_Pair", 2, 1),
            ("pair 4T", "BM_Alloc_Pair", 4, 1), ("batch32 1T", "BM_Alloc_Batch", 1, BATCH),
            ("batch32 2T", "BM_Alloc_Batch", 2, BATCH)]
    header = (["size", "allocator"] + [c[0] + " cpu ns" for c in cols] +
              ["cross alloc ns", "cross free ns", "cross wall Mpairs/s"])
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    plot = []
    for size in SIZES:
        row_plot = {}
        for a in ALLOCS:
            cells = []
            for _, name, threads, ops in cols:
                reps = runs.get(f"{name}/{a}/{size}/real_time/threads:{threads}", [])
                vals = cpu_per_op(reps, ops)
                cells.append(stat(vals, f_ns))
                row_plot[(name, threads, a)] = statistics.median(vals) if vals else float("nan")
            xreps = runs.get(f"BM_Alloc_CrossThread/{a}/{size}/real_time", [])
            xa = [r["alloc_ns"] for r in xreps if "alloc_ns" in r]
            xf = [r["free_ns"] for r in xreps if "free_ns" in r]
            cells += [stat(xa, f_ns), stat(xf, f_ns), stat(wall_mops(xreps), f_m)]
            pair = [r["alloc_ns"] + r["free_ns"] for r in xreps if "alloc_ns" in r and "free_ns" in r]
            row_plot[("cross", 1, a)] = statistics.median(pair) if pair else float("nan")
            print(f"| {size_name(size)} | {a} | " + " | ".join(cells) + " |")
        plot.append((size, row_plot))
    print()
    print("Buffers: cpu ns per operation (chains: per slice), median (min..max)")
    print("| benchmark | cpu ns |")
    print("|---|---|")
    order = ["BM_Slice_Copy", "BM_Slice_Sub"]
    for base in ["BM_Chain_AppendConsume", "BM_Chain_Reused", "BM_Chain_ToIovec", "BM_Chain_ToSg"]:
        order += [f"{base}/{n}" for n in (1, 8, 64)]
    order += ["BM_Memcpy/4096", "BM_Memcpy/65536"]
    for name in order:
        ops = int(name.rsplit("/", 1)[1]) if name.startswith("BM_Chain") else 1
        print(f"| {name} | {stat(cpu_per_op(runs.get(name, []), ops), f_ns)} |")
    if dat_dir:
        with open(f"{dat_dir}/alloc.dat", "w") as f:
            f.write("# size label  pair1T(pool malloc mimalloc)  batch1T(...)  cross-thread alloc+free ns(...)\n")
            for size, p in plot:
                vals = []
                for key in [("BM_Alloc_Pair", 1), ("BM_Alloc_Batch", 1), ("cross", 1)]:
                    vals += [p[(key[0], key[1], a)] for a in ALLOCS]
                f.write(f'{size} "{size_name(size)}" ' + " ".join(f"{v:.3f}" for v in vals) + "\n")


def guest(path):
    ctx, runs = load(path)
    print(f"guest: kernel {ctx.get('kernel', '?')}, {ctx.get('num_cpus', '?')} vCPUs (TCG)")
    print()
    print("Registration of one range: wall us per operation, median (min..max) of the repetitions")
    kinds = [("ibv_reg_mr+dereg", "BM_Reg_RegDereg"), ("cache hit", "BM_Reg_CacheHit"),
             ("cache slice", "BM_Reg_CacheSlice"), ("cache miss+invalidate", "BM_Reg_CacheMiss")]
    header = ["size"] + [k[0] + " us" for k in kinds] + ["reg+dereg / hit"]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for size in [4 << 10, 64 << 10, 1 << 20, 2 << 20, 16 << 20]:
        cells, med = [], {}
        for _, name in kinds:
            vals = [r["real_time"] / 1e3 for r in runs.get(f"{name}/{size}", [])]
            cells.append(stat(vals, f_us))
            med[name] = statistics.median(vals) if vals else None
        ratio = "n/a"
        if med["BM_Reg_RegDereg"] and med["BM_Reg_CacheHit"]:
            ratio = f"{med['BM_Reg_RegDereg'] / med['BM_Reg_CacheHit']:.0f}x"
        print(f"| {size_name(size)} | " + " | ".join(cells) + f" | {ratio} |")
    print()
    print("Starting a child that execs /bin/true with N MiB touched in the parent: wall ms, median (min..max)")
    print("| memory | fork + exec + wait ms, registered | fork + exec + wait ms, not registered | posix_spawn + wait ms, registered |")
    print("|---|---|---|---|")
    for mib in (0, 16, 256):
        cells = []
        for name in ("BM_Reg_ForkExec", "BM_Reg_ForkExecUnregistered", "BM_Reg_Spawn"):
            vals = [r["real_time"] / 1e6 for r in runs.get(f"{name}/{mib}/real_time", [])]
            cells.append(stat(vals, lambda v: f"{v:.2f}" if v < 10 else f"{v:.0f}"))
        print(f"| {mib} MiB | " + " | ".join(cells) + " |")


def main(argv):
    if len(argv) >= 3 and argv[1] == "host":
        dat = argv[argv.index("--dat") + 1] if "--dat" in argv else None
        host(argv[2], dat)
    elif len(argv) == 3 and argv[1] == "guest":
        guest(argv[2])
    else:
        sys.stderr.write(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
