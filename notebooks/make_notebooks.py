"""Write the notebooks in this folder from the cells below (no outputs).

Run ``python notebooks/make_notebooks.py`` after editing; commit the .ipynb files it
writes. Each notebook runs live on a GPU with green contexts and falls back to the
results recorded by gcexplore (``gcexplore.load_recorded``) without one. Two
environment variables steer it (the test suite sets them):

* ``GCEXPLORE_QUICK=1``: small sizes and few repetitions when live.
* ``GCEXPLORE_RECORDED=1``: use the recorded results even on a GPU.

The recorded results each notebook needs are listed in its metadata
(``metadata["gcexplore"]["recorded"]``), so the tests can skip with the reason while
they do not exist.
"""

from __future__ import annotations

from pathlib import Path

import nbformat as nbf

HERE = Path(__file__).resolve().parent

KERNELSPEC = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}


def md(text: str):
    return nbf.v4.new_markdown_cell(text.strip("\n"))


def code(text: str, *, tags=()):
    cell = nbf.v4.new_code_cell(text.strip("\n"))
    if tags:
        cell.metadata["tags"] = list(tags)
    return cell


PARAMETERS = code('''
import os

# Parameters. The test suite sets GCEXPLORE_QUICK=1 (small sizes, few repetitions);
# GCEXPLORE_RECORDED=1 shows the recorded results even on a GPU.
QUICK = os.environ.get("GCEXPLORE_QUICK") == "1"
FORCE_RECORDED = os.environ.get("GCEXPLORE_RECORDED") == "1"
REPEATS = 3 if QUICK else 20
''', tags=["parameters"])

DETECT = code('''
import gcexplore
from gcexplore import workloads
from IPython.display import display


def gpu_or_reason():
    """(DeviceInfo, None) when a GPU with green-context streams is here, else (None, why)."""
    if FORCE_RECORDED:
        return None, "GCEXPLORE_RECORDED=1 asks for the recorded results"
    try:
        info = gcexplore.device_info(0)
        info.require("green_context_streams")
        return info, None
    except gcexplore.UnsupportedError as exc:
        return None, str(exc)


def recorded(name):
    """A result recorded by gcexplore on the project's GPU, announced with card and date."""
    df = gcexplore.load_recorded(name)
    print(f"recorded result '{name}': {gcexplore.figure_stamp(df.attrs)}")
    return df


info, why_not = gpu_or_reason()
LIVE = info is not None
if LIVE:
    print(f"LIVE on {info.name}: {info.sm_count} SMs, driver {info.driver_version_str}")
else:
    print(f"No live GPU here ({why_not}).")
    print("Showing results that gcexplore recorded on a real GPU instead; "
          "each one is labelled with its card and date.")
''')


# PyTorch is optional: live PyTorch cells need it with CUDA, else they use recordings.
TORCH_SETUP = '''
try:
    import torch
    HAVE_TORCH = LIVE and torch.cuda.is_available()
except ImportError:
    HAVE_TORCH = False

if HAVE_TORCH:
    n = 2048 if QUICK else 8192
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)'''


def _notebook(cells, recorded: list[str], title: str):
    nb = nbf.v4.new_notebook()
    nb.metadata["kernelspec"] = KERNELSPEC
    nb.metadata["language_info"] = {"name": "python"}
    nb.metadata["gcexplore"] = {"recorded": recorded, "title": title}
    nb.cells = cells
    for i, cell in enumerate(nb.cells):
        cell.id = f"cell-{i:02d}"  # stable ids: regenerating gives a clean diff
    return nb


# --------------------------------------------------------------------------- 01

