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
import serving_cells

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


def _notebook(cells, recorded: list[str], title: str, optional: list[str] = ()):
    nb = nbf.v4.new_notebook()
    nb.metadata["kernelspec"] = KERNELSPEC
    nb.metadata["language_info"] = {"name": "python"}
    # recorded: needed to run without a GPU; optional: shown when present, else the
    # notebook says it is missing
    nb.metadata["gcexplore"] = {"recorded": recorded, "optional": list(optional), "title": title}
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
sweep_rec = None if LIVE else recorded("sweep")
device = info if LIVE else gcexplore.DeviceInfo.from_result(sweep_rec)  # the recorded card

print(f"{device.name}: {device.sm_count} SMs, compute capability "
      f"{device.compute_capability[0]}.{device.compute_capability[1]}, driver {device.driver_version_str}")
print(f"smallest partition {device.min_partition_size} SMs, sizes in steps of {device.alignment}")
print("valid partition sizes:", device.valid_sm_counts())
print("driver features:", device.features)
'''),
    md('''
`plan_split` computes, without touching the GPU, what a split will give. The driver
rounds a request up to the granularity, so asking for 66 SMs gets 72; the SMs left over
form the *remainder* partition. The largest partition one can ask for leaves a
remainder *smaller than the minimum partition size*: the size rules apply to what is
requested, and the remainder is simply every SM that is left, so it can hold fewer SMs
than any partition one could request (the last cell line says how many on this device).
'''),
    code('''
largest = device.valid_sm_counts()[-1]
for request in ([66], [24], [8, 16], [largest]):
    plan = gcexplore.plan_split(device, request)
    granted = [(g.requested, g.granted) for g in plan.groups]
    print(f"request {request}: (requested, granted) {granted}, remainder {plan.remainder} "
          f"-> layout {plan.label}")
tail = gcexplore.plan_split(device, [largest]).remainder
print(f"{largest}+{tail}: the remainder of {tail} SMs is "
      + (f"smaller than the minimum partition of {device.min_partition_size}: it is what is left "
         "after the largest allowed request, not a size one could ask for"
         if tail < device.min_partition_size else f"no smaller than the minimum partition ({device.min_partition_size})"))
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
device, and on two plain *streams* of the whole device. In the table,
`makespan_median_ms` is the time from a repetition's start to its last workload's end;
on the *alone* rows that is the solo runs one after the other, each on its own
partition: a reference for the per-workload times, not a way to run the pair (the line
under the table says what it adds up).
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
from gcexplore.views.report import alone_sentence

