"""Serving numbers, computed once: per-run ITL and TTFT tails and throughputs, SLO attainment and
goodput per split, predictions from solo profiles, and the advisor's search.

- :class:`ServingSLO`: TTFT <= ``ttft_ms`` for at least ``attainment`` of the requests (an
  unserved request is a miss) and ITL p99 <= ``itl_p99_ms``.
- :func:`serving_table`: one row per run (mode, layout, load) of a ``"serving"`` result.
- :func:`goodput_table`: per mode and layout, the highest rate whose run met the SLO (DistServe's
  goodput), with that run's tails and throughputs.
- :func:`predict_serving`: ITL and TTFT per split and load from the step profiles: a FIFO queue of
  the load's arrivals served in the prefill time measured next to decode (``paired`` rows; the solo
  time without them), and the decode gaps as a mix of the gaps measured with a prefill running
  (``paired``) and by themselves (``alone``), weighted by the share of time the queue keeps the
  prefill busy.
- :func:`advise`: the split with the highest goodput, measuring only the runs its predictions
  cannot settle; :func:`prediction_errors` compares predictions with measurements.
- :func:`clock_agreement` (:mod:`gcexplore.serving.clocks`): a run's GPU-clock ITLs and TTFTs against a
  CUPTI trace of it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import cast

import numpy as np
import pandas as pd

from ..results.run import per_run, with_identity
from ..analysis.stats import quantile
from ..results.validate import ResultError, check_not_negative, check_result
from ..schema import RUN_COLUMNS
from .clocks import clock_agreement
from .margin import slo_margin

__all__ = ["Advice", "PROFILE_MODES", "SERVING_TABLE_COLUMNS", "ServingSLO", "advise", "advise_recorded",
           "clock_agreement", "deadline_of", "goodput_table", "loads_of", "predict_serving", "prediction_errors",
           "serving_table", "trade_facts", "ttft_queue"]

RUN_KEYS = ["mode", "layout", "load"]
#: Modes that profile the roles (no arrivals): predictions start from them; they have no goodput.
PROFILE_MODES = ("alone", "paired")
#: The tails whose spread between rounds serving_table gives (``<tail>_spread_ms``).
SPREAD_OF = ("itl_p50_ms", "itl_p99_ms", "ttft_p50_ms", "ttft_p99_ms")
SERVING_TABLE_COLUMNS = ["mode", "layout", "decode_sm_count", "prefill_sm_count", "load", "pattern", "burst",
                         "rate_rps", "gaps", "itl_p50_ms", "itl_p99_ms", "itl_max_ms", "requests", "served",
                         "ttft_p50_ms", "ttft_p99_ms", "queue_p50_ms", "service_p50_ms", "decode_tokens_per_s",
                         "prefill_tokens_per_s", "window_ms", "run_ms", "rounds",
                         *(c.replace("_ms", "_spread_ms") for c in SPREAD_OF)]


@dataclasses.dataclass(frozen=True)
class ServingSLO:
    """Service-level objectives of a serving run.

    Attributes
    ----------
    ttft_ms : float
        Time to first token a request must not exceed (queueing included).
    itl_p99_ms : float
        Bound on the 99th percentile of the decode gaps.
    attainment : float, default 0.9
        Share of requests that must meet ``ttft_ms`` (an unserved request misses).
    """

    ttft_ms: float
    itl_p99_ms: float
    attainment: float = 0.9

    def __post_init__(self):
        for name in ("ttft_ms", "itl_p99_ms"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise ValueError(f"{name} must be a positive number of ms, got {v!r}")
        if not (isinstance(self.attainment, (int, float)) and 0 < self.attainment <= 1):
            raise ValueError(f"attainment must be in (0, 1], e.g. 0.9, got {self.attainment!r}")

    def text(self) -> str:
        return (f"TTFT <= {self.ttft_ms:g} ms for {self.attainment:.0%} of requests, "
                f"ITL p99 <= {self.itl_p99_ms:g} ms")


def _q(values, q: float) -> float:
    """The ``q`` quantile, linear interpolation as :func:`~gcexplore.analysis.stats.quantile`, with a
    NaN (an unserved request) counted as infinitely late: inf when the quantile reaches one."""
    v = np.asarray(values, dtype=float)
    if not len(v):
        return math.nan
    if not np.isnan(v).any():
        return quantile(v, q)
    v = np.sort(np.where(np.isnan(v), np.inf, v))
    pos = q * (len(v) - 1)
    lo, hi = math.floor(pos), math.ceil(pos)
    if math.isinf(v[hi]) and pos > lo or math.isinf(v[lo]):
        return math.inf
    return float(v[lo] + (v[hi] - v[lo]) * (pos - lo))


def _rounds(g: pd.DataFrame):
    """The rows of each round of one run (one round where the rows carry none)."""
    if "round" not in g.columns:
        return [g]
    return [part for _, part in g.groupby("round", sort=True)]


def _spread(values: list[float]) -> float:
    """How far the rounds' values of one tail lie apart (largest - smallest; 0 when every round's is
    infinite, inf when some are and some are not; NaN with no value)."""
    v = np.asarray([x for x in values if not math.isnan(x)], dtype=float)
    if not len(v):
        return math.nan
    if np.isinf(v).all():
        return 0.0
    return float(v.max() - v.min())


def _tails(g: pd.DataFrame) -> dict:
    gaps, reqs = g[g["record"] == "gap"], g[g["record"] == "request"]
    return {"itl_p50_ms": _q(gaps["itl_ms"], 0.5), "itl_p99_ms": _q(gaps["itl_ms"], 0.99),
            "ttft_p50_ms": _q(reqs["ttft_ms"], 0.5), "ttft_p99_ms": _q(reqs["ttft_ms"], 0.99)}


def _one_run(keys, g: pd.DataFrame) -> dict:
    """One run's row, its rounds pooled: tails over every round's gaps and requests, throughputs over
    the rounds' windows together, GPU time summed, and each tail's spread between the rounds."""
    gaps, reqs = g[g["record"] == "gap"], g[g["record"] == "request"]
    first = g.iloc[0]
    parts = _rounds(g)
    window = float(sum(float(part["window_ms"].iloc[0]) for part in parts))
    run_ms = float(sum(float(part["run_ms"].iloc[0]) for part in parts))
    per_round = [_tails(part) for part in parts]
    served = reqs[reqs["ttft_ms"].notna()]
    pooled = _tails(g)
    return {
        **dict(zip(RUN_KEYS, keys)), "decode_sm_count": int(first["decode_sm_count"]),
        "prefill_sm_count": int(first["prefill_sm_count"]), "pattern": str(first["pattern"]),
        "burst": int(first["burst"]), "rate_rps": float(first["rate_rps"]),
        "gaps": len(gaps), "itl_p50_ms": pooled["itl_p50_ms"], "itl_p99_ms": pooled["itl_p99_ms"],
        "itl_max_ms": float(gaps["itl_ms"].max()) if len(gaps) else math.nan,
        "requests": len(reqs), "served": len(served), "ttft_p50_ms": pooled["ttft_p50_ms"],
        "ttft_p99_ms": pooled["ttft_p99_ms"], "queue_p50_ms": _q(served["queue_ms"], 0.5),
        "service_p50_ms": _q(served["end_ms"] - served["start_ms"], 0.5),
        "decode_tokens_per_s": float(gaps["tokens"].sum()) / window * 1e3 if len(gaps) and window > 0 else math.nan,
        "prefill_tokens_per_s": float(served["tokens"].sum()) / window * 1e3 if len(served) and window > 0
        else math.nan,
        "window_ms": window, "run_ms": run_ms, "rounds": len(parts),
        **{c.replace("_ms", "_spread_ms"): _spread([t[c] for t in per_round]) for c in SPREAD_OF},
    }


def serving_table(df: pd.DataFrame, slo: ServingSLO | None = None) -> pd.DataFrame:
    """One row per run (mode, layout, load) of a ``"serving"`` result: ITL p50 / p99 / max, TTFT p50 / p99 (NaN TTFTs,
    unserved requests, count as infinitely late), queueing and service medians, decode and prefill
    tokens per second over the run's window, and its GPU time (``run_ms``), with the identity
    columns of the measurement it came from (results of several cards or runs stay apart).

    A run measured in several rounds (``serve(rounds=...)``) is one row: its tails over the gaps and
    requests of every round, its throughputs over the rounds' windows together, ``window_ms`` and
    ``run_ms`` summed; ``rounds`` counts them and ``itl_p50_spread_ms``, ``itl_p99_spread_ms``,
    ``ttft_p50_spread_ms``, ``ttft_p99_spread_ms`` say how far the rounds' own tails lie apart (largest
    minus smallest: 0 with one round; inf where some rounds left requests unserved and some did not).

    With ``slo``: ``ttft_attainment`` (share of requests within ``slo.ttft_ms``) and ``meets_slo``.
    ``alone`` rows give the decode step's gaps (``prefill_sm_count`` 0) and the prefill service
    time (``decode_sm_count`` 0) on each partition by themselves.
    """
    check_result(df, "serving", "serving_table")
    out = per_run(df, lambda rows: with_identity(_table(rows, slo), rows))
    out.attrs.update({k: v for k, v in df.attrs.items() if k in ("device_name", "run_id", "model", "graphs")})
    return out


def _table(df: pd.DataFrame, slo: ServingSLO | None) -> pd.DataFrame:
    for col in ("itl_ms", "ttft_ms", "queue_ms"):  # a time before its own start is no measurement
        if col in df.columns and (df[col].to_numpy(float) < 0).any():
            n = int((df[col].to_numpy(float) < 0).sum())
            raise ValueError(f"serving_table: {n} row(s) have a negative {col}; a serving result's gaps and "
                             "latencies are >= 0 (NaN: unserved): the rows are damaged")
    rows = []
    for keys, g in df.groupby(RUN_KEYS, sort=False):
        if keys[0] != "alone":
            rows.append(_one_run(keys, g))
        else:  # alone: the decode rows and the prefill rows are two measurements
            rows.extend(_one_run(keys, part) for _, part in g.groupby("record", sort=True))
    out = pd.DataFrame(rows, columns=SERVING_TABLE_COLUMNS)
    if slo is not None:
        att = []
        for keys, g in df[df["record"] == "request"].groupby(RUN_KEYS, sort=False):
            att.append((*keys, float((g["ttft_ms"] <= slo.ttft_ms).mean()) if len(g) else math.nan))
        att_df = pd.DataFrame(att, columns=[*RUN_KEYS, "ttft_attainment"])
        out = out.merge(att_df, on=RUN_KEYS, how="left")
        # a run with no recorded request (NaN) or no decode gap (ITL NaN) shows nothing met: it cannot meet the SLO
        out["meets_slo"] = (out["ttft_attainment"] >= slo.attainment) & (out["itl_p99_ms"] <= slo.itl_p99_ms)
        out.loc[out["mode"].isin(PROFILE_MODES), "meets_slo"] = False
    return out


def goodput_table(df_or_table: pd.DataFrame, slo: ServingSLO, pattern: str | None = "poisson") -> pd.DataFrame:
    """Per mode and layout: ``goodput_rps``, the highest measured rate whose run met ``slo`` (0 when
    none did), with that run's ITL p99, TTFT p50 and decode tokens per second. Accepts a serving
    result or its :func:`serving_table` with ``slo``. Only loads of one arrival ``pattern`` count
    (a rate of bursts is another load than a Poisson rate); None: every load. Where the runs were
    measured in several rounds, the quoted tails' spreads between them (``itl_p99_spread_ms``,
    ``ttft_p50_spread_ms``, :func:`serving_table`) come with them."""
    t = df_or_table if "meets_slo" in df_or_table.columns else serving_table(df_or_table, slo)
    quoted = ["itl_p99_ms", "ttft_p50_ms", "decode_tokens_per_s"]
    if "rounds" in t.columns and len(t) and t["rounds"].max() > 1:
        quoted += ["itl_p99_spread_ms", "ttft_p50_spread_ms"]
    rows = []
    keys = [c for c in RUN_COLUMNS if c != "device_name" and c in t.columns]  # the run key, as the schema names it
    loaded = t[~t["mode"].isin(PROFILE_MODES)]
    if pattern is not None:
        loaded = loaded[loaded["pattern"] == pattern]
    for k, g in loaded.groupby([*keys, "mode", "layout"], sort=False, dropna=False):
        mode, layout = k[-2:]
        ok = g[g["meets_slo"]].sort_values("rate_rps")
        best = ok.iloc[-1] if len(ok) else None
        rows.append({**dict(zip(keys, k[:-2])), "mode": mode, "layout": layout,
                     "decode_sm_count": int(g["decode_sm_count"].iloc[0]),
                     "goodput_rps": float(best["rate_rps"]) if best is not None else 0.0,
                     "loads_met": len(ok), "loads": len(g),
                     **{c: float(best[c]) if best is not None else math.nan for c in quoted}})
    return pd.DataFrame(rows)


def loads_of(df: pd.DataFrame) -> dict:
    """``{load: (rate_rps, arrival times in ms)}`` of the loaded runs of a serving result (the
    arrivals are the same for every split and mode of one load)."""
    out = {}
    reqs = df[(df["record"] == "request") & ~df["mode"].isin(PROFILE_MODES)]
    for load, g in reqs.groupby("load", sort=False):
        first = g[RUN_KEYS[:2]].iloc[0]
        one = g[(g["mode"] == first["mode"]) & (g["layout"] == first["layout"])]
        if "round" in one.columns:  # every round saw the same arrivals: one round's
            one = one[one["round"] == one["round"].iloc[0]]
        one = one.sort_values("index")
        out[str(load)] = (float(one["rate_rps"].iloc[0]), one["arrival_ms"].to_numpy(float))
    return out


def deadline_of(df: pd.DataFrame) -> float:
    """When a serving run stopped starting requests (ms from its first decode tick): the arrivals'
    duration plus the drain, after the lead before the first arrival (``attrs["lead_ms"]``)."""
    duration = float(df["duration_s"].iloc[0])
    drain = float(df.attrs.get("drain_s", duration))
    return (duration + drain) * 1e3 + float(df.attrs.get("lead_ms", 0.0))


def ttft_queue(arrival_ms, service_ms: float, deadline_ms: float = math.inf) -> np.ndarray:
    """TTFTs of FIFO requests served one at a time in ``service_ms`` each (NaN: not started by
    ``deadline_ms``)."""
    free, out = 0.0, []
    for a in np.sort(np.asarray(arrival_ms, dtype=float)):
        start = max(a, free)
        if start > deadline_ms:
            out.append(math.nan)
            continue
        free = start + service_ms
        out.append(free - a)
    return np.asarray(out)


def _busy_gaps(rows: pd.DataFrame) -> np.ndarray:
    """ITLs of the gaps of ``rows`` (one run, its rounds each on its own clock) that overlap a served
    request of the same round."""
    if "round" in rows.columns and rows["round"].nunique() > 1:
        return np.concatenate([_busy_gaps(part) for part in _rounds(rows)])
    gaps = rows[rows["record"] == "gap"]
    reqs = rows[(rows["record"] == "request") & rows["ttft_ms"].notna()]
    s, e = gaps["start_ms"].to_numpy(float), gaps["end_ms"].to_numpy(float)
    busy = np.zeros(len(gaps), dtype=bool)
    for a, b in reqs[["start_ms", "end_ms"]].to_numpy(float):
        busy |= (s < b) & (e > a)
    return gaps["itl_ms"].to_numpy(float)[busy]


def _mixed_quantile(parts, q: float) -> float:
    """The ``q`` quantile of a mix of samples, ``parts`` = [(values, weight of the set)]."""
    vals, wts = [], []
    for v, w in parts:
        v = np.asarray(v, dtype=float)
        if len(v) and w > 0:
            vals.append(v)
            wts.append(np.full(len(v), w / len(v)))
    if not vals:
        return math.nan
    v, w = np.concatenate(vals), np.concatenate(wts)
    order = np.argsort(v, kind="stable")
    v, c = v[order], np.cumsum(w[order]) / w.sum()
    return float(v[min(np.searchsorted(c, q - 1e-12), len(v) - 1)])


def predict_serving(profiles: pd.DataFrame, loads: dict, slo: ServingSLO | None = None,
                    deadline_ms: float = math.inf) -> pd.DataFrame:
    """Predicted ITL p50 / p99 and TTFT p50 / p99 (and, with ``slo``, attainment and ``meets_slo``) of
    each partitioned split and load, from the step profiles of a serving result.

    The prefill's service time is the median measured next to decode on the split (``paired``
    rows: requests back to back while decode runs, so what sharing DRAM and L2 costs is in it; the
    solo time of the ``alone`` rows where no paired run was made, ``profile`` says which); the
    load's arrivals queue FIFO for it (TTFT). The decode gaps are the paired gaps that overlapped
    a prefill, in the share of the run the queue keeps the prefill busy, and the ``alone`` gaps
    in the rest. Nothing is fitted to loaded runs; :func:`prediction_errors` scores it on them."""
    check_result(profiles, "serving", "predict_serving")
    a = profiles[profiles["mode"].isin(PROFILE_MODES) & profiles["layout"].str.contains(r"\+", regex=True)]
    rows = []
    for layout, g in a.groupby("layout", sort=False):
        solo = g[g["mode"] == "alone"]
        gaps = solo[solo["record"] == "gap"]["itl_ms"].to_numpy(float)
        reqs = solo[solo["record"] == "request"]
        service, busy, source = _q(reqs["end_ms"] - reqs["start_ms"], 0.5), gaps, "solo"
        paired = g[(g["mode"] == "paired") & g["ttft_ms"].notna()]
        if len(paired):
            p = g[g["mode"] == "paired"]
            service, busy, source = _q(paired["end_ms"] - paired["start_ms"], 0.5), _busy_gaps(p), "paired"
            if not len(gaps):
                gaps = p[p["record"] == "gap"]["itl_ms"].to_numpy(float)
        dsm, psm = (int(x) for x in str(layout).split("+"))
        for load, (rate, arr) in loads.items():
            ttft = ttft_queue(arr, service, deadline_ms)
            ends = np.sort(np.asarray(arr, dtype=float)) + ttft
            served = int(np.isfinite(ends).sum())
            share = min(1.0, served * service / float(np.nanmax(ends))) if served else 0.0
            mix = [(gaps, 1.0 - share), (busy, share)]
            row = {"layout": layout, "decode_sm_count": dsm, "prefill_sm_count": psm, "load": load, "rate_rps": rate,
                   "profile": source, "busy_share": share, "itl_p50_ms": _mixed_quantile(mix, 0.5),
                   "itl_p99_ms": _mixed_quantile(mix, 0.99), "service_ms": service,
                   "ttft_p50_ms": _q(ttft, 0.5), "ttft_p99_ms": _q(ttft, 0.99)}
            if slo is not None:
                att = float(np.mean(np.nan_to_num(ttft, nan=np.inf) <= slo.ttft_ms)) if len(ttft) else 1.0
                row.update(ttft_attainment=att, ttft_at_attainment_ms=_q(ttft, slo.attainment),
                           meets_slo=bool(att >= slo.attainment and row["itl_p99_ms"] <= slo.itl_p99_ms))
            rows.append(row)
    return pd.DataFrame(rows)


def prediction_errors(predicted: pd.DataFrame, measured: pd.DataFrame) -> pd.DataFrame:
    """Relative error (predicted / measured - 1) of ITL p99 and TTFT p50 per split and load, joining
    :func:`predict_serving` to a :func:`serving_table` of the partitioned runs. A TTFT p50 that is
    infinite in both (most requests unserved) is an error of 0; in one only, of inf or -1.

    Raises
    ------
    ValueError
        ``measured`` is not a :func:`serving_table` (raw serving rows: pass ``serving_table(rows)``),
        or ``predicted`` is not a :func:`predict_serving` frame."""
    need = {"mode", "layout", "load", "pattern", "decode_sm_count", "rate_rps", "itl_p99_ms", "ttft_p50_ms"}
    if not need <= set(measured.columns):
        kind = measured.attrs.get("kind")
        raw = " (these are raw serving rows: pass serving_table(rows))" if kind == "serving" else ""
        raise ValueError(f"prediction_errors needs a serving_table of the measured runs{raw}; missing columns: "
                         f"{', '.join(sorted(need - set(measured.columns)))}")
    if not {"layout", "load", "itl_p99_ms", "ttft_p50_ms"} <= set(predicted.columns):
        raise ValueError("prediction_errors needs predict_serving's frame first (layout, load, itl_p99_ms, "
                         f"ttft_p50_ms); got columns {', '.join(map(str, predicted.columns[:12]))}")
    m = measured[measured["mode"] == "partitioned"]
    j = predicted.merge(m, on=["layout", "load"], suffixes=("_pred", ""))
    out = j[["layout", "load", "pattern", "decode_sm_count", "rate_rps"]].copy()
    for c in ("itl_p99_ms", "ttft_p50_ms"):
        p, x = j[f"{c}_pred"].to_numpy(float), j[c].to_numpy(float)
        out[c.replace("_ms", "_pred_ms")] = p
        out[c] = x
        with np.errstate(invalid="ignore", divide="ignore"):
            out[c.replace("_ms", "_error")] = np.where(np.isinf(p) & np.isinf(x), 0.0, p / x - 1.0)
    return out


@dataclasses.dataclass
class Advice:
    """What :func:`advise` found: the split, its measured goodput, what it measured and cost; ``reason`` the
    sentence, with how close the run it rests on came to the attainment (:func:`~.margin.slo_margin`)."""

    layout: str | None
    goodput_rps: float
    predicted: pd.DataFrame
    measured: list
    cost_ms: float
    reason: str


def _rank(pred: pd.DataFrame, slo: ServingSLO) -> list[tuple[str, float, list[float]]]:
    """Splits by predicted goodput (ties: the larger slack, the smaller of the two SLOs' ratios to the
    predicted numbers at that rate), each with its rates high to low."""
    out = []
    for layout, g in pred.groupby("layout", sort=False):
        ok = g[g["meets_slo"]].sort_values("rate_rps")
        good = float(ok["rate_rps"].iloc[-1]) if len(ok) else 0.0
        at = ok.iloc[-1] if len(ok) else g.sort_values("rate_rps").iloc[0]
        slack = min(slo.itl_p99_ms / at["itl_p99_ms"], slo.ttft_ms / max(at["ttft_at_attainment_ms"], 1e-9))
        out.append((str(layout), good, slack, sorted(g["rate_rps"].unique(), reverse=True)))
    out.sort(key=lambda r: (-r[1], -r[2]))
    return [(layout, good, rates) for layout, good, _, rates in out]


def advise(alone: pd.DataFrame, loads: dict, slo: ServingSLO, measure: Callable[[str, float], pd.DataFrame],
           deadline_ms: float = math.inf) -> Advice:
    """The split meeting ``slo`` with the highest goodput, measuring only what predictions leave open.

    Splits are ranked by the goodput :func:`predict_serving` gives them; the best is measured at its
    predicted goodput rate (and lower rates while it misses), and the next split is measured only
    while its prediction promises more than the best goodput confirmed so far. ``measure(layout,
    rate)`` runs one split at one load and returns its :func:`serving_table` row(s) with ``slo``.
    The cost is the ``alone`` runs' GPU time plus every measured run's.
    """
    pred = predict_serving(alone, loads, slo, deadline_ms)
    if pred.empty:
        raise ValueError("advise needs alone rows of partitioned splits (serve(..., modes=('alone',)))")
    a = alone[alone["mode"].isin(PROFILE_MODES)]
    runs = [c for c in ("mode", "layout", "decode_sm_count", "prefill_sm_count", "round") if c in a.columns]
    cost = float(a.groupby(runs)["run_ms"].first().sum())  # each round's run counted once
    measured: list = []
    best_layout, best_rate, margin = None, 0.0, None
    for layout, promised, rates in _rank(pred, slo):
        if best_layout is not None and promised <= best_rate:
            break
        for rate in [r for r in rates if r <= max(promised, min(rates)) and r > best_rate]:
            t = measure(layout, rate)
            measured.append(t)
            cost += float(t["run_ms"].sum())
            if bool(t["meets_slo"].all()):
                best_layout, best_rate = layout, rate
                margin = min((slo_margin(r, slo) for _, r in t.iterrows()), key=lambda m: m["fails_after"])
                break
    reason = (f"{best_layout} met {slo.text()} at {best_rate:g} requests/s ({cast(dict, margin)['text']})"
              if best_layout else f"no split met {slo.text()} at any measured rate")
    return Advice(best_layout, best_rate, pred, measured, cost, reason)


def trade_facts(table: pd.DataFrame) -> dict:
    """Whether the decode tail falls and the TTFT rises as the decode share grows, per load, from a
    :func:`serving_table`: the smallest and largest decode share's ITL p99 and TTFT p50, and a
    sentence saying what the data show."""
    part = table[table["mode"] == "partitioned"]
    per_load = []
    for load, g in part.groupby("load", sort=False):
        g = g.sort_values("decode_sm_count")
        lo, hi = g.iloc[0], g.iloc[-1]
        spread = {f"{c}_spread_ms": max(float(lo.get(f"{c}_spread_ms", 0.0)), float(hi.get(f"{c}_spread_ms", 0.0)))
                  for c in ("itl_p99", "ttft_p50")}  # of the two rows quoted
        per_load.append({"load": load, "pattern": str(g["pattern"].iloc[0]), "small": int(lo["decode_sm_count"]),
                         "large": int(hi["decode_sm_count"]),
                         "itl_p99_small_ms": float(lo["itl_p99_ms"]), "itl_p99_large_ms": float(hi["itl_p99_ms"]),
                         "ttft_p50_small_ms": float(lo["ttft_p50_ms"]), "ttft_p50_large_ms": float(hi["ttft_p50_ms"]),
                         "rounds": int(min(lo.get("rounds", 1), hi.get("rounds", 1))), **spread})
    falls = [p["itl_p99_large_ms"] < p["itl_p99_small_ms"] for p in per_load]
    rises = [p["ttft_p50_large_ms"] > p["ttft_p50_small_ms"] for p in per_load]
    if not per_load:
        text = "no partitioned runs"
    else:
        p = ([q for q in per_load if q["pattern"] == "poisson"] or per_load)[-1]
        text = (f"from {p['small']} to {p['large']} decode SMs at {p['load']}: ITL p99 "
                f"{p['itl_p99_small_ms']:.3g} -> {p['itl_p99_large_ms']:.3g} ms, TTFT p50 "
                f"{p['ttft_p50_small_ms']:.3g} -> {p['ttft_p50_large_ms']:.3g} ms; the decode tail falls at "
                f"{sum(falls)} of {len(falls)} loads and the TTFT rises at {sum(rises)} of {len(rises)}")
        if p["rounds"] > 1:  # the quoted tails are pooled over rounds: how far the rounds' own lie apart
            text += (f" ({p['rounds']} rounds, whose own ITL p99 differ by up to {p['itl_p99_spread_ms']:.3g} ms "
                     f"and TTFT p50 by up to {p['ttft_p50_spread_ms']:.3g} ms)")
    return {"per_load": per_load, "itl_falls": all(falls) and bool(falls), "ttft_rises": all(rises) and bool(rises),
            "text": text}


def advise_recorded(df: pd.DataFrame, slo: ServingSLO) -> tuple[Advice, dict]:
    """:func:`advise` replayed on a recorded grid (its profile rows and every split x Poisson load):
    each run the advisor asks for is looked up instead of measured, at its recorded GPU time; the
    grid's cost is that of its partitioned Poisson runs (bursts are not searched). Returns the
    advice and ``{"grid_best_layout", "grid_best_goodput_rps", "grid_cost_ms", "cost_share",
    "reaches"}`` (the advised split's goodput in the grid over the grid's best)."""
    table = serving_table(df, slo)
    part = table[(table["mode"] == "partitioned") & (table["pattern"] == "poisson")]
    if part.empty:
        raise ValueError("advise_recorded needs the partitioned runs of a split x load grid")

    def lookup(layout: str, rate: float) -> pd.DataFrame:
        return part[(part["layout"] == layout) & (part["rate_rps"] == rate)]

    loads = {k: v for k, v in loads_of(df).items() if k in set(part["load"])}
    advice = advise(df[df["mode"].isin(PROFILE_MODES)], loads, slo, lookup, deadline_ms=deadline_of(df))
    good = goodput_table(table, slo)
    good = good[good["mode"] == "partitioned"].sort_values("goodput_rps", kind="stable")
    best = good.iloc[-1]
    grid_cost = float(part["run_ms"].sum())
    mine = good[good["layout"] == advice.layout]["goodput_rps"]
    reached = float(mine.iloc[0]) if len(mine) else 0.0
    return advice, {"grid_best_layout": str(best["layout"]), "grid_best_goodput_rps": float(best["goodput_rps"]),
                    "grid_cost_ms": grid_cost, "cost_share": advice.cost_ms / grid_cost if grid_cost else math.nan,
                    "reaches": reached / float(best["goodput_rps"]) if best["goodput_rps"] else math.nan}


def check_serving_rows(df: pd.DataFrame, where: str) -> None:
    """ResultError unless gaps, latencies and queueing are numbers >= 0 (NaN for a request never
    served) and no served row ends before it starts (the serving kind's check)."""
    check_not_negative(df, ("itl_ms", "ttft_ms", "queue_ms", "arrival_ms"), where, "serving rows", allow_nan=True)
    if {"start_ms", "end_ms"} <= set(df.columns):
        back = (df["end_ms"] < df["start_ms"]).to_numpy(dtype=bool, na_value=False)
        if back.any():
            raise ResultError(f"{where}: {int(back.sum())} of {len(df)} serving rows end before they start "
                              "(end_ms < start_ms); recorded intervals have end_ms >= start_ms")
