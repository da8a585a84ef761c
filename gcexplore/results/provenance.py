"""Which run a row belongs to: run identity, one-run checks, per-run application, and the stamp
text that says where a figure's numbers were measured."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

__all__ = ["identity", "per_run", "require_one_run", "runs", "stamp_text"]


def runs(df: pd.DataFrame) -> list[str]:
    """The run ids in a result (one for a single run; none for frames without identity)."""
    return list(dict.fromkeys(df["run_id"])) if "run_id" in df.columns else []


def require_one_run(df: pd.DataFrame, where: str) -> None:
    """ValueError when ``df`` holds rows of several runs (pick one first)."""
    ids = runs(df)
    if len(ids) > 1:
        cards = df.drop_duplicates("run_id")
        what = ", ".join(f"{r} ({d})" for r, d in zip(cards["run_id"], cards.get("device_name", cards["run_id"])))
        raise ValueError(f"{where} draws one run, but these rows hold {len(ids)} runs: {what}; "
                         "select one, e.g. df[df.run_id == ...], or summarize(df) to compare them")


def per_run(df: pd.DataFrame, one) -> pd.DataFrame:
    ids = runs(df)
    if len(ids) <= 1:
        return one(df)
    parts = [one(df[df["run_id"] == r]) for r in ids]
    out = pd.concat(parts, ignore_index=True)
    out.attrs.update(parts[0].attrs)
    return out


def identity(df: pd.DataFrame) -> dict:
    if "run_id" in df.columns and len(df):
        return {"device_name": str(df["device_name"].iloc[0]) if "device_name" in df.columns else "",
                "run_id": str(df["run_id"].iloc[0])}
    return {"device_name": str(df.attrs.get("device_name", "")), "run_id": str(df.attrs.get("run_id", ""))}


def stamp_text(source: pd.DataFrame | Mapping) -> str:
    """Where a result's numbers were measured: device, recorded or live, date (one line).

    ``source`` is a result (its ``attrs`` are read) or its ``attrs``: keys ``device_name``,
    ``device_sm_count``, ``date``, ``recorded`` and ``driver_version`` when present. E.g.
    ``"NVIDIA H100 80GB HBM3 (132 SMs, driver 13.0) · recorded 2025-11-26"``. Figures carry it
    as their title (:func:`gcexplore.views.plot.figure_stamp`), text reports as their head line.
    """
    attrs = source.attrs if isinstance(source, pd.DataFrame) else source
    name = attrs.get("device_name") or "unknown device"
    details = []
    if attrs.get("device_sm_count"):
        details.append(f"{attrs['device_sm_count']} SMs")
    drv = attrs.get("driver_version")
    if isinstance(drv, (int, np.integer)) and not isinstance(drv, bool) and drv > 0:
        details.append(f"driver {drv // 1000}.{(drv % 1000) // 10}")
    elif isinstance(drv, str) and drv:
        details.append(f"driver {drv}")  # DeviceInfo.metadata() stores "13.0"
    device = f"{name} ({', '.join(details)})" if details else name
    date = str(attrs["date"])[:10] if attrs.get("date") else ", date unknown"
    how = "recorded" if attrs.get("recorded") else "measured live"
    return f"{device} · {how}{'' if date.startswith(',') else ' '}{date}"