print(alone_sentence(summary, overlap["layout"].iloc[0]))
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
    md("""
# Sweeping SM splits: where overlap pays, and where it does not

Give workload A *k* SMs and workload B the rest, run them at once, and compare with
running them one after the other (*sequential*) or on two ordinary streams of the
whole device (*streams*). `gcexplore.sweep` does this for every valid *k*, creating
each partitioning once, and `best_split` picks the *k* with the lowest median
makespan. Three cases:

1. the built-in compute-bound / memory-bound pair;
2. a PyTorch 8192³ bf16 matmul next to a sigmoid over 512 MiB: the matmul alone nearly
   fills the whole run, so whether a split pays at all is for the sweep to say;
3. a side partition of the size used for communication in DeepSeek-V3 and DeepEP, next
   to compute on the rest.

Every number below is measured, live or recorded by gcexplore on the card named above
each table and figure, and every sentence that states a result is printed by the code
from that result: the text in between explains how to read them, never what they are.
"""),
    PARAMETERS,
    DETECT,
    code("""
from gcexplore.views import report


def sizes_for(n_quick=4):
    \"\"\"Every valid size (or a few, spread out, in quick mode) of the first partition.\"\"\"
    valid = [k for k in info.valid_sm_counts() if k < info.sm_count]
    return valid[:: max(1, len(valid) // n_quick)] if QUICK else None
"""),
    md("""
## 1. The built-in pair

`compute` is FMA chains: its time falls in proportion to the SMs it gets. `memory` is
a STREAM triad: a few dozen SMs already saturate the memory system, so it barely
slows down on fewer SMs. That asymmetry is what a split can exploit.

The table has one row per measured split. Its last row is the largest first partition
the device allows; the remainder left beside it can be *smaller than the minimum
partition size* (on a 132-SM Hopper, 128+4: partitions are requested in multiples of
8, and the 4 SMs left over are all that remain, not a size one could ask for).
"""),
    code("""
if LIVE:
    pair = {"compute": workloads.compute(iters=256 if QUICK else 1536),
            "memory": workloads.memory(n=(1 << 24) if QUICK else (1 << 28))}
    sweep_df = gcexplore.sweep(pair, sm_counts=sizes_for(), repeats=REPEATS)
    for w in pair.values():
        w.close()
else:
    sweep_df = recorded("sweep")

summary = gcexplore.summarize(sweep_df)
table = gcexplore.layout_table(summary)
display(table.round(3))
last = table.iloc[-1]
rest = int(last["layout"].split("+")[-1])
print(f"last layout {last['layout']}: the remainder holds {rest} SMs"
      + (f", fewer than the smallest partition one can request ({int(table['split_sm_count'].min())})"
         if rest < table["split_sm_count"].min() else ""))
print(report.verdict(sweep_df))
gcexplore.plot_sweep(sweep_df, summary=summary)
"""),
    md("""
How to read it. The blue curve is the median concurrent makespan at each split, with
p10-p90 bars. The flat lines are the two baselines, which do not depend on the split
because they run on the whole device. Three derived quantities explain the curve
(definitions in docs/guide.md):

* the **interference-free makespan** of a split (diamonds): the slowest workload's time
  *alone* on its own partition of that split, i.e. what the split would give if the
  partitions shared nothing;
* **interference** = concurrent makespan / interference-free makespan: what sharing
  memory bandwidth, L2 and power costs at that split;
* **split loss** = interference-free makespan / lower bound: what giving each workload
  fewer SMs than its best costs;
* the **lower bound**: the largest, over the workloads, of each one's fastest solo time
  at any measured size (the whole device included). Every workload must finish, and a
  neighbour never makes it faster, so no split of this run can beat it (up to the
  spread of the repetitions). *Efficiency* = lower bound / concurrent makespan =
  1 / (interference x split loss).

Where the diamonds sit on the curve, the partitions cost each other nothing and all of
the gap to the bound is split loss; where the curve rises above them, the workloads
interfere through what they share. The numbers for this pair:
"""),
    code("""
best = gcexplore.best_split(sweep_df)
worst_interference = table.loc[table["interference"].idxmax()]
print(f"interference ranges from {table['interference'].min():.3f}x to {table['interference'].max():.3f}x "
      f"(largest at {worst_interference['layout']}); split loss from {table['split_loss'].min():.2f}x "
      f"to {table['split_loss'].max():.2f}x")
print(f"at the best split {best['layout']}: split loss {best['split_loss']:.3f}x, "
      f"interference {best['interference']:.3f}x, efficiency {best['efficiency']:.0%}")
print("the throughput of each workload at the best split, per mode:")
gcexplore.plot_throughput(sweep_df, layout=best["layout"])
"""),
    md("""
The sweep view: choose a split to see its throughput and summary (over recorded
results, or live after a sweep).
"""),
    code("""
from gcexplore.widgets import SweepExplorer

SweepExplorer.from_results(sweep_df)
"""),
    md("""
## 2. PyTorch: 8192³ bf16 matmul + sigmoid over 512 MiB

A large bf16 matmul keeps every SM busy by itself, and the sigmoid is a short
memory-bound pass. One after the other, the pair costs the matmul's time plus the
sigmoid's; on two plain streams the hardware scheduler lets the sigmoid's blocks take
SMs as the matmul's blocks finish. A split instead takes SMs away from the matmul for
the whole run, and a small partition cannot pull the sigmoid's bandwidth. Whether any
split beats the two baselines, and by how much, is what the cell below prints from the
measurement.
"""),
    code(TORCH_SETUP + """
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
ttable = gcexplore.layout_table(torch_summary)
facts = gcexplore.analysis.verdict_facts(torch_df)
worst = facts["worst"]
print(f"worst split {worst['layout']}: {worst['concurrent_ms']:.3f} ms, "
      f"{worst['speedup_vs_sequential']:.2f}x of sequential")
print(report.verdict(torch_df))
b = gcexplore.analysis.baseline_choice(torch_df, gcexplore.best_split(torch_df)["layout"])
print(f"the sequential baseline itself ranges over {b['low_ms']:.3f}-{b['high_ms']:.3f} ms between the "
      f"{b['layouts']} layouts (it runs on the whole device, so that range is drift during the run). The "
      f"guide's speedup_vs_sequential divides by the sequential run measured next to each split: at "
      f"{b['layout']} that is {b['next_ms']:.3f} ms, " + ("the highest of them" if b["rank"] == 1 else
      f"number {b['rank']} from the highest") + f", giving {b['speedup_next']:.2f}x; against the median "
      f"of all sequential repetitions ({b['median_ms']:.3f} ms, the line in the figure) it is "
      f"{b['speedup_median']:.2f}x")
display(ttable.round(3))
gcexplore.plot_sweep(torch_df, summary=torch_summary)
"""),
    md("""
Each workload's slowdown next to the other, against running alone on the same
partition, tells *why*: a slowdown well above 1 means the partitions still compete for
something they share (memory bandwidth, L2), not for SMs.
"""),
    code("""
conc = torch_summary[torch_summary["mode"] == "concurrent"]
slow = conc.pivot(index="split_sm_count", columns="workload", values="slowdown_vs_alone")
display(slow.round(2))
top = conc.loc[conc["slowdown_vs_alone"].idxmax()]
print(f"largest slowdown next to the other workload: {top['workload']} at {top['layout']}, "
      f"{top['slowdown_vs_alone']:.2f}x its time alone on the same {top['sm_count']} SMs")
"""),
    md("""
## 3. A communication-sized side partition: 24 SMs next to 108

Two numbers circulate for DeepSeek-V3's communication SMs; they come from different
places:

* **20 of 132**: DeepSeek-V3's technical report dedicates 20 of the H800's 132 SMs to
  cross-node communication (all-to-all dispatch and combine), compute runs on the rest;
* **24**: the example setting in DeepEP's README (`Buffer.set_num_sms(24)`), the
  library DeepSeek released for those kernels; it is a setting, tuned per cluster.

Green contexts on this Hopper come in multiples of 8, so 20 is not a partition size
(it rounds up to 24); we use 24 + 108. A memory-bound kernel (communication is
bandwidth-bound too) holds the side partition and compute takes the rest. Live we
measure exactly that. The recorded sweep put compute on the first partition, so the
memory kernel's side there is 132 - k SMs: we take the recorded layout whose side is
nearest to 24, and the cell says which.
"""),
    code("""
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
med = dsum.set_index(["mode", "workload"])["median_ms"]
sm = dsum.set_index(["mode", "workload"])["sm_count"]
for w in ("memory", "compute"):
    print(f"{w}: {med[('concurrent', w)]:.3f} ms on {sm[('concurrent', w)]} SMs next to the other, "
          f"{med[('sequential', w)]:.3f} ms alone on all {sm[('sequential', w)]} SMs "
          f"({med[('concurrent', w)] / med[('sequential', w)]:.2f}x)")
print(report.alone_sentence(dsum, deepep["layout"].iloc[0]))
print(report.verdict(deepep).splitlines()[-1])
gcexplore.plot_throughput(deepep)
"""),
    md("""
Read the two ratios printed above together: a workload whose time barely grows on a
small fraction of the SMs (a bandwidth-bound one) is the kind a fixed small partition
suits, while one whose time grows in proportion to the SMs it gave away pays for the
split in full. The verdict line says which way it went for this pair, from the
measurement.
"""),
    md("""
## 4. What events cannot see: a kernel trace of the PyTorch pair at 24+108

CUDA events time a stream, not a kernel's time on the SMs. On plain streams a
workload's event span starts when its stream reaches it, so it includes any wait for
SMs held by the other workload. A CUPTI kernel trace (`trace=True`) has each kernel's
start and end on the GPU's clock and the green context it ran in. The recorded trace
below (matmul + sigmoid at 24+108, all four modes) gives per workload the event span,
the busy span (first kernel start to last kernel end) and the wait between them. The
table gives medians; where the repetitions of one workload fall into separate clusters
(`gcexplore.analysis.trace_modes`), the lines under it name each cluster, since a
median would speak for one and hide the other, and say which cluster the repetition
drawn in the timeline belongs to.
"""),
    code("""
traced_df, trace = recorded("trace_overlap"), recorded("trace")
tsum = gcexplore.summarize(traced_df, trace=trace)
display(tsum[["mode", "workload", "sm_count", "event_median_ms", "busy_span_median_ms",
              "wait_median_ms", "kernels_per_rep"]].round(3))
# A median speaks for one cluster of repetitions; where the waits fall into two, name both.
waits = gcexplore.analysis.trace_modes(trace, traced_df, also=("event_ms", "busy_span_ms"))
for (workload, n), g in waits[waits["mode"] == "streams"].groupby(["workload", "clusters"], sort=False):
    parts = [f"in {r.count} of {r.reps_total} repetitions it waited {r.median:.3f} ms before its first "
             f"kernel ran (event span {r.event_ms_median:.3f} ms, busy span {r.busy_span_ms_median:.3f} ms)"
             for r in g.itertuples()]
    print(f"plain streams, {workload}: " + ("; ".join(parts) if n == 1 else
          "the wait is bimodal: " + "; ".join(parts)))
REP = 0
for r in gcexplore.analysis.rep_mode(waits[waits["mode"] == "streams"], REP).itertuples():
    if r.clusters > 1:
        print(f"the timeline below shows repetition {REP}: there {r.workload} is in the mode that waited "
              f"{r.median:.3f} ms ({r.count} of {r.reps_total} repetitions)")
gcexplore.plot_timeline(trace, rep=REP)
"""),
    md("""
Why a small partition slows the matmul so much: cuBLAS sizes its grid for the whole
device. The SMs each kernel can keep busy follow from its grid, block, registers and
shared memory (the occupancy calculator's rules); these are estimates, not
measurements, and the figure says so.
"""),
    code("""
est = gcexplore.estimate_occupancy(trace)
mm = est[(est["workload"] == "matmul") & (est["mode"] == "concurrent")].iloc[0]
k = trace[(trace["name"] == mm["name"]) & (trace["mode"] == "concurrent")].iloc[0]
print(f"{mm['name']}: grid {k['grid_x']} x {k['grid_y']} = {mm['blocks']} blocks in clusters of "
      f"{mm['cluster_size']}, {mm['threads_per_block']} threads and {k['registers_per_thread']} registers "
      f"each, {k['dynamic_shared_bytes'] / 1024:.0f} KiB of shared memory: {mm['blocks_per_sm']} block per SM "
      f"(limited by {mm['limited_by']})")
print(f"CUPTI's max_active_clusters is {k['max_active_clusters']}: {k['max_active_clusters'] * mm['cluster_size']} "
      f"blocks at once on the whole device ({trace.attrs['device_sm_count']} SMs), so the grid is one wave there; "
      f"on the {mm['sm_count']}-SM partition it takes {mm['waves']:.0f} waves")
gcexplore.plot_sm_usage(trace)
"""),
    md("""
## 5. Predicting the curve before measuring the pair

Each workload's solo profile (`gcexplore.solo_profile`: its time alone on every
partition size, its declared DRAM bytes, the card's shared bandwidth) is measured once and
serves every pair it joins. `gcexplore.predict` puts two profiles together: each
workload's solo time at its partition size (split loss), slowed where the two together
ask DRAM for more than the card gives (interference). Here the profiles come from the
recorded scaling run, and the prediction is checked against the recorded sweep.
"""),
    code("""
from gcexplore.prediction.model import profile_from

scal = recorded("scaling")
peak = float(gcexplore.summarize(scal).query("workload == 'memory'")["bandwidth_gbs"].max())
profiles = profile_from(scal, shared_bandwidth_gbs=peak)
pred = gcexplore.predict(profiles, ["compute", "memory"])
measured = recorded("sweep")
f = gcexplore.prediction_facts(pred, measured)
print(f"predicted from solo profiles: median |error| {f['median_abs_error']:.1%} over {f['layouts']} layouts "
      f"(worst {f['max_abs_error']:.1%} at {f['worst_layout']}); {f['inside_strict']:.0%} of the measured medians "
      f"inside the predicted intervals ({f['inside']:.0%} of the measured intervals meet them)")
print(f"predicted best {f['predicted_best']} measured {f['predicted_best_measured_ms']:.3f} ms, "
      f"{f['best_gap']:+.1%} against the measured best {f['measured_best']} ({f['measured_best_ms']:.3f} ms)")
gcexplore.plot_predict(pred, measured)
"""),
    md("""
## 6. Why 24 more SMs bought nothing

Kernels pick their grids from the card, not from the partition they run on. cuBLAS's persistent
GEMMs on a 132-SM H200 launch 132 CTAs of one CTA per SM whatever the partition: on 120 SMs that is
two waves, the second 12 CTAs long, and 4096^3 took as long on 96 SMs as on 120. A scaling curve
shows it as a plateau: sizes whose time does not fall as SMs grow. `gcexplore.fit_table` finds the
plateaus (a size is on one unless it is faster than the plateau's first size beyond their combined
intervals) and says which SMs buy nothing; `gcexplore.partition_fit` says, per kernel and partition,
how many waves its grid runs, how full the last is, and whether the grid was sized for the card.
Live, this times a 4096^3 bf16 matmul on partitions around 120 SMs with a kernel trace; without a GPU
it reads the recorded scaling run and the recorded trace.
"""),
    code("""
try:
    import torch
    FIT_LIVE = LIVE and torch.cuda.is_available()
except ImportError:
    FIT_LIVE = False
if FIT_LIVE:
    m = 4096
    fa, fb = (torch.randn(m, m, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    fc = torch.empty(m, m, device="cuda", dtype=torch.bfloat16)
    gemm = workloads.from_torch(lambda: torch.matmul(fa, fb, out=fc), name="matmul4096", flops=2.0 * m ** 3)
    fit_sizes = [96, 120] if QUICK else [64, 96, 104, 112, 120, 128]
    fit_scal, fit_trace = gcexplore.scaling(gemm, [s for s in fit_sizes if s < info.sm_count],
                                            repeats=REPEATS, progress=False, trace=True)
else:
    fit_scal, fit_trace = recorded("scaling"), None
table = gcexplore.fit_table(fit_scal, fit_trace)
display(table[["workload", "sm_count", "median_ms", "low_ms", "high_ms", "plateau_start_sm", "wasted_sms",
               "ctas", "waves"]].round(4))
for hint in table.attrs["hints"] or ["no plateau: every larger size was faster"]:
    print(hint)
gcexplore.plot_partition_fit(fit_scal, fit_trace)
"""),
    md("""
The same question per kernel, over the recorded trace of the matmul + sigmoid pair: the matmul's grid
is sized for the card, so on its 24-SM partition it runs several waves; the sigmoid's 131,072 blocks
fill any partition. `summarize(..., trace=trace)` carries the sentences in `attrs["fit_notes"]`.
"""),
    code("""
fit = gcexplore.partition_fit(trace)
display(fit[["workload", "partition", "sm_count", "ctas", "cluster_size", "blocks_per_sm", "resident_ctas",
             "waves", "tail_fill", "idle_sm_share", "same_waves_sm", "wasted_sms", "sized_for_card"]].round(3))
for r in fit[fit["multi_wave"] == True].itertuples():  # noqa: E712 (a column of booleans and None)
    print(f"{r.workload} on {r.partition} ({r.sm_count} SMs): {r.ctas} CTAs, {r.resident_ctas} at once, "
          f"{r.waves} waves, the last {r.tail_fill:.0%} full"
          + ("; a grid sized for the card" if r.sized_for_card else ""))
for note in gcexplore.summarize(traced_df, trace=trace).attrs["fit_notes"]:
    print(note)
"""),
]


