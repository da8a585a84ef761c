"""The SM counts engines ship against the measured best, on comm sweeps (issue 48): the guide's table.

Usage (from the project root; no GPU: it reads sweeps)::

    python3 bench/comm_constants.py --out DIR [SWEEP.parquet ...] [--deepep-sms N] [--confidence 0.9]

Without sweeps: the recorded ones (``gcexplore/data/comm.parquet``: 2 x H200, ``comm_4gpu.parquet``:
4 x H100). A fresh 2- or 4-GPU sweep is ``bench/comm.py --out DIR``'s ``comm-<n>gpu.parquet``. For each
sweep: DIR/constants-<name>.csv (:func:`gcexplore.comm_constants`), DIR/constants-<name>.png
(:func:`gcexplore.plot_comm_constants`), and printed and in DIR/comm_constants.md the gap of each
constant (step at its SMs / best partition's step - 1, with its interval) per collective and size.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _pct(v: float) -> str:
    return "n/a" if v != v else f"{100 * v:+.1f}%"


def table(t):
    """Collective x size rows, a column per constant: ``gap [low, high]`` (the numbers of ``t``)."""
    import pandas as pd

    rows = []
    for (coll, size), g in t.groupby(["collective", "size_bytes"], sort=True):
        row = {"collective": coll, "size": f"{size >> 20} MiB", "best SMs": int(g["best_sm_count"].iloc[0]),
               "best step ms": round(float(g["best_step_ms"].iloc[0]), 4)}
        for r in g.itertuples():
            if r.constant == "best":
                continue
            gap = f"{_pct(r.gap)} [{_pct(r.gap_low)}, {_pct(r.gap_high)}]" if r.gap == r.gap else "n/a"
            if r.constant == "best_measured":
                row["best measured"] = f"{r.layout}: {gap}"
                continue
            sm = "" if r.sm_count != r.sm_count else f" @{int(r.sm_count)}"
            row[f"{r.constant}{sm}"] = gap
        rows.append(row)
    return pd.DataFrame(rows)


def main(argv=None) -> int:
    import gcexplore as gx

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sweeps", nargs="*", help="comm sweeps (.parquet); default: the recorded ones")
    ap.add_argument("--out", required=True)
    ap.add_argument("--deepep-sms", type=int, default=None,
                    help="the count DeepEP V2's ElasticBuffer.get_theoretical_num_sms() gave for your MoE step")
    ap.add_argument("--confidence", type=float, default=0.9)
    a = ap.parse_args(argv)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    runs = ([(Path(p).stem, gx.load(p)) for p in a.sweeps] if a.sweeps
            else [(n, gx.load_recorded(n)) for n in ("comm", "comm_4gpu")])
    md = []
    for name, df in runs:
        t = gx.comm_constants(df, deepep_sms=a.deepep_sms, confidence=a.confidence)
        t.to_csv(out / f"constants-{name}.csv", index=False)
        gx.plot_comm_constants(t).savefig(out / f"constants-{name}.png", dpi=110)
        head = (f"## {name}: {df.attrs.get('nranks')} x {df.attrs.get('device_name')}\n\n"
                f"gap = step at the constant's SMs / best partition's step - 1, {a.confidence:.0%} interval; "
                f"{t.attrs['floor']}; {t.attrs['granularity']}\n")
        tab = table(t)
        try:
            body = tab.to_markdown(index=False)
        except ImportError:
            body = "```\n" + tab.to_string(index=False) + "\n```"
        deepep = t[t["constant"] == "deepep_v2"]["reason"].iloc[0]
        md.append(f"{head}\n{body}\n\ndeepep_v2: {deepep}\n")
        print(md[-1])
    (out / "comm_constants.md").write_text("\n".join(md))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
