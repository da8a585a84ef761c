"""Where ``gcexplore info`` spends its time on a GPU machine (goal: under 0.5 s in all).

Each step runs in a fresh interpreter, timed from inside it, in the order ``info`` takes
them: the CUDA bindings, cuInit (``device_count``), ``import cuda.core``, the device
handle, making its primary context current, its SM resource; then the whole command
and ``device_info`` alone. Prints one row per step (median of ``--runs``) and writes
``info_time.json`` into ``--out``.

    python bench/info_time.py --out bench-out/info_time
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# One child: each step's seconds, printed as JSON (imports inside, so each is timed).
_STEPS = r"""
import json, time
t = [time.perf_counter()]
import cuda.bindings.driver
t.append(time.perf_counter())
import gcexplore.device.driver as D
t.append(time.perf_counter())
D.device_count()
t.append(time.perf_counter())
import cuda.core
t.append(time.perf_counter())
dev = cuda.core.Device(0)
t.append(time.perf_counter())
dev.set_current()
t.append(time.perf_counter())
dev.resources.sm.sm_count
t.append(time.perf_counter())
names = ["import cuda.bindings.driver", "import gcexplore.device.driver", "cuInit (device_count)",
         "import cuda.core", "cuda.core.Device(0)", "primary context (set_current)", "dev.resources.sm"]
print(json.dumps(dict(zip(names, [b - a for a, b in zip(t, t[1:])]))))
"""


def _wall(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    took = time.perf_counter() - t0
    if r.returncode:  # a quick failure is no timing
        raise SystemExit(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr.strip()[-400:]}")
    return took


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--out", required=True, help="folder for info_time.json")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from gcexplore.cli.needs import needs

    needs()
    steps: dict[str, list[float]] = {}
    for _ in range(args.runs):
        r = subprocess.run([sys.executable, "-c", _STEPS], cwd=ROOT, capture_output=True, text=True, check=True)
        for name, s in json.loads(r.stdout).items():
            steps.setdefault(name, []).append(s)
    for name, cmd in (("gcexplore info (whole command)", [sys.executable, "-m", "gcexplore.cli", "info"]),
                      ("device_info(0) (interpreter included)",
                       [sys.executable, "-c", "import gcexplore; gcexplore.device_info(0)"]),
                      ("python -c pass (interpreter alone)", [sys.executable, "-c", "pass"])):
        steps[name] = [_wall(cmd) for _ in range(args.runs)]
    print(f"{'step':42} {'median s':>9} {'max s':>7}")
    for name, times in steps.items():
        print(f"{name:42} {statistics.median(times):9.3f} {max(times):7.3f}")
    whole = statistics.median(steps["gcexplore info (whole command)"])
    print(f"gcexplore info: {whole:.2f} s (goal 0.5 s): {'met' if whole < 0.5 else 'not met'}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "info_time.json").write_text(json.dumps(steps, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
