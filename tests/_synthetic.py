"""Synthetic result DataFrames for CPU tests of the plots, widgets and demo.

Everything here is made up from a toy model (a compute-bound workload that scales
with SMs, a memory-bound one that saturates early, some interference and noise).
It is **not a measurement**: the frames say so in ``df.attrs["device_name"]`` and
must never be saved into ``gcexplore/data/`` or shown as results.

The frames follow the columns of docs/contract.md so the code under test sees the
same shapes the profiler produces.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

SYNTHETIC_DEVICE = "synthetic GPU (not a measurement)"

OVERLAP_COLUMNS = [
    "layout", "split_sm_count", "mode", "rep", "workload", "partition", "sm_count",
    "requested_sm_count", "start_ms", "duration_ms", "makespan_ms", "flops", "bytes",
    "throughput_tflops", "bandwidth_gbs", "sm_clock_mhz_before", "power_w_before",
    "sm_clock_mhz", "power_w",
]

# Declared work of the two toy workloads: about 1 ms each on all 132 SMs.
_COMPUTE_FLOPS = 5.0e10
_MEMORY_BYTES = 2.5e9


def attrs(kind: str, *, sm_count: int = 132, repeats: int = 5, recorded: bool = False) -> dict:
    """Metadata in the shape of the contract's ``df.attrs``, labelled synthetic."""
    return {
        "device_name": SYNTHETIC_DEVICE,
        "device_index": 0,
        "device_sm_count": sm_count,
        "compute_capability": (9, 0),
        "driver_version": 13000,
        "cuda_core_version": "synthetic",
        "cuda_bindings_version": "synthetic",
        "gcexplore_version": "synthetic",
        "date": "2000-01-01T00:00:00+00:00",
        "repeats": repeats,
        "warmup": 0,
        "launch_gap_us": 8.0,
        "kind": kind,
        "recorded": recorded,
    }


def _identify(df: pd.DataFrame, seed: int = 0) -> pd.DataFrame:
    """The identity columns every result carries (the card and the run), from its attrs, and its
    round (one)."""
    from gcexplore.schema import conform, identity_of

    if "rep" in df.columns and "round" not in df.columns and df.attrs.get("kind") != "pm":
        df.insert(df.columns.get_loc("rep") + 1, "round", 0)
    df.attrs["run_id"] = f"synthetic-{seed}"
    for col, v in identity_of({**df.attrs, "device_name": SYNTHETIC_DEVICE}, df.attrs.get("kind")).items():
        df[col] = v
    return conform(df)


def _compute_ms(sm: int, total: int) -> float:
    return 1.0 * total / sm


def _memory_ms(sm: int, total: int) -> float:
    # Bandwidth saturates at about 32 SMs.
    return 1.0 * max(1.0, 32.0 / sm)


_MODEL = {"compute": _compute_ms, "memory": _memory_ms}
_WORK = {"compute": (_COMPUTE_FLOPS, np.nan), "memory": (np.nan, _MEMORY_BYTES)}


def _row(layout, k, mode, rep, workload, partition, sm, requested, start, dur, makespan):
    flops, nbytes = _WORK[workload]
    return {
        "layout": layout, "split_sm_count": k, "mode": mode, "rep": rep,
        "workload": workload, "partition": partition, "sm_count": sm,
        "requested_sm_count": requested, "start_ms": start, "duration_ms": dur,
        "makespan_ms": makespan, "flops": flops, "bytes": nbytes,
        "throughput_tflops": flops / (dur * 1e-3) / 1e12,
        "bandwidth_gbs": nbytes / (dur * 1e-3) / 1e9,
        "sm_clock_mhz_before": 1980.0, "power_w_before": 440.0,
        "sm_clock_mhz": 1980.0, "power_w": 450.0,
    }