# --------------------------------------------------------------------------- 03

ISOLATION = [
    md("""
# SM isolation: what green contexts isolate, and what they do not

A GPU is more than its SMs. A green context is a CUDA context bound to a **subset of
the SMs**: the thread blocks of kernels launched on its streams are scheduled only on
those SMs. That is the one resource it partitions; what the SMs share stays shared:

| resource | partitioned by green contexts? | shown in |
|---|---|---|
| SMs (and what lives in them: registers, shared memory, L1) | yes | section 1 |
| work in the primary context (ordinary streams) | no: it still runs on every SM | section 2 |
| memory (HBM) bandwidth | no: one memory system | section 4 |
| L2 cache | no: one L2 for the whole GPU | section 5 |
| device memory, power and clocks | no | (not measured here) |

Each row is a claim; each section below shows it with a measurement, live on a GPU or
recorded by gcexplore on the project's GPU (labelled with card and date). Where a
recording is not in this installation yet and no GPU is here, the section says so
instead of asserting anything.
"""),
    PARAMETERS,
    DETECT,
    code("""
def recorded_if_present(name):
    \"\"\"A recorded result if this installation has it, else None and a line saying how to get it.\"\"\"
    if name in gcexplore.results.recorded_names():
        return recorded(name)
    print(f"recorded result '{name}' is not in this installation yet; it is recorded on a GPU with "
          f"python3 bench/record.py gcexplore/data --only {name}. Without it (and without a GPU) "
          "this section shows no measurement.")
    return None


shown = {}  # claim -> the sentence printed from its measurement (for the summary)
"""),
    md("""
## 1. `%smid` maps: which SM ran each block

The built-in kernels can record, per thread block, the SM it ran on (`%smid`) and its
start and end (`%globaltimer`). Run concurrently on a 24-SM partition and the remainder;
the cell counts the distinct SMs of each partition and the SMs that ran blocks of both.
"""),
    code("""
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
both = set().union(*(sm_sets[x] & sm_sets[y] for i, x in enumerate(names) for y in names[i + 1:]))
shown["SMs"] = (f"{' and '.join(f'{len(sm_sets[n])} ({n})' for n in names)} distinct SMs; "
                f"{len(both)} SMs ran blocks of more than one partition")
print(shown["SMs"])
gcexplore.plot_occupancy(occ)
"""),
    md("""
Each partition's SM ids need not be contiguous: the driver picks which physical SMs
(grouped by the GPU's clusters) make up a partition. How busy each workload kept its
SMs: `gcexplore.sm_busy`'s `busy_fraction` is an SM's busy time over the *whole run*
(the first block of either workload to the last), so a workload that finishes early
has a small fraction on every SM however evenly it used them. The table gives both
shares: of the whole run (`of_run_*`) and of the workload's own span (`of_own_*`).
"""),
    code("""
shares = gcexplore.analysis.busy_shares(occ)
display(shares.round(3))
for r in shares.itertuples():
    print(f"{r.workload} on {r.partition} ({r.sms} SMs): busy {r.of_run_mean:.0%} of the whole "
          f"{r.run_span_ms:.2f} ms run on average (the busy_fraction of sm_busy), {r.of_own_mean:.0%} of its own "
          f"{r.own_span_ms:.2f} ms span (from {r.of_own_min:.0%} to {r.of_own_max:.0%} across its SMs)")
"""),
    md("""
## 2. The primary context still runs everywhere

Creating green contexts does not fence off the rest of the GPU. The cell probes the SM
ids that a kernel on an ordinary stream of the primary context (what every library
uses unless told otherwise) runs on *while* a 24-SM green context exists, and how many
of them lie inside that partition.
"""),
    code("""
if LIVE:
    with gcexplore.split([24]) as parts:
        with gcexplore.whole_device() as whole:
            probes = {"p0": parts[0].sm_ids(), "remainder": parts.remainder.sm_ids(), "device": whole.sm_ids()}
    total = info.sm_count
else:
    prim = recorded_if_present("primary_sms")
    probes = None if prim is None else prim.groupby("partition")["sm_id"].agg(frozenset).to_dict()
    total = None if prim is None else int(prim.attrs["device_sm_count"])
if probes is not None:
    shown["primary"] = (f"a kernel on the primary context ran on {len(probes['device'])} of {total} SMs "
                        f"while the split existed, {len(probes['device'] & probes['p0'])} of them inside the "
                        f"{len(probes['p0'])}-SM partition")
    print(shown["primary"])
"""),
    md("""
So isolation needs *complementary* partitions: put the background work on the
remainder partition, not on the default context.

## 3. A latency-critical kernel with and without its own partition

NVIDIA's green-context sample, as a measurement: a short critical kernel is launched
repeatedly while a long background kernel runs. We time each critical launch from
launch to completion in three scenarios:

* **alone**: the critical kernel by itself on the whole device;
* **streams**: next to the background, both on ordinary streams of the whole device;
* **partitioned**: the critical kernel on its own small partition, the background on
  the complementary remainder.
"""),
    code("""
if LIVE:
    iso = gcexplore.isolation("latency", "compute", split=16, repeats=REPEATS,
                              launches=5 if QUICK else 20)
else:
    iso = recorded("isolation")

iso_summary = gcexplore.summarize(iso)
display(iso_summary[["scenario", "role", "workload", "sm_count", "median_ms", "p10_ms",
                     "p90_ms", "slowdown_vs_alone"]].round(4))
by = iso_summary.set_index(["role", "scenario"])
crit, bg = by.loc["critical"], by.loc["background"]
shown["latency"] = (f"critical latency next to the background: {crit.loc['streams', 'slowdown_vs_alone']:.3g}x "
                    f"of alone on plain streams, {crit.loc['partitioned', 'slowdown_vs_alone']:.3g}x on its own "
                    f"{int(crit.loc['partitioned', 'sm_count'])}-SM partition")
print(shown["latency"])
print(f"the background pays: {bg.loc['partitioned', 'median_ms']:.3f} ms per launch on the "
      f"{int(bg.loc['partitioned', 'sm_count'])} SMs left to it, against {bg.loc['alone', 'median_ms']:.3f} ms "
      f"alone on all {int(bg.loc['alone', 'sm_count'])} ({bg.loc['partitioned', 'slowdown_vs_alone']:.2f}x)")
gcexplore.plot_isolation(iso)
"""),
    md("""
What a partition removes is the wait for SMs held by the background's blocks. Whatever
stays between *partitioned* and *alone* comes from what it does not isolate (L2, memory
bandwidth) and from the critical kernel having fewer SMs than the whole device.

## 4. Memory bandwidth is shared

Two copies of the memory-bound STREAM triad run on *disjoint* partitions (64 and 68
SMs): first each alone on its partition, then both at once. If partitions isolated
bandwidth, each would keep its solo rate.
"""),
    code("""
if LIVE:
    n = (1 << 24) if QUICK else (1 << 28)
    mem_pair = {"triad_a": workloads.memory(n=n, name="triad_a"),
                "triad_b": workloads.memory(n=n, name="triad_b")}
    half = [k for k in info.valid_sm_counts() if k <= info.sm_count // 2][-1]
    bw = gcexplore.profile_overlap(mem_pair, [half], repeats=REPEATS,
                                   modes=("alone", "concurrent", "sequential"))
    for w in mem_pair.values():
        w.close()
else:
    bw = recorded_if_present("bandwidth_sharing")
if bw is not None:
    bsum = gcexplore.summarize(bw)
    display(bsum[bsum["mode"] != "sequential"][["layout", "mode", "workload", "sm_count", "median_ms",
                                                 "bandwidth_gbs", "slowdown_vs_alone"]].round(3))
    rate = bsum.set_index(["mode", "workload"])["bandwidth_gbs"]
    ws = list(dict.fromkeys(bsum["workload"]))
    solo = ", ".join(f"{rate[('alone', w)]:,.0f}" for w in ws)
    both = ", ".join(f"{rate[('concurrent', w)]:,.0f}" for w in ws)
    total = sum(rate[("concurrent", w)] for w in ws)
    shown["bandwidth"] = (f"alone on their partitions the triads reach {solo} GB/s; side by side on "
                          f"disjoint partitions {both} GB/s ({total:,.0f} GB/s together)")
    print(shown["bandwidth"])
    display(gcexplore.plot_throughput(bw))
"""),
    md("""
The same sharing, sample by sample: CUPTI's PM sampler reads device-wide counters
every 20 µs while two memory kernels run, one on 24 SMs and one on the 108-SM
remainder, first each alone, then together. The SM counter follows the partitions;
what the DRAM counter does together, against the larger of the two alone, is what the
cell prints (their sum says nothing: two loads over 50% of peak always sum past it).
"""),
    code("""
pm_run = None
if LIVE:
    try:
        pm_run = gcexplore.dram_timeline({"m24": "memory", "m108": "memory"}, [24], repeats=2 if QUICK else 3)
    except (gcexplore.UnsupportedError, gcexplore.PmSamplingError) as e:
        print(f"PM sampling is not available here ({e}); showing the recorded run if present")
if pm_run is not None:
    pm_samples, pm_trace = pm_run.samples, pm_run.trace
else:
    pm_samples = recorded_if_present("pm")
    pm_trace = recorded_if_present("pm_trace") if pm_samples is not None else None
if pm_samples is not None and pm_trace is not None:
    pm_sum = gcexplore.dram_summary(pm_samples, pm_trace)
    med = pm_sum.groupby(["mode", "workload"])[["dram_pct", "sm_active_pct"]].median()
    alone = med.loc["alone"]
    together = med.loc["concurrent"].loc[[w for w in med.loc["concurrent"].index if "+" in w][0]]
    solo = " and ".join(f"{w} {r.dram_pct:.0f}% (SMs active {r.sm_active_pct:.0f}%)"
                        for w, r in alone.iterrows() if "+" not in w)
    h = gcexplore.analysis.dram_headline(med.reset_index())
    what = {"no more than one alone": (f"no more than {h['top']} alone (within {gcexplore.analysis.pm.DRAM_SAME_POINTS:g} "
                                       "points): the second kernel added no DRAM throughput"),
            "adds up": "the sum of the two alone: DRAM had room for both",
            "more than one alone, less than both": f"{h['added']:.0f} points over {h['top']} alone, short of "
                                                   "their sum: both drew on one DRAM"}[h["verdict"]]
    shown["bandwidth over time"] = (f"sampled every {pm_samples.attrs.get('interval_us', 20):g} µs (medians over "
                                    f"{pm_sum['rep'].nunique()} repetitions), each memory kernel alone drew {solo} "
                                    f"of DRAM peak; together {together.dram_pct:.0f}% with "
                                    f"{together.sm_active_pct:.0f}% of the SMs active: {what}")
    print(shown["bandwidth over time"])
    display(gcexplore.plot_dram_timeline(pm_samples, pm_trace))
"""),
    md("""
## 5. The L2 cache is shared

The same triad, made to pass 50 times over a small working set without flushing L2
between repetitions: a set that fits in L2 is served from it, faster than DRAM allows,
provided each launch has enough work: every launch costs a fixed overhead the kernel
does not see (the *launch gap*, measured with every run: an event-timed launch minus
the kernel's own span, a few µs), so on the smallest sets the time per launch is that
overhead, not the memory traffic. The cell compares each set's time per launch with the
gap and says which sets it limits.
Pairs of such triads, alone and side by side on disjoint partitions, at working sets
from a few MiB up: a pair whose sets fit in L2 alone but not together loses the L2
hits when it runs concurrently, though no SM is shared.
"""),
    code("""
import pandas as pd


def l2_pair(mib, passes=50):
    \"\"\"Two triads that each pass `passes` times over `mib` MiB per call.\"\"\"
    n = max(8192, (mib << 20) // 12 // 8192 * 8192)
    inner = {x: workloads.memory(n=n, name=f"triad_{x}_inner") for x in "ab"}

    def wl(x):
        def fn(*, stream):
            for _ in range(passes):
                inner[x](stream=stream)
        return gcexplore.Workload(f"triad_{x}", fn, bytes=inner[x].bytes * passes, device=inner[x].device)
    return {f"triad_{x}": wl(x) for x in "ab"}, inner, 12 * n / 2**20


if LIVE:
    runs, mib_of = [], {}
    for mib in ((8, 48) if QUICK else (4, 8, 16, 24, 32, 48, 64)):
        l2p, inner, actual = l2_pair(mib, passes=10 if QUICK else 50)
        r = gcexplore.profile_overlap(l2p, [64], repeats=REPEATS, l2_flush=False,
                                      modes=("alone", "concurrent", "sequential"))
        for w in inner.values():
            w.close()
        mib_of[str(r["run_id"].iloc[0])] = actual
        runs.append(r)
    l2 = pd.concat(runs, ignore_index=True)
    l2.attrs = dict(runs[0].attrs, working_set_mib=mib_of, passes_per_call=10 if QUICK else 50)
else:
    l2 = recorded_if_present("l2_sharing")
if l2 is not None:
    ls = gcexplore.summarize(l2)
    ls["working_set_mib"] = ls["run_id"].map({k: float(v) for k, v in l2.attrs["working_set_mib"].items()})
    per = (ls[ls["mode"].isin(["alone", "concurrent"])]
           .groupby(["working_set_mib", "mode"])["bandwidth_gbs"].mean().unstack("mode"))
    per["concurrent / alone"] = per["concurrent"] / per["alone"]
    display(per.round(2))
    launches = gcexplore.analysis.launch_limits(ls, passes=int(l2.attrs["passes_per_call"]),
                                                launch_gap_us=float(l2.attrs["launch_gap_us"]))
    bound = launches[launches["launch_bound"]]
    if not bound.empty:
        shown["L2 launch"] = (", ".join(f"at {w:.1f} MiB a launch takes {r.us_per_launch:.2f} µs "
                                                 f"({r.gaps:.2f}x the {r.launch_gap_us:.2f} µs launch gap)"
                                                 for w, r in bound.iterrows())
                              + ": the time per launch is about the launch overhead, so these sets measure "
                              "launching, not the memory system, and are left out of the L2 comparison below")
        print(shown["L2 launch"])
    per = per[~per.index.isin(bound.index)]
    dram = per["alone"].iloc[-1]  # the largest set: served from DRAM
    fits = per[per["alone"] > 1.2 * dram]
    if fits.empty:
        shown["L2"] = f"no working set ran faster alone than the largest one ({dram:,.0f} GB/s): no L2 effect measured"
    else:
        w = fits["concurrent / alone"].idxmin()
        shown["L2"] = (f"at {w:.1f} MiB each, a triad alone runs at {per.loc[w, 'alone']:,.0f} GB/s "
                       f"({per.loc[w, 'alone'] / dram:.1f}x the {dram:,.0f} GB/s of the largest set: its data "
                       f"stay in L2); side by side on disjoint SMs ({2 * w:.1f} MiB together) each gets "
                       f"{per.loc[w, 'concurrent']:,.0f} GB/s ({per.loc[w, 'concurrent / alone']:.2f}x of alone)")
    print(shown["L2"])
"""),
    md("""
**Summary**, printed from the measurements above (a claim whose measurement is not
here is listed as not shown):
"""),
    code("""
claims = {"SMs": "Green contexts partition SMs (section 1)",
          "primary": "They do nothing about work in the primary context (section 2)",
          "latency": "A partition protects a latency-critical kernel from waiting for SMs (section 3)",
          "bandwidth": "Memory bandwidth stays shared (section 4)",
          "bandwidth over time": "Over time, SM activity follows the partitions, DRAM throughput is shared (section 4)",
          "L2": "The L2 cache stays shared (section 5)"}
for key, claim in claims.items():
    print(f"* {claim}: {shown.get(key, 'not shown here: needs a GPU or the recorded result')}")
"""),
]

