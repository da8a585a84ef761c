"""How far any model built from each workload alone can go: ceilings of the predicted best split.

``python3 bench/predict_ceiling.py RUN_DIR ...`` (no GPU; bench/predict.py's --out folders) prints the table of
:func:`gcexplore.prediction.ceiling.ceilings` (what each row means is said there).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

import gcexplore as gx
from gcexplore.prediction.ceiling import ceilings, pair_table
from gcexplore.prediction.check import predict_kwargs

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", help="bench/predict.py --out folders")
    ap.add_argument("--references", default="copy,memory,compute,latency,scale,elementwise",
                    help="workloads whose pairs stand in for probes (comma-separated)")
    args = ap.parse_args(argv)
    kw = predict_kwargs(gx.load_recorded("predict_profiles").attrs["fit"])
    df = pd.concat([pair_table(Path(r), kw) for r in args.runs], ignore_index=True)
    df = df[np.isfinite(df["measured_ms"]) & (df["measured_ms"] > 0)].reset_index(drop=True)
    refs = [w for w in args.references.split(",") if w]
    print(f"predicted best split within 3% of the measured best, checked-only pairs of {len(args.runs)} runs "
          f"(references: {', '.join(refs)}):")
    print(ceilings(df, refs).to_string(index=False, float_format="{:.3f}".format))
    return 0


if __name__ == "__main__":
    sys.exit(main())