def sweep_df(
    splits=None, *, total: int = 132, step: int = 8, repeats: int = 5, seed: int = 0,
    recorded: bool = False,
) -> pd.DataFrame:
    """A synthetic sweep of ``compute`` (first partition) + ``memory`` (remainder).

    Parameters
    ----------
    splits : list of int, optional
        First-partition sizes; default every multiple of ``step`` that leaves at least
        ``step`` SMs for the remainder.
    total : int, default 132
        SMs of the synthetic device.
    repeats : int, default 5
        Repetitions per mode.
    seed : int, default 0
        Seed of the multiplicative noise.
    recorded : bool, default False
        Value of ``df.attrs["recorded"]``.
    """
    rng = np.random.default_rng(seed)
    if splits is None:
        splits = list(range(step, total - step + 1, step))
    records = []
    for k in splits:
        layout = f"{k}+{total - k}"
        placement = [("compute", "p0", k, k), ("memory", "remainder", total - k, pd.NA)]
        for rep in range(repeats):
            noise = lambda: float(rng.lognormal(0.0, 0.03))  # noqa: E731
            # alone: each workload by itself on its partition
            for w, part, sm, req in placement:
                d = _MODEL[w](sm, total) * noise()
                records.append(_row(layout, k, "alone", rep, w, part, sm, req, 0.0, d, d))
            # concurrent: both at once, 10% interference (shared memory system)
            durs = [(w, part, sm, req, _MODEL[w](sm, total) * 1.1 * noise())
                    for w, part, sm, req in placement]
            span = max(0.004 + d for *_, d in durs)
            for w, part, sm, req, d in durs:
                records.append(_row(layout, k, "concurrent", rep, w, part, sm, req, 0.004, d, span))
            # sequential: one after the other on the whole device
            d1 = _compute_ms(total, total) * noise()
            d2 = _memory_ms(total, total) * noise()
            for w, start, d in (("compute", 0.0, d1), ("memory", d1 + 0.008, d2)):
                records.append(_row(layout, k, "sequential", rep, w, "device", total, pd.NA,
                                     start, d, d1 + 0.008 + d2))
            # streams: both on plain streams of the whole device
            ds = [(w, _MODEL[w](total, total) * 1.8 * noise()) for w in ("compute", "memory")]
            span = max(0.004 + d for _, d in ds)
            for w, d in ds:
                records.append(_row(layout, k, "streams", rep, w, "device", total, pd.NA,
                                    0.004, d, span))
    df = pd.DataFrame.from_records(records, columns=OVERLAP_COLUMNS)
    df["requested_sm_count"] = df["requested_sm_count"].astype("Int64")
    df.attrs.update(attrs("sweep" if len(splits) > 1 else "overlap", sm_count=total,
                          repeats=repeats, recorded=recorded))
    _identify(df, seed)
    return df