# --------------------------------------------------------------------------- 04

CAMPAIGN = [
    md('''
# Campaigns: many pairs x splits x GPUs

`gcexplore.campaign` runs a grid of experiments as Dask tasks: one worker process per GPU,
one shard per task in a campaign folder, resumable (run it again on the same folder and
finished tasks are skipped). Every row carries the card it was measured on (UUID, index,
host, driver), so results from several GPUs stay apart.

With a GPU this notebook runs a small campaign on every visible GPU; without one it reads
a campaign recorded by `bench/campaign.py` on the project's two-GPU machine.
'''),
    PARAMETERS,
    DETECT,
    code('''
import importlib.util
import tempfile

import pandas as pd

DASK = importlib.util.find_spec("distributed") is not None
if not DASK:  # said with or without a GPU: a reader learns what running a campaign needs
    print("campaigns run on Dask distributed, which this environment lacks (pip install 'gcexplore[campaign]'); "
          "showing the recorded campaign instead")
elif not LIVE:
    print("Dask distributed is installed: with a GPU this notebook runs a campaign; here it shows the recorded one")
if LIVE and DASK:
    folder = tempfile.mkdtemp(prefix="gcexplore-campaign-")
    c = gcexplore.campaign([["compute", "memory"], ["compute", "copy"]], [[16, 32], [48, 64]] if QUICK else [None],
                           options={"repeats": REPEATS}, folder=folder)
    df = c.result()
    display(c.status())
else:
    df = recorded("campaign")  # shipped as a campaign folder: load_campaign and campaign status work on it
    folder = df.attrs["folder"]
    print(f"the recorded campaign's folder: {folder} (try: gcexplore campaign status {folder})")
    display(gcexplore.campaign_status(folder))
a = df.attrs
print(f"campaign {a['campaign_id']}: {a['done']} of {a['tasks']} tasks done, {len(a['failed'])} failed, "
      f"{len(a['pending'])} pending")
'''),
    md('''
Each task is one sweep of one pair over one split set on one card. Per task, the split with
the lowest concurrent makespan (`gcexplore.best_split`), grouped by card and pair:
'''),
    code('''
best = gcexplore.campaigns.task_best_splits(df)
display(best)
edge = best[best["at_edge"]]
if len(edge):
    print(f"{len(edge)} of {len(best)} tasks have their best split at the edge of their split set "
          f"({'; '.join(f'{r.pair} {r.best_split} in {r.split_set}' for r in edge.itertuples())}): "
          "the optimum may lie outside the set; sweep the sizes beyond that edge to know")
'''),
    md('''
One task's sweep, as `gcexplore.plot_sweep` draws any sweep:
'''),
    code('''
key = sorted(df["task_key"].unique())[0]
one = df[df["task_key"] == key].copy()
one.attrs = {**a, "kind": "sweep"}
display(gcexplore.plot_sweep(one))
'''),
]