QUICKSTART = [
    md('''
# gcexplore quickstart

CUDA **green contexts** split a GPU's streaming multiprocessors (SMs) into disjoint
partitions; work launched on a partition's streams runs only on its SMs. This notebook
goes through the basics:

1. what the device allows (its SM count and the partition sizes it can give),
2. a split into partitions, each with its own explicit stream,
3. running work on a partition's stream,
4. PyTorch on a partition,
5. the interactive explorer.

On a machine with a GPU (NVIDIA driver 13.0, R580, or newer) everything runs live. Without one, the
notebook shows results that gcexplore recorded on a real GPU, labelled with the card
and the date.
'''),
    PARAMETERS,
    DETECT,
    md('''
## 1. Device facts

`gcexplore.device_info()` reads the SM count, the smallest partition and the size
granularity from the device's SM resource (never from a table of architectures), and
which green-context features the driver has. `valid_sm_counts()` lists every partition
size the device can give.

Without a GPU we describe the recorded card from its metadata; planning is pure
Python, so `plan_split` and `valid_sm_counts` work the same on any machine.
'''),
    code('''
import math

if LIVE:
    device = info
else:
    sweep_rec = recorded("sweep")
    a = sweep_rec.attrs
    sizes = sorted(int(k) for k in sweep_rec["split_sm_count"].unique())
    drv = a["driver_version"]  # "13.0" as DeviceInfo.metadata() writes it (or 13000)
    if isinstance(drv, str):
        major, minor = (drv.split(".") + ["0"])[:2]
        drv = int(major) * 1000 + int(minor) * 10
    cc = a.get("compute_capability", "0.0")
    cc = tuple(int(x) for x in (cc.split(".") if isinstance(cc, str) else cc))
    # The measured split sizes give the smallest partition and the step between sizes.
    device = gcexplore.DeviceInfo(
        name=a["device_name"], index=int(a.get("device_index", 0)), compute_capability=cc,
        sm_count=int(a["device_sm_count"]), min_partition_size=sizes[0],
        alignment=math.gcd(*sizes), driver_version=int(drv))

print(f"{device.name}: {device.sm_count} SMs, compute capability "
      f"{device.compute_capability[0]}.{device.compute_capability[1]}, driver {device.driver_version_str}")
print(f"smallest partition {device.min_partition_size} SMs, sizes in steps of {device.alignment}")
print("valid partition sizes:", device.valid_sm_counts())
print("driver features:", device.features)
'''),
    md('''
`plan_split` computes, without touching the GPU, what a split will give. The driver
rounds a request up to the granularity, so asking for 66 SMs gets 72; the SMs left over
form the *remainder* partition.
'''),
    code('''
for request in ([66], [24], [8, 16]):
    plan = gcexplore.plan_split(device, request)
    granted = [(g.requested, g.granted) for g in plan.groups]
    print(f"request {request}: (requested, granted) {granted}, remainder {plan.remainder} "
          f"-> layout {plan.label}")
'''),
    md('''
## 2. A split: partitions with explicit streams

`gcexplore.split([24])` makes a 24-SM partition and a remainder partition of the SMs
left over, each a green context with its own non-blocking stream. `sm_ids()` launches
a probe kernel with many blocks on the partition and returns the SM ids (`%smid`) it
actually ran on. Live, we check that the partitions are disjoint; without a GPU we
read the same from the recorded per-block SM occupancy.
'''),
    code('''
if LIVE:
    with gcexplore.split([24]) as parts:
        print("layout", parts.label)
        for p in parts.all:
            ids = p.sm_ids()
            print(f"{p.name:>9}: {p.sm_count:3d} SMs granted, ran on {len(ids)} distinct SMs")
        print("disjoint:", parts[0].sm_ids().isdisjoint(parts.remainder.sm_ids()))
else:
    occ = recorded("occupancy")
    sm_sets = occ.groupby("partition")["sm_id"].agg(frozenset)
    for name, ids in sm_sets.items():
        print(f"{name:>9}: blocks ran on {len(ids)} distinct SMs")
    names = list(sm_sets.index)
    print("disjoint:", all(sm_sets[x].isdisjoint(sm_sets[y])
                          for i, x in enumerate(names) for y in names[i + 1:]))
'''),
    md('''
## 3. Work on a partition's stream

A workload is any callable invoked as `fn(stream=...)`. Every gcexplore call that
schedules GPU work takes the stream explicitly; nothing falls back to a default
stream. The built-in `compute` (FMA chains) and `memory` (STREAM triad) kernels
declare their FLOPs and bytes, so the profiler reports throughput in units.

`profile_overlap` runs the pair on a split in four modes: each *alone* on its
partition, both *concurrently* on their partitions, *sequentially* on the whole
device, and on two plain *streams* of the whole device.
'''),
    code('''
if LIVE:
    # Small arrays in quick mode; the defaults take about 1 ms each on an H100.
    pair = {"compute": workloads.compute(iters=256 if QUICK else 1536),
            "memory": workloads.memory(n=(1 << 24) if QUICK else (1 << 28))}
    try:
        pair["compute"]()  # no stream: refused, never a silent default stream
    except TypeError as exc:
        print("TypeError:", exc)
    with gcexplore.split([24]) as parts:
        pair["compute"](stream=parts[0].stream)
        parts[0].stream.sync()
    overlap = gcexplore.profile_overlap(pair, [24], repeats=REPEATS)
else:
    overlap = sweep_rec[sweep_rec["split_sm_count"] == 24]
    if overlap.empty:  # the recording may not have measured 24; take its best split
        best = gcexplore.best_split(sweep_rec)
        overlap = sweep_rec[sweep_rec["layout"] == best["layout"]]
    overlap.attrs = dict(sweep_rec.attrs)

summary = gcexplore.summarize(overlap)
display(summary[["layout", "mode", "workload", "partition", "sm_count", "median_ms",
                 "p10_ms", "p90_ms", "makespan_median_ms", "slowdown_vs_alone"]])
gcexplore.plot_throughput(overlap)
'''),
    md('''
## 4. PyTorch on a partition

`partition.torch_stream()` wraps the partition's stream as a PyTorch stream
(`torch.cuda.get_stream_from_external`); everything issued under it runs on the
partition's SMs only. A bf16 matmul on 8 SMs therefore takes many times longer than
on the remainder. Without a GPU (or without PyTorch) we read the same from the
recorded PyTorch sweep: the matmul timed alone on partitions of several sizes.
'''),
    code(TORCH_SETUP + '''
    with gcexplore.split([8]) as parts:
        for p in (parts[0], parts.remainder):
            s = p.torch_stream()
            with torch.cuda.stream(s):
                a @ b  # warm-up
                start = torch.cuda.Event(enable_timing=True)
                end = torch.cuda.Event(enable_timing=True)
                start.record(s)
                for _ in range(REPEATS):
                    a @ b
                end.record(s)
            end.synchronize()
            print(f"{p.name:>9} ({p.sm_count:3d} SMs): {n}^3 bf16 matmul "
                  f"{start.elapsed_time(end) / REPEATS:.3f} ms")
else:
    tsweep = recorded("torch_sweep")
    alone = tsweep[tsweep["mode"] == "alone"]
    for w, g in alone.groupby("workload"):
        med = g.groupby("sm_count")["duration_ms"].median()
        lo, hi = med.index.min(), med.index.max()
        print(f"{w:>8} alone: {med[lo]:.3f} ms on {lo} SMs, {med[hi]:.3f} ms on {hi} SMs "
              f"({med[lo] / med[hi]:.1f}x)")
'''),
    md('''
## 5. The explorer

Sliders that stop only on the sizes the device can give choose the split; the
throughput plot, the SM occupancy and the summary table are redrawn in place. Live,
press **Run** to measure the chosen split; over recorded results the slider moves
over the measured splits.
'''),
    code('''
from gcexplore.widgets import Explorer

if LIVE:
    explorer = gcexplore.widgets.explore(pair, repeats=REPEATS)
    explorer.run()  # measure the starting split once, so there is something to see
else:
    explorer = Explorer.from_results(sweep_rec, occupancy=occ)
explorer
'''),
]


