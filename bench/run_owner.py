"""Nothing slower with one owner for the run (CPU only): this tree against an earlier commit.

Each measurement runs in a fresh interpreter with ``PYTHONPATH`` set to one tree (this one, or
the ``--against`` commit unpacked with ``git archive``), timed from inside it (the CLI from outside);
the two trees alternate within each of ``--runs`` runs and the median is kept. Measured: ``import gcexplore`` (and which heavy libraries it loaded), the
sweep explorer over the recorded sweep with three redraws (``from_results`` and two split
moves), the text report of the recorded sweep, and ``gcexplore compare`` of the recorded
sweeps and of the recorded campaign by card. Prints one row per measurement with the ratio
(this tree / the earlier one) and writes ``run_owner.json`` into ``--out``.

    python bench/run_owner.py --against 3b1ac70 --out bench-out/run_owner
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

STEPS = {
    "import gcexplore": r"""
import time, sys
t = time.perf_counter(); import gcexplore; t = time.perf_counter() - t
heavy = [m for m in ('matplotlib', 'ipywidgets', 'pyarrow', 'pandas', 'cuda.core') if m in sys.modules]
print(t, ','.join(heavy) or '-')
""",
    "sweep explorer, 3 redraws": r"""
import time, gcexplore
from gcexplore import widgets
df = gcexplore.load_recorded('sweep')
t = time.perf_counter()
sx = widgets.SweepExplorer.from_results(df)
sx.split_slider.value = 24
sx.split_slider.value = 40
print(time.perf_counter() - t, sx.redraws.get('summary', '?'))
""",
    "text report (recorded sweep)": r"""
import time, gcexplore
from gcexplore.views.report import layout_report
df = gcexplore.load_recorded('sweep')
t = time.perf_counter(); text = layout_report(df)
print(time.perf_counter() - t, len(text.splitlines()))
""",
}
CLI = {
    "gcexplore compare sweep sweep_second": ["compare", "{data}/sweep.parquet", "{data}/sweep_second.parquet"],
    "gcexplore compare campaign --by device_uuid": ["compare", "{data}/campaign.parquet", "--by", "device_uuid"],
}


def _tree(ref: str, into: Path) -> Path:
    data = subprocess.run(["git", "-C", str(ROOT), "archive", ref], check=True, capture_output=True).stdout
    tar = into / "tree.tar"
    tar.write_bytes(data)
    with tarfile.open(tar) as t:
        t.extractall(into / "tree", filter="data")
    return into / "tree"


def _env(tree: Path) -> dict:
    return {**os.environ, "PYTHONPATH": str(tree), "MPLBACKEND": "Agg"}


def _step(tree: Path, code: str) -> tuple[float, str]:
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tree, env=_env(tree))
    if r.returncode:
        raise RuntimeError(f"step failed in {tree}: {r.stderr[-800:]}")
    secs, note = r.stdout.split()[:2]
    return float(secs), note


def _cli(tree: Path, args: list[str]) -> tuple[float, str]:
    argv = [a.format(data=tree / "gcexplore" / "data") for a in args]
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "gcexplore.cli", *argv], capture_output=True, text=True, cwd=tree,
                       env=_env(tree))
    return time.perf_counter() - t, f"exit {r.returncode}"


def measure(trees: dict[str, Path], runs: int) -> dict:
    """Per tree and measurement, the median over ``runs``; the trees alternate within each run, so a
    busy machine slows both alike."""
    got: dict = {name: {} for name in trees}
    for _ in range(runs):
        for what, code in STEPS.items():
            for name, tree in trees.items():
                got[name].setdefault(what, []).append(_step(tree, code))
        for what, args in CLI.items():
            for name, tree in trees.items():
                got[name].setdefault(what, []).append(_cli(tree, args))
    return {name: {w: (statistics.median(s for s, _ in v), v[-1][1]) for w, v in per.items()}
            for name, per in got.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--against", default="3b1ac70", help="the earlier commit (default: before issue 23)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", default="bench-out/run_owner")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        got = measure({"before": _tree(args.against, Path(tmp)), "after": ROOT}, args.runs)
    before, after = got["before"], got["after"]
    rows = [{"what": k, "before_s": before[k][0], "after_s": after[k][0], "ratio": after[k][0] / before[k][0],
             "before": before[k][1], "after": after[k][1]} for k in after]
    print(f"{'what':46} {'before s':>9} {'after s':>9} {'ratio':>6}  before / after")
    for r in rows:
        print(f"{r['what']:46} {r['before_s']:9.3f} {r['after_s']:9.3f} {r['ratio']:6.2f}  {r['before']} / {r['after']}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "run_owner.json").write_text(json.dumps({"against": args.against, "runs": args.runs, "rows": rows},
                                                   indent=1))


if __name__ == "__main__":
    main()