# Section 5 of notebook 02: two results compared (issue 18).
SWEEPING += [
    md("""
## 6. Comparing two results: which differences are real, and does the best split move

`gcexplore.compare(a, b)` puts two results side by side layout by layout: both medians,
their ratio with an interval from the raw repetitions, and a verdict that is FAST or SLOW
only when the whole interval lies beyond ±1%, SAME when it lies within, UNCLEAR otherwise
(the method is in docs/guide.md, its measured error rates in docs/measurements.md). It also
says where each side's best split is and what one side's best costs on the other. The second side here is a sweep
recorded under another condition where this installation has one (`sweep_second`, another
card); otherwise the two halves of this sweep's own repetitions, which should agree. The first
line counts the concurrent rows, the ones the table and the figure below show; the lines after it
say what each mode found over all its layouts. The figure's lower panel is the ratio B / A per
layout with its interval: differences of a few percent that the log-scale curves above barely
separate.
"""),
    code("""
from gcexplore.views.compare_text import describe

second = None  # a second side recorded under another condition, when this installation has one
if "sweep_second" in gcexplore.results.recorded_names():
    second = recorded("sweep_second")
else:
    print("recorded result 'sweep_second' is not in this installation yet; it is recorded on a GPU with "
          "python3 bench/record_second_side.py --out DIR (then copied to gcexplore/data). Without it "
          "this section compares the two halves of the sweep above.")
if second is not None:
    cmp = gcexplore.compare(sweep_df, second)  # the sides are named with their cards when the cards differ
else:
    cut = sweep_df["rep"].max() / 2
    halves = sweep_df.assign(half=["first half" if r <= cut else "second half" for r in sweep_df["rep"]])
    cmp = gcexplore.compare(halves, by="half", labels=("first half", "second half"))
for line in describe(cmp, "concurrent"):
    print(line)
display(cmp.table[cmp.table["group"] == "concurrent"][
    ["layout_a", "layout_b", "median_a_ms", "median_b_ms", "ratio", "ratio_low", "ratio_high", "verdict"]].round(4))
gcexplore.plot_compare(cmp)
"""),
]


