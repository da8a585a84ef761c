"""A synthetic communication-SMs result from a known model, for the CPU tests of the analysis and the
recommendation (no GPU, no NCCL).

Model (ms): compute alone on c SMs = COMPUTE * 132 / c; a collective alone on k SMs moves its bus
bytes at min(PEAK, k * PER_SM) GB/s plus LATENCY; beside each other the compute is INTERFERE slower
and the collective SLOWER slower; a step ends with the later of the two. Each rank adds its own
small noise, so the slowest rank decides.
"""

from __future__ import annotations

import numpy as np

SM = 132
COMPUTE = 1.7
PEAK = 360.0  # GB/s bus bandwidth
PER_SM = 24.0  # GB/s per SM of the comm partition
LATENCY = 0.02
INTERFERE = 1.03
SLOWER = 1.05
ZERO_SLOWER = 1.02  # the compute beside a copy-engine collective


def factor(coll: str, n: int) -> float:
    return (2.0 if coll == "allreduce" else 1.0) * (n - 1) / n


def comm_ms(coll: str, size: int, n: int, k: int) -> float:
    bw = min(PEAK, k * PER_SM)
    return LATENCY + size * factor(coll, n) / (bw * 1e9) * 1e3


def compute_ms(c: int) -> float:
    return COMPUTE * SM / c


def comm_result(*, nranks=2, collectives=("allreduce", "allgather"), sizes=(1 << 20, 256 << 20, 1 << 30),
                comm_sms=(8, 16, 24, 32, 40, 48, 56, 64), ctas=(8, 16), repeats=10, noise=0.002, seed=0,
                zero=False):
    import gcexplore as gx
    from gcexplore.schema import frame

    rng = np.random.default_rng(seed)
    rows = []

    def add(base, mode, parts):
        for rep in range(repeats):
            per_rank = []
            for rank in range(nranks):
                times = {w: v * (1 + abs(rng.normal(0, noise))) for w, v in parts.items()}
                per_rank.append(times)
                step = max(times.values()) + 0.005
                for w, v in times.items():
                    rows.append({**base, "nranks": nranks, "rank": rank, "mode": mode, "rep": rep, "workload": w,
                                 "start_ms": 0.005, "duration_ms": v, "step_ms": step,
                                 "flops": 1e12 if w == "compute" else float("nan"),
                                 "bytes": float(base["size_bytes"]) if w == "comm" else float("nan")})

    layouts = [({"setup": "partition", "layout": f"{k}+{SM - k}", "comm_sm_count": k, "compute_sm_count": SM - k,
                 "max_ctas": None}, k, SM - k, 1.0) for k in comm_sms]
    layouts.append(({"setup": "plain", "layout": "plain", "comm_sm_count": SM, "compute_sm_count": SM,
                     "max_ctas": None}, 32, SM, 1.15))
    layouts += [({"setup": "ctas", "layout": f"ctas={c}", "comm_sm_count": SM, "compute_sm_count": SM,
                  "max_ctas": c}, c, SM, 1.10) for c in ctas]
    if zero:  # copy engines: the collective at the saturated rate, the compute ZERO_SLOWER slower beside it
        layouts.append(({"setup": "zero", "layout": "zero", "comm_sm_count": 0, "compute_sm_count": SM,
                         "max_ctas": None}, 32, SM, ZERO_SLOWER / INTERFERE))
    for lay, k, c, share in layouts:
        add({**lay, "collective": "", "size_bytes": 0}, "alone", {"compute": compute_ms(c)})
        for coll in collectives:
            if lay["setup"] == "zero" and coll not in ("allgather", "alltoall"):
                continue
            for size in sizes:
                base = {**lay, "collective": coll, "size_bytes": size}
                add(base, "alone", {"comm": comm_ms(coll, size, nranks, k)})
                add(base, "overlapped", {"comm": comm_ms(coll, size, nranks, k) * SLOWER,
                                         "compute": compute_ms(c) * INTERFERE * share})
    attrs = {"kind": "comm", "device_name": "synthetic H100", "device_sm_count": SM, "nranks": nranks,
             "run_id": "synthetic", "recorded": False, "nccl_version": "2.28.9",
             "zero_sm": gx.comm.collectives.zero_sm_offered("2.28.9")[1]}
    return frame(rows, "comm", attrs)