# --------------------------------------------------------------------------- 02

SWEEPING = [
    md('''
# Sweeping SM splits: where overlap pays, and where it does not

Give workload A *k* SMs and workload B the rest, run them at once, and compare with
running them one after the other (*sequential*) or on two ordinary streams of the
whole device (*streams*). `gcexplore.sweep` does this for every valid *k*, creating
each partitioning once, and `best_split` picks the *k* with the lowest median
makespan. Three cases:

1. the built-in compute-bound / memory-bound pair;
2. a PyTorch 8192³ bf16 matmul next to a sigmoid over 512 MiB, where overlap does
   **not** pay;
3. a DeepEP-style side partition of 24 SMs next to 108 SMs of compute.

Every number below is measured, live or recorded by gcexplore on the card named
above each table and figure.
'''),
    PARAMETERS,
    DETECT,
    code('''
def layout_table(summary):
    """One row per layout: the median makespans and the derived comparisons."""
    conc = summary[summary["mode"] == "concurrent"].drop_duplicates("layout")
    per = summary.drop_duplicates(["layout", "mode"]).pivot(
        index="layout", columns="mode", values="makespan_median_ms")
    out = conc.set_index("layout")[["split_sm_count", "speedup_vs_sequential",
                                    "speedup_vs_streams", "lower_bound_ms", "efficiency"]]
    out = out.join(per.add_suffix("_ms"))
    return out.sort_values("split_sm_count")


def sizes_for(n_quick=4):
    """Every valid size (or a few, spread out, in quick mode) of the first partition."""
    valid = [k for k in info.valid_sm_counts() if k < info.sm_count]
    return valid[:: max(1, len(valid) // n_quick)] if QUICK else None
'''),
    md('''
## 1. The built-in pair

`compute` is FMA chains: its time falls in proportion to the SMs it gets. `memory` is
a STREAM triad: a few dozen SMs already saturate the memory system, so it barely
slows down on fewer SMs. That asymmetry is what a split can exploit.
'''),
    code('''
if LIVE:
    pair = {"compute": workloads.compute(iters=256 if QUICK else 1536),
            "memory": workloads.memory(n=(1 << 24) if QUICK else (1 << 28))}
    sweep_df = gcexplore.sweep(pair, sm_counts=sizes_for(), repeats=REPEATS)
    for w in pair.values():
        w.close()
else:
    sweep_df = recorded("sweep")

summary = gcexplore.summarize(sweep_df)
best = gcexplore.best_split(sweep_df)
print(f"best split {best['layout']}: concurrent {best['concurrent_ms']:.3f} ms, "
      f"sequential {best['sequential_ms']:.3f} ms, streams {best['streams_ms']:.3f} ms, "
      f"lower bound {best['lower_bound_ms']:.3f} ms")
print(f"speedup vs sequential {best['speedup_vs_sequential']:.2f}x, "
      f"vs streams {best['speedup_vs_streams']:.2f}x, efficiency {best['efficiency']:.0%}")
display(layout_table(summary).round(3))
gcexplore.plot_sweep(sweep_df, summary=summary)
'''),
    md('''
How to read it: the blue curve is the median makespan of the concurrent run at each
split, with its p10/p90 band. The flat lines are the two baselines, which do not
depend on the split because they run on the whole device. The **lower bound** is what
no layout can beat: the slowest workload alone on the whole device, or the declared
work at the device's best measured rates, whichever is larger. *Efficiency* is the
lower bound over the concurrent makespan.

The throughput of each workload at the best split, per mode:
'''),
    code('''
gcexplore.plot_throughput(sweep_df, layout=best["layout"])
'''),
    md('''
The sweep view: choose a split to see its throughput and summary (over recorded
results, or live after a sweep).
'''),
    code('''
from gcexplore.widgets import SweepExplorer

SweepExplorer.from_results(sweep_df)
'''),
    md('''
## 2. PyTorch: 8192³ bf16 matmul + sigmoid over 512 MiB

A large bf16 matmul keeps every SM busy by itself, and the sigmoid is a short
memory-bound pass. One after the other, the pair costs the matmul's time plus the
sigmoid's; on two plain streams the hardware scheduler already lets the sigmoid's
blocks take SMs as the matmul's blocks finish. A split instead takes SMs away from the
matmul for the whole run, and a small partition cannot pull the sigmoid's bandwidth:
give either workload too few SMs and the pair is many times *slower* than running one
after the other, and even at the best split it only about matches the sequential
time, because the matmul alone already nearly fills the whole run. Overlap is not
free; the sweep shows where it pays and by how much.
'''),
    code(TORCH_SETUP + '''
    c = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
    x = torch.randn((16 if QUICK else 512) << 18, device="cuda")  # 512 MiB of fp32
    y = torch.empty_like(x)
    # The same placement as the recorded torch_sweep: matmul first, sigmoid on the rest.
    torch_pair = {
        "matmul": gcexplore.from_torch(lambda: torch.matmul(a, b, out=c), name="matmul",
                                       flops=2.0 * n ** 3),
        "sigmoid": gcexplore.from_torch(lambda: torch.sigmoid(x, out=y), name="sigmoid",
                                        bytes=2.0 * x.nbytes),
    }
    torch_df = gcexplore.sweep(torch_pair, sm_counts=sizes_for(), repeats=REPEATS)
else:
    torch_df = recorded("torch_sweep")

torch_summary = gcexplore.summarize(torch_df)
table = layout_table(torch_summary)
worst = table["concurrent_ms"].idxmax()
tbest = gcexplore.best_split(torch_df)
print(f"sequential {tbest['sequential_ms']:.3f} ms, two plain streams {tbest['streams_ms']:.3f} ms")
print(f"worst split {worst}: {table.loc[worst, 'concurrent_ms']:.3f} ms "
      f"({table.loc[worst, 'speedup_vs_sequential']:.2f}x of sequential)")
print(f"best split {tbest['layout']}: {tbest['concurrent_ms']:.3f} ms "
      f"({tbest['speedup_vs_sequential']:.2f}x of sequential)")
display(table.round(3))
gcexplore.plot_sweep(torch_df, summary=torch_summary)
'''),
    md('''
Each workload's slowdown next to the other, against running alone on the same
partition, tells *why*: a slowdown well above 1 means the partitions still compete
for something they share (memory bandwidth, L2), not for SMs.
'''),
    code('''
conc = torch_summary[torch_summary["mode"] == "concurrent"]
display(conc.pivot(index="split_sm_count", columns="workload",
                   values="slowdown_vs_alone").round(2))
'''),
    md('''
## 3. A DeepEP-style side partition: 24 SMs next to 108

DeepSeek-V3 runs its expert-parallel communication kernels on 24 of the H100's 132
SMs and compute on the other 108, so communication never waits for compute to
release SMs. Here a memory-bound kernel (communication is bandwidth-bound too) holds
the small side partition and compute takes the remainder. Live we measure exactly
24 + 108. The recorded sweep put compute on the first partition, whose sizes are
multiples of 8, so the memory kernel's side there is 132 - k SMs: we take the
recorded layout whose side is nearest to 24, and say which.
'''),
    code('''
if LIVE:
    pair = {"memory": workloads.memory(n=(1 << 24) if QUICK else (1 << 28)),
            "compute": workloads.compute(iters=256 if QUICK else 1536)}
    deepep = gcexplore.profile_overlap(pair, [info.granted(24)], repeats=REPEATS)
    for w in pair.values():
        w.close()
else:
    conc = sweep_df[(sweep_df["mode"] == "concurrent") & (sweep_df["workload"] == "memory")]
    side = conc.drop_duplicates("layout").set_index("layout")["sm_count"]
    nearest = (side - 24).abs().sort_values(kind="stable").index[0]
    deepep = sweep_df[sweep_df["layout"] == nearest]
    deepep.attrs = dict(sweep_df.attrs)

placed = deepep[deepep["mode"] == "concurrent"].drop_duplicates("partition")
print("layout", deepep["layout"].iloc[0], "|", ", ".join(
    f"{r.partition} ({r.sm_count} SMs): {r.workload}" for r in placed.itertuples()))
dsum = gcexplore.summarize(deepep)
display(dsum[["mode", "workload", "partition", "sm_count", "median_ms",
              "makespan_median_ms", "slowdown_vs_alone", "speedup_vs_sequential"]].round(3))
gcexplore.plot_throughput(deepep)
'''),
    md('''
The memory-bound side keeps most of its whole-device speed on a small fraction of the
SMs (compare its *concurrent* time with its *sequential* time on the whole device),
while compute loses only the SMs it gave away. That is why a bandwidth-bound side job is the case where a
fixed small partition pays.
'''),
]