# Notebook 04, last section: communication SMs on two GPUs (issue 27).
CAMPAIGN += [
    md("""
## Communication SMs: how many SMs a collective needs beside compute

`gcexplore.comm_sweep` puts an NCCL collective on one partition of every GPU and a chain of
bf16 GEMMs on the rest, in steps, at every split, and the same steps on the whole GPU (plain
streams with NCCL's own CTA count, and communicators capped by `max_ctas`). One process per
GPU, joined by NCCL's own bootstrap. With two GPUs and nccl4py here it runs a small sweep;
otherwise it shows the sweep recorded by `bench/comm.py` on the project's machine (2 GPUs).
"""),
    code("""
import importlib.util

COMM_LIVE = LIVE and importlib.util.find_spec("nccl") is not None and gcexplore.device_count() >= 2
if COMM_LIVE:
    spec = gcexplore.CommSpec(collectives=["allreduce"], sizes=["16M", "256M"], comm_sms=[8, 16, 32],
                              ctas=[16], repeats=REPEATS, trace=False)
    comm = gcexplore.comm_sweep(spec, gpus=2)
else:
    comm = recorded("comm")
print(f"{comm.attrs['nranks']} GPUs, NCCL {comm.attrs['nccl_version']}; {comm.attrs['zero_sm']}")
att = pd.DataFrame(comm.attrs.get("attribution", []))
if len(att):
    print(f"NCCL kernels on the communication partition: {att['on_comm_partition'].sum()} of "
          f"{att['nccl_kernels'].sum()} (CUPTI, every rank and split)")
"""),
    md("""
Per collective and size, the fewest communication SMs whose step is within 1% of the best
split's, against the plain streams and the best CTA cap; then the fewest SMs (and CTAs)
that reach 95% of the peak bus bandwidth; then the split tuner's answer, found by replaying
its search over the sweep's steps, with the share of the sweep's GPU time it needed.
"""),
    code("""
answer = gcexplore.comm_answer(comm, 0.01)
table = gcexplore.comm_table(comm)
part = table[table["setup"] == "partition"]
print(f"the GEMM chain alone: {table['compute_whole_ms'].iloc[0]:.3f} ms on the whole GPU, "
      f"{part['compute_alone_ms'].min():.3f} to {part['compute_alone_ms'].max():.3f} ms on the partitions left to it")
wins = answer[answer["speedup_vs_plain"] > 1]
print(f"a split beats plain streams for {len(wins)} of {len(answer)} collective x size points"
      + (": " + ", ".join(f"{r.collective} {r.size_bytes >> 20} MiB on {r.answer_sm_count} SMs "
                          f"({r.speedup_vs_plain:.2f}x)" for r in wins.itertuples()) if len(wins) else ""))
display(answer.round(4))
display(gcexplore.bandwidth_table(comm, 0.95).round(1))
display(gcexplore.recommend_comm(comm, 0.01).drop(columns=["search_answer"]).round(4))
"""),
    code("""
display(gcexplore.plot_comm(comm, collective="allreduce"))
"""),
    md("""
The same sweep recorded on four GPUs (4 x H100 of another host, 8 steps per point): the
answer per collective and size beside the one above, and what the replayed search cost on each. A rival
within the tolerance by its median is settled once the confidence bound keeps it from being faster by
more than `settle` tolerances (2 by default; 1 confirms every rival at the tolerance, the rule before).
"""),
    code("""
comm4 = recorded("comm_4gpu")
n2, n4 = comm.attrs["nranks"], comm4.attrs["nranks"]
side = gcexplore.comm_answer(comm, 0.01).merge(gcexplore.comm_answer(comm4, 0.01), on=["collective", "size_bytes"],
                                                suffixes=(f"_{n2}gpu", f"_{n4}gpu"))
display(side[["collective", "size_bytes", f"answer_sm_count_{n2}gpu", f"answer_sm_count_{n4}gpu",
              f"speedup_vs_plain_{n2}gpu", f"speedup_vs_plain_{n4}gpu"]].round(3))
for c in (comm, comm4):
    r, r1 = gcexplore.recommend_comm(c, 0.01), gcexplore.recommend_comm(c, 0.01, settle=1.0)
    print(f"{c.attrs['nranks']} x {c.attrs['device_name']}: the search's split within {r['within'].max():.2%} of the "
          f"sweep's best step, at {r['gpu_share'].min():.0%} to {r['gpu_share'].max():.0%} of its GPU time "
          f"({(r['gpu_share'] <= 0.25).sum()} of {len(r)} points at 25% or less); confirming every rival at the "
          f"tolerance instead of settling a flat top: {r1['steps_measured'].sum()} steps instead of "
          f"{r['steps_measured'].sum()}, up to {r1['gpu_share'].max():.0%}")
"""),
    md("""
GEMMs fitted to their partition (`CommSpec(compute_fit=True)`, recorded on two H100s at 16 MiB and
1 GiB): PyTorch's stock cuBLAS kernels are sized for the whole GPU whatever partition they run on;
fitted, they launch as many blocks as the compute partition has SMs (or the largest multiple of their
cluster under it), the chain loses less on large partitions, and the answer moves to fewer
communication SMs.
"""),
    code("""
fit, fit_trace = recorded("comm_fit"), recorded("comm_fit_trace")
t = gcexplore.comm_table(fit)
part = t[t["setup"] == "partition"]
k = fit_trace[(fit_trace["activity"] == "kernel") & (fit_trace["workload"] == "compute")]
grids = (k.assign(blocks=k["grid_x"] * k["grid_y"] * k["grid_z"])
         .groupby("sm_count").agg(blocks=("blocks", "max"), cluster=("cluster_x", "max")))
chain = part.groupby("compute_sm_count")["compute_alone_ms"].median()
print(f"the GEMM chain alone: {t['compute_whole_ms'].iloc[0]:.3f} ms on the whole GPU; on its partition:")
for sms, g in grids.iterrows():
    print(f"  {sms} SMs: {chain.get(sms, float('nan')):.3f} ms, {g['blocks']} blocks in clusters of {g['cluster']}")
display(gcexplore.comm_answer(fit, 0.01).drop(columns=["best_ctas", "ctas_step_ms"]).round(4))
r = gcexplore.recommend_comm(fit, 0.01)
print(f"the replayed search: within {r['within'].max():.2%} of the sweep's best step, "
      f"{r['gpu_share'].min():.0%} to {r['gpu_share'].max():.0%} of its GPU time")
display(gcexplore.plot_comm(fit, collective="allreduce", size_bytes=16 << 20))
"""),
    md("""
Zero-SM collectives: NCCL 2.28's copy-engine all-gather and all-to-all (CTA policy ZERO, buffers
in symmetric windows) beside the GEMM chain on the whole GPU, recorded on two GPUs. No SM is
given away, so what they cost the compute is its slowdown beside them (with a 90% interval),
against NCCL's kernels on plain streams; the card's DRAM (and L2) use in those steps, from PM
sampling, shows what they share instead.
"""),
    code("""
zero = recorded("comm_zero")
for r in gcexplore.zero_sm_table(zero).itertuples():
    print(f"{r.collective} {r.size_bytes >> 20} MiB on the copy engines ({r.bus_bw_alone_gbs:.0f} GB/s alone): "
          f"the GEMM chain {r.compute_slowdown:+.1%} slower (90% interval {r.slowdown_low:+.1%} to "
          f"{r.slowdown_high:+.1%}); step {r.step_ms:.2f} ms, with NCCL's kernels on plain streams {r.plain_step_ms:.2f}")
dram = gcexplore.comm_dram(zero)
display(dram[dram["layout"] == "zero"].drop(columns=["comm_sm_count"]).round(1))
"""),
]