def occupancy_df(
    p0_sms=None, *, total: int = 132, blocks_per_sm: int = 3, seed: int = 0,
    recorded: bool = False,
) -> pd.DataFrame:
    """Synthetic per-block records: ``compute`` on p0, ``memory`` on the remainder.

    ``p0_sms`` defaults to 24 SMs spread over the id range (partitions need not be
    contiguous in ``%smid``). Each SM runs ``blocks_per_sm`` blocks back to back.
    """
    rng = np.random.default_rng(seed)
    if p0_sms is None:
        p0_sms = list(range(0, total, total // 24))[:24]
    p0 = sorted(p0_sms)
    rest = [s for s in range(total) if s not in set(p0)]
    records = []
    for partition, workload, sms, block_ns in (("p0", "compute", p0, 200_000),
                                               ("remainder", "memory", rest, 50_000)):
        block = 0
        for sm in sms:
            t = int(rng.integers(0, 2_000))
            for _ in range(blocks_per_sm):
                d = int(block_ns * rng.lognormal(0.0, 0.05))
                records.append({"partition": partition, "workload": workload, "sm_id": sm,
                                "block": block, "start_ns": t, "end_ns": t + d})
                block += 1
                t += d + 500
    df = pd.DataFrame.from_records(
        records, columns=["partition", "workload", "sm_id", "block", "start_ns", "end_ns"])
    t0 = df["start_ns"].min()
    df["start_ns"] -= t0
    df["end_ns"] -= t0
    df.attrs.update(attrs("occupancy", sm_count=total, repeats=1, recorded=recorded))
    _identify(df, seed)
    return df


def scaling_df(
    workloads=("compute", "memory"), *, total: int = 132, step: int = 8, repeats: int = 5,
    seed: int = 0,
) -> pd.DataFrame:
    """Synthetic scaling curves of the toy workloads over every ``step`` SMs."""
    rng = np.random.default_rng(seed)
    records = []
    sizes = list(range(step, total + 1, step))
    if sizes[-1] != total:
        sizes.append(total)
    for w in workloads:
        flops, nbytes = _WORK[w]
        for sm in sizes:
            for rep in range(repeats):
                d = _MODEL[w](sm, total) * float(rng.lognormal(0.0, 0.02))
                records.append({
                    "workload": w, "sm_count": sm, "requested_sm_count": sm, "rep": rep,
                    "duration_ms": d, "flops": flops, "bytes": nbytes,
                    "throughput_tflops": flops / (d * 1e-3) / 1e12,
                    "bandwidth_gbs": nbytes / (d * 1e-3) / 1e9,
                })
    df = pd.DataFrame.from_records(records)
    df["requested_sm_count"] = df["requested_sm_count"].astype("Int64")
    df.attrs.update(attrs("scaling", sm_count=total, repeats=repeats))
    _identify(df, seed)
    return df


def isolation_df(*, critical_sm: int = 16, total: int = 132, repeats: int = 20,
                 seed: int = 0) -> pd.DataFrame:
    """Synthetic isolation run: critical latency 1.86x next to the background on plain
    streams, 1.21x in its own partition (the shape of DESIGN.md's H100 numbers)."""
    rng = np.random.default_rng(seed)
    records = []
    scen = {"alone": (1.0, total, None), "streams": (1.86, total, 1.0),
            "partitioned": (1.21, critical_sm, 1.1)}
    for scenario, (factor, crit_sm, bg_factor) in scen.items():
        for rep in range(repeats):
            records.append({"scenario": scenario, "role": "critical", "workload": "critical",
                            "rep": rep, "sm_count": crit_sm,
                            "duration_ms": 0.02 * factor * float(rng.lognormal(0, 0.03))})
            if bg_factor is not None:
                bg_sm = total if scenario == "streams" else total - critical_sm
                records.append({"scenario": scenario, "role": "background",
                                "workload": "gemm", "rep": rep, "sm_count": bg_sm,
                                "duration_ms": 2.0 * bg_factor * float(rng.lognormal(0, 0.03))})
    df = pd.DataFrame.from_records(records)
    df.attrs.update(attrs("isolation", sm_count=total, repeats=repeats))
    _identify(df, seed)
    return df


# --------------------------------------------------------------------------- tuner


class _FakeRun:
    """What gcexplore.experiments.experiment.experiment yields, without a GPU."""

    def __init__(self, info, options, names, seed):
        from types import SimpleNamespace

        self.kind, self.info, self.options = "tune", info, options
        self.wls = [SimpleNamespace(name=n) for n in names]
        self.extra: dict = {}
        self.rng = np.random.default_rng(seed)
        self.fail_at: int | None = None  # raise on this measurement (0-based)
        self.measurements = 0
        self.measured_with: list = []  # (the run's options, the options given) at each measure_layout
        self.redraws = 0  # Experiment.redraw calls: the tuner's visits each draw setup= inputs again

    def redraw(self):
        self.redraws += 1

    def frame(self, rows):
        from gcexplore.schema import frame

        a = {**attrs("tune", repeats=self.options.repeats), "run_id": "synthetic-tune",
             **self.options.metadata("tune"), **self.extra}
        return frame(rows, "tune", a)


class _FakeParts:
    def __init__(self, counts, total):
        self.counts = [int(c) for c in counts]
        self.label = "+".join(map(str, [*self.counts, total - sum(self.counts)]))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _fake_measure_layout(run, parts, rows, options=None, rnd=None):
    options = run.options if options is None else options
    first, index = (rnd.first_rep, rnd.index) if rnd is not None else (0, 0)
    run.measured_with.append((run.options, options))
    if run.fail_at is not None and run.measurements == run.fail_at:
        raise RuntimeError("synthetic workload failure")
    run.measurements += 1
    sizes = [int(s) for s in parts.label.split("+")]
    k = sizes[0]
    for rep in range(first, first + options.repeats):
        durs = [_MODEL.get(w.name, _compute_ms)(s, 132) * 1.1 * float(run.rng.lognormal(0, 0.01))
                for w, s in zip(run.wls, sizes)]
        span = max(durs) + 0.004
        for i, (w, s, d) in enumerate(zip(run.wls, sizes, durs)):
            part = "remainder" if i == len(sizes) - 1 else f"p{i}"
            row = _row(parts.label, k, "concurrent", rep, w.name if w.name in _WORK else "compute", part, s,
                       None if part == "remainder" else s, 0.004, d, span)
            row["workload"] = w.name
            row["round"] = index
            rows.append(row)


def fake_tune(workloads=("compute", "memory"), *, seed: int = 0, fail_at: int | None = None, runs=None, **kwargs):
    """gcexplore.tune over the toy model (no GPU): the real tuner glue, fake timing engine
    (``runs``, a list, receives the fake run)."""
    import contextlib
    from unittest import mock

    import gcexplore
    from gcexplore.experiments import tuner as T

    info = gcexplore.DeviceInfo(name=SYNTHETIC_DEVICE, index=0, compute_capability=(9, 0), sm_count=132,
                                min_partition_size=8, alignment=8, driver_version=13000)

    @contextlib.contextmanager
    def experiment(kind, wls, device, options, *, check=None, streams=2):
        names = list(wls)
        check(info, names)
        run = _FakeRun(info, options, names, seed)
        run.fail_at = fail_at
        if runs is not None:
            runs.append(run)
        yield run

    with mock.patch.object(T, "experiment", experiment), \
            mock.patch.object(T, "measure_layout", _fake_measure_layout), \
            mock.patch.object(T.partitions, "split", lambda counts, **kw: _FakeParts(counts, 132)):
        return T.tune(list(workloads), progress=False, **kwargs)


def layout_row(k: int, rep: int, *, total: int = 132) -> dict:
    """One concurrent row of workload "w" on the first partition of a k + rest layout (for
    tests of the layout loop and its checkpoint, which only carry rows)."""
    nan = float("nan")
    return {"layout": f"{k}+{total - k}", "split_sm_count": k, "mode": "concurrent", "rep": rep,
            "workload": "w", "partition": "p0", "sm_count": k, "requested_sm_count": k,
            "start_ms": 0.0, "duration_ms": 1.0 + k / 100, "makespan_ms": 1.0 + k / 100,
            "flops": nan, "bytes": nan, "throughput_tflops": nan, "bandwidth_gbs": nan,
            "sm_clock_mhz_before": nan, "power_w_before": nan, "sm_clock_mhz": nan, "power_w": nan}