# --------------------------------------------------------------------------- 03

ISOLATION = [
    md('''
# SM isolation: what green contexts isolate, and what they do not

A GPU is more than its SMs. A green context is a CUDA context bound to a **subset of
the SMs**: the thread blocks of kernels launched on its streams are scheduled only on
those SMs. That is the one resource it partitions. Everything the SMs share stays
shared:

| resource | partitioned by green contexts? |
|---|---|
| SMs (and what lives in them: registers, shared memory, L1) | **yes**: each block runs on an SM of its partition |
| L2 cache | no: one L2 for the whole GPU |
| memory (HBM) bandwidth | no: one memory system, shared by all partitions |
| device memory | no: allocations are visible from every context of the device |
| power and clocks | no: one board power budget |
| work in the primary context (ordinary streams) | no: it still runs on **every** SM |

So a partition protects a kernel from being *crowded out of SMs* by another kernel:
its latency no longer depends on when the other kernel's blocks release SMs. It does
not protect it from a neighbour that saturates memory bandwidth or evicts its L2
lines. This notebook shows each point on measurements.

Facts measured on the project's H100 (132 SMs, driver 13.0): partitions come in
multiples of 8 SMs; a 24-SM partition's blocks ran on exactly 24 distinct SMs,
disjoint from the 108 of the remainder; while green contexts existed, a kernel on the
primary context still ran on all 132 SMs.
'''),
    PARAMETERS,
    DETECT,
    md('''
## 1. `%smid` maps: which SM ran each block

The built-in kernels can record, per thread block, the SM it ran on (`%smid`) and its
start and end (`%globaltimer`). Run concurrently on a 24-SM partition and the 108-SM
remainder, every block lands inside its own partition, and no SM appears in both.
'''),
    code('''
if LIVE:
    pair = {"compute": workloads.compute(iters=256 if QUICK else 1536),
            "memory": workloads.memory(n=(1 << 24) if QUICK else (1 << 28))}
    occ = gcexplore.occupancy(pair, [24])
else:
    occ = recorded("occupancy")

sm_sets = occ.groupby("partition")["sm_id"].agg(frozenset)
for name, ids in sm_sets.items():
    print(f"{name:>9}: {len(ids):3d} distinct SMs, blocks of "
          f"{', '.join(sorted(set(occ.loc[occ['partition'] == name, 'workload'])))}")
names = list(sm_sets.index)
shared = set().union(*(sm_sets[x] & sm_sets[y] for i, x in enumerate(names) for y in names[i + 1:]))
print("SMs used by more than one partition:", sorted(shared) or "none")
gcexplore.plot_occupancy(occ)
'''),
    md('''
Each partition's SM ids need not be contiguous: the driver picks which physical SMs
(grouped by the GPU's clusters) make up a partition. The busy fraction per SM shows
how evenly each workload used its SMs:
'''),
    code('''
busy = gcexplore.sm_busy(occ)
display(busy.groupby(["partition", "workload"])["busy_fraction"].describe()[["count", "mean", "min", "max"]].round(2))
'''),
    md('''
## 2. The primary context still runs everywhere

Creating green contexts does not fence off the rest of the GPU. A kernel launched on
an ordinary stream of the primary context — which is what every library does unless
told otherwise — still spreads over **all** SMs, including those of your partitions.
Isolation needs *complementary* partitions: put the background work on the remainder
partition, not on the default context.
'''),
    code('''
if LIVE:
    with gcexplore.split([24]) as parts:
        with gcexplore.whole_device() as whole:
            everywhere = whole.sm_ids()
        print(f"a kernel on the primary context ran on {len(everywhere)} of {info.sm_count} SMs, "
              f"{len(everywhere & parts[0].sm_ids())} of them inside the 24-SM partition")
else:
    print("This needs a live GPU (nothing recorded to show); on the project's H100 a probe "
          "kernel on the primary context ran on all 132 SMs while a 24-SM green context existed.")
'''),
    md('''
## 3. A latency-critical kernel with and without its own partition

NVIDIA's green-context sample, as a measurement: a short critical kernel is launched
repeatedly while a long background kernel runs. We time each critical launch from
launch to completion in three scenarios:

* **alone**: the critical kernel by itself on the whole device;
* **streams**: next to the background, both on ordinary streams of the whole device:
  the background's blocks occupy every SM, and the critical blocks wait for SMs to
  free up;
* **partitioned**: the critical kernel on its own small partition, the background on
  the complementary remainder.
'''),
    code('''
if LIVE:
    iso = gcexplore.isolation("latency", "compute", split=16, repeats=REPEATS,
                              launches=5 if QUICK else 20)
else:
    iso = recorded("isolation")

iso_summary = gcexplore.summarize(iso)
display(iso_summary[["scenario", "role", "workload", "sm_count", "median_ms", "p10_ms",
                     "p90_ms", "slowdown_vs_alone"]].round(4))
crit = iso_summary[iso_summary["role"] == "critical"].set_index("scenario")["slowdown_vs_alone"]
print(f"critical latency next to the background: {crit['streams']:.2f}x of alone on plain streams, "
      f"{crit['partitioned']:.2f}x in its own partition")
gcexplore.plot_isolation(iso)
'''),
    md('''
What the partition removes is the wait for SMs held by the background's blocks.
Whatever stays between *partitioned* and *alone* comes from what it does not
isolate: the background still shares the L2 cache and the memory system with the
critical kernel, which also has fewer SMs than the whole device. The price is paid
by the background: it runs on the SMs left over, so its *partitioned* time is longer
than its time *alone* on the whole device.

## 4. Shared memory bandwidth and L2

SMs are partitioned, bandwidth is not. A memory-bound kernel reaches most of the
device's memory bandwidth with a fraction of its SMs, so two memory-bound kernels on
disjoint partitions still slow each other down: they split one memory system between
them, whatever the split of SMs.
'''),
    code('''
if LIVE:
    n = (1 << 24) if QUICK else (1 << 28)
    mem_pair = {"triad_a": workloads.memory(n=n, name="triad_a"),
                "triad_b": workloads.memory(n=n, name="triad_b")}
    half = [k for k in info.valid_sm_counts() if k <= info.sm_count // 2][-1]
    mem = gcexplore.profile_overlap(mem_pair, [half], repeats=REPEATS)
    msum = gcexplore.summarize(mem)
    conc = msum[msum["mode"].isin(["alone", "concurrent"])]
    display(conc[["layout", "mode", "workload", "sm_count", "median_ms", "bandwidth_gbs",
                  "slowdown_vs_alone"]].round(3))
    for w in list(mem_pair.values()) + list(pair.values()):
        w.close()
    gcexplore.plot_throughput(mem)
else:
    scal = recorded("scaling")
    ssum = gcexplore.summarize(scal)
    # The memory-bound built-ins (both kinds of built-in declare bytes, so go by name),
    # else the workload with the highest bandwidth.
    mem_names = [w for w in scal["workload"].unique() if w in ("memory", "copy")] or \\
        [ssum.loc[ssum["bandwidth_gbs"].idxmax(), "workload"]]
    for w in mem_names:
        g = ssum[ssum["workload"] == w].sort_values("sm_count")
        top = g["bandwidth_gbs"].max()
        k = int(g.loc[g["bandwidth_gbs"] >= 0.9 * top, "sm_count"].min())
        print(f"{w}: {top:.0f} GB/s at best; 90% of that already with {k} of "
              f"{int(scal.attrs['device_sm_count'])} SMs")
    display(gcexplore.plot_scaling(scal))
'''),
    md('''
Read the scaling curve (recorded) or the two-triad run (live) the same way: the
memory-bound kernel's bandwidth saturates long before it has all SMs, so giving two
such kernels disjoint halves of the SMs does not give each the bandwidth it had
alone. The same holds for the L2 cache: a neighbour streaming through gigabytes evicts
the lines a small kernel would otherwise find in L2. Green contexts make SM
placement predictable; they are not a quality-of-service guarantee for memory.

**Summary**

* Green contexts partition SMs, exactly and disjointly (section 1).
* They do nothing about work that stays in the primary context (section 2): isolate by
  giving *every* workload a partition.
* A partition protects a latency-critical kernel from waiting for SMs (section 3).
* L2 and memory bandwidth remain shared (section 4): memory-bound neighbours still
  interfere.
'''),
]


NOTEBOOKS = {
    "01_quickstart.ipynb": (QUICKSTART, ["sweep", "occupancy", "torch_sweep"], "gcexplore quickstart"),
    "02_sweeping_sm_splits.ipynb": (SWEEPING, ["sweep", "torch_sweep"], "Sweeping SM splits"),
    "03_sm_isolation.ipynb": (ISOLATION, ["occupancy", "isolation", "scaling"], "SM isolation"),
}


def main() -> None:
    for filename, (cells, recorded, title) in NOTEBOOKS.items():
        nb = _notebook(cells, recorded, title)
        nbf.validate(nb)
        path = HERE / filename
        nbf.write(nb, path)
        print("wrote", path.relative_to(HERE.parent))


if __name__ == "__main__":
    main()