NOTEBOOKS = {
    "01_quickstart.ipynb": (QUICKSTART, ["sweep", "occupancy", "torch_sweep"], "gcexplore quickstart"),
    "02_sweeping_sm_splits.ipynb": (SWEEPING, ["sweep", "torch_sweep", "trace_overlap", "trace", "scaling"],
                                    "Sweeping SM splits", ["sweep_second"]),
    "03_sm_isolation.ipynb": (ISOLATION, ["occupancy", "isolation"], "SM isolation",
                              ["primary_sms", "bandwidth_sharing", "l2_sharing", "pm", "pm_trace"]),
    "04_campaigns.ipynb": (CAMPAIGN, ["campaign", "comm", "comm_4gpu", "comm_zero", "comm_fit", "comm_fit_trace"],
                           "Campaigns"),
    "05_serving_splits.ipynb": (serving_cells.cells(md, code, PARAMETERS, DETECT), ["serving"], "Serving splits"),
}


def main() -> None:
    for filename, (cells, recorded, title, *optional) in NOTEBOOKS.items():
        nb = _notebook(cells, recorded, title, *optional)
        nbf.validate(nb)
        path = HERE / filename
        nbf.write(nb, path)
        print("wrote", path.relative_to(HERE.parent))


if __name__ == "__main__":
    main()
