"""Which run a row belongs to: run identity, one-run checks, per-run application, and the stamp
text that says where a figure's numbers were measured."""

from __future__ import annotations

import pandas as pd

__all__ = ["identity", "per_run", "require_one_run", "runs"]



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
