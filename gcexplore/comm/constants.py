"""How far the SM counts that engines ship are from the measured best, on a communication-SMs sweep.

What engines give communication today are constants: vLLM reserves 20 SMs, TransformerEngine's
overlap margins are 8, DeepEP V2 computes its count (``ElasticBuffer.get_theoretical_num_sms()``,
an analytical count from expert-routing traffic over NVLink/RDMA bandwidth), NCCL on plain streams
picks its own CTAs. :func:`comm_constants` reads each one's step off a recorded sweep and compares
it with the best partition's step, with the gap's interval from the statistics the comparisons use
(:func:`gcexplore.analysis.stats.round_ratio_ci`, the card's floor from :func:`~gcexplore.analysis.stats.run_floor`).

A constant is read at the partition size the driver grants for it: a green partition's SMs come in
the card's granularity (8 on Hopper), so a request rounds up (:func:`gcexplore.plan_split`'s
``rounding="up"``): vLLM's 20 is 24 on an H100 or H200. DeepEP V2's count needs the MoE step's own
inputs (experts, top-k, ranks per node, hidden size, the NVLink and RDMA bandwidths) that a
collective sweep does not have: it is read only where the caller passes the count DeepEP computed
(``deepep_sms=``); otherwise its row says what it needs and carries no number.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import cast

import pandas as pd

from .analysis import comm_answer, comm_steps, comm_table

__all__ = ["COMM_CONSTANTS", "comm_constants"]

#: The constants read off a sweep: name -> (who ships it, the SMs it asks for; None: not a fixed count).
COMM_CONSTANTS = {
    "vllm": ("vLLM", 20),
    "transformer_engine": ("TransformerEngine", 8),
    "deepep_v2": ("DeepEP V2 (ElasticBuffer.get_theoretical_num_sms)", None),
    "nccl_default": ("NCCL's default CTAs on plain streams", None),
    "best": ("the sweep's best partition", None),
    "best_measured": ("the fastest layout measured, any setup", None),
}

_DEEPEP_NEEDS = ("DeepEP V2's count is computed from the MoE step (experts, top-k, ranks per node, hidden size, "
                 "NVLink and RDMA bandwidths), which a collective sweep does not record: pass "
                 "deepep_sms=<ElasticBuffer.get_theoretical_num_sms() on your step> to read it here")

COLUMNS = ["collective", "size_bytes", "nranks", "constant", "source", "requested_sm_count", "sm_count", "layout",
           "step_ms", "steps", "best_sm_count", "best_step_ms", "gap", "gap_low", "gap_high", "reason"]


def _card(df: pd.DataFrame, steps: pd.DataFrame):
    """The sweep's card for planning: its name and SM count from the metadata, its granularity from its
    partition sizes (the smallest gives the minimum, their common step the alignment, as
    :meth:`DeviceInfo.from_result` reads a sweep); no GPU."""
    from ..device.driver import DeviceInfo
    from ..schema import identity_name

    part = steps[steps["setup"] == "partition"]
    sizes = sorted({int(k) for k in part["comm_sm_count"]})
    if not sizes:
        raise ValueError("comm_constants: the sweep has no partition rows (setup 'partition'): nothing to compare")
    a = df.attrs
    sm = a.get(identity_name("sm_count")) or int((part["comm_sm_count"] + part["compute_sm_count"]).max())
    cc = a.get("compute_capability", "0.0")
    cc = tuple(int(x) for x in (cc.split(".") if isinstance(cc, str) else cc))
    return DeviceInfo(name=str(a.get(identity_name("name")) or "the sweep's card"), index=0,
                      compute_capability=cast("tuple[int, int]", cc),
                      sm_count=int(sm), min_partition_size=sizes[0], alignment=math.gcd(*sizes), driver_version=0)


def _deepep(deepep_sms, coll: str, size: int):
    """The DeepEP count for this point: an int for every point, or a mapping (collective, size_bytes) -> int."""
    if deepep_sms is None:
        return None
    if isinstance(deepep_sms, Mapping):
        return deepep_sms.get((coll, size))
    return deepep_sms


def _check_deepep(deepep_sms) -> None:
    values = list(deepep_sms.values()) if isinstance(deepep_sms, Mapping) else [deepep_sms]
    for v in values:
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v <= 0):
            raise ValueError(f"deepep_sms is the SM count DeepEP V2 computed (a positive int, or a mapping "
                             f"(collective, size_bytes) -> int), got {v!r}")


def comm_constants(df: pd.DataFrame, *, deepep_sms=None, confidence: float = 0.9, device=None) -> pd.DataFrame:
    """Per collective and size of a comm sweep: the step at each engine's constant against the best.

    Parameters
    ----------
    df : pandas.DataFrame
        A ``"comm"`` result (:func:`gcexplore.comm_sweep`, or a recorded one).
    deepep_sms : int or mapping, optional
        The SM count DeepEP V2's ``ElasticBuffer.get_theoretical_num_sms()`` gave for the user's MoE step
        (an int for every point, or ``{(collective, size_bytes): int}``). Without it the ``deepep_v2`` rows
        have no number and their ``reason`` says which inputs the count needs.
    confidence : float, default 0.9
        Of each gap's interval.
    device : DeviceInfo, optional
        The card whose granularity rounds the requests (default: the sweep's, from its metadata and its
        partition sizes, as :meth:`gcexplore.DeviceInfo.from_result` reads a sweep).

    Returns
    -------
    pandas.DataFrame
        One row per collective, size and constant (``vllm``, ``transformer_engine``, ``deepep_v2``,
        ``nccl_default``, ``best`` (the best partition, every gap's reference), ``best_measured`` (the fastest
        layout of any setup: where plain streams or a ``max_ctas`` communicator beat every partition, its gap
        is negative)). Columns: ``collective``, ``size_bytes``, ``nranks``, ``constant``,
        ``source`` (who ships it), ``requested_sm_count`` (what it asks for; NaN for NCCL's default and the
        best), ``sm_count`` (the partition read: the granted size; the whole GPU for NCCL's default),
        ``layout``, ``step_ms`` (median overlapped step, slowest rank), ``steps``, ``best_sm_count``,
        ``best_step_ms``, ``gap`` (step / best step - 1), ``gap_low``, ``gap_high`` (its interval at
        ``confidence``: :func:`~gcexplore.analysis.stats.round_ratio_ci` with the card's floor),
        ``reason`` (what the row is read from, or why it has no number). ``attrs``: ``confidence``,
        ``floor`` (the floor's text), ``granularity``.
    """
    from ..analysis.stats import round_ratio_ci, run_floor
    from ..device.driver import plan_split

    if not 0 < confidence < 1:
        raise ValueError(f"confidence is a fraction in (0, 1), got {confidence!r}")
    _check_deepep(deepep_sms)
    steps = comm_steps(df)
    info = device if device is not None else _card(df, steps)
    t = comm_table(df)
    best = comm_answer(t).set_index(["collective", "size_bytes", "nranks"])
    floor = run_floor(df)
    over = steps[(steps["mode"] == "overlapped") & (steps["workload"] == "comm") & (steps["collective"] != "")]
    parts = sorted({int(k) for k in over.loc[over["setup"] == "partition", "comm_sm_count"]})
    granularity = f"{info.name}: partition sizes {info.describe_valid()}"

    def granted(k: int) -> tuple[int | None, str]:
        try:
            g = plan_split(info, [k], rounding="up").granted[0]
        except ValueError as e:
            return None, str(e)
        if g == k:
            return g, f"{k} SMs, a valid partition size"
        return g, (f"{k} SMs is not a partition size on {info.name} ({info.alignment}-SM granularity); "
                   f"the driver grants {g} (rounded up, as plan_split does)")

    rows = []
    for (coll, size, n), g in over.groupby(["collective", "size_bytes", "nranks"], sort=True):
        key = (coll, int(size), int(n))
        if key not in best.index:
            continue
        b = best.loc[key]
        k_best = int(b["best_sm_count"])
        part = g[g["setup"] == "partition"]
        base = part.loc[part["comm_sm_count"] == k_best, "step_ms"]

        def row(name, requested, sm, layout, sel, reason):
            src = COMM_CONSTANTS[name][0]
            out = {"collective": coll, "size_bytes": int(size), "nranks": int(n), "constant": name, "source": src,
                   "requested_sm_count": math.nan if requested is None else float(requested),
                   "sm_count": math.nan if sm is None else float(sm), "layout": layout, "step_ms": math.nan,
                   "steps": 0, "best_sm_count": k_best, "best_step_ms": float(b["best_step_ms"]), "gap": math.nan,
                   "gap_low": math.nan, "gap_high": math.nan, "reason": reason}
            if sel is not None and len(sel):
                r = round_ratio_ci(base.to_numpy(), sel.to_numpy(), confidence=confidence, floor=floor)
                out.update(step_ms=float(sel.median()), steps=int(len(sel)), gap=r["ratio"] - 1.0,
                           gap_low=r["low"] - 1.0, gap_high=r["high"] - 1.0)
            rows.append(out)

        def at(name, requested):
            if requested is None:
                return
            sm, why = granted(int(requested))
            if sm is None:
                row(name, requested, None, "", None, why)
            elif sm not in parts:
                row(name, requested, sm, "", None, f"{why}; the sweep has no {sm}-SM partition "
                                                   f"(its partitions: {', '.join(map(str, parts))})")
            else:
                sel = part.loc[part["comm_sm_count"] == sm, "step_ms"]
                row(name, requested, sm, str(part.loc[part["comm_sm_count"] == sm, "layout"].iloc[0]), sel, why)

        at("vllm", COMM_CONSTANTS["vllm"][1])
        at("transformer_engine", COMM_CONSTANTS["transformer_engine"][1])
        dee = _deepep(deepep_sms, coll, int(size))
        if dee is None:
            row("deepep_v2", None, None, "", None, _DEEPEP_NEEDS)
        else:
            at("deepep_v2", dee)
        plain = g[g["setup"] == "plain"]
        if len(plain):
            row("nccl_default", None, int(plain["comm_sm_count"].iloc[0]), "plain", plain["step_ms"],
                "plain streams on the whole GPU, NCCL choosing its CTAs (setup 'plain')")
        else:
            row("nccl_default", None, None, "", None, "the sweep has no plain-streams rows (setup 'plain')")
        row("best", None, k_best, str(part.loc[part["comm_sm_count"] == k_best, "layout"].iloc[0]), base,
            f"the fastest median step of the sweep's {len(parts)} partitions")
        med = g.groupby("layout", sort=True)["step_ms"].median()
        top = str(med.idxmin())
        at_top = g[g["layout"] == top]
        row("best_measured", None, int(at_top["comm_sm_count"].iloc[0]), top, at_top["step_ms"],
            f"the fastest median step of the {len(med)} layouts measured (partitions, plain streams, max_ctas "
            f"communicators): {top} (setup {at_top['setup'].iloc[0]!r})")
    out = pd.DataFrame(rows, columns=COLUMNS)
    out.attrs.update({"confidence": confidence, "floor": floor.text(), "granularity": granularity,
                      "device_name": df.attrs.get("device_name", ""), "nranks": df.attrs.get("nranks"),
                      "how": "gap = the constant's median step / the best partition's - 1 (slowest rank per step); "
                             "interval: round_ratio_ci of the two layouts' steps with the card's floor"})
    return out
