"""The API layer on a real GPU: plan vs driver, SM ids, isolation of library work, use()."""

from __future__ import annotations

import itertools
import threading

import pytest

import gcexplore
from gcexplore.device import driver as api

pytestmark = pytest.mark.gpu


def _current():
    return int(api.current_context())


def _driver_split(info, counts):
    """Ask the driver directly (dry run), bypassing gcexplore.split."""
    from cuda.core import SMResourceOptions

    with gcexplore.use(info.index) as dev:
        groups, rem = dev.resources.sm.split(SMResourceOptions(count=list(counts)), dry_run=True)
    return [int(g.sm_count) for g in groups], int(rem.sm_count)


def test_device_info_reads_the_device(info):
    from cuda.core import Device

    dev = Device(0)
    assert info.sm_count == dev.properties.multiprocessor_count
    assert info.name == dev.name
    assert info.min_partition_size > 0 and info.alignment > 0
    assert info.valid_sm_counts()[0] >= info.min_partition_size
    assert info.features["green_contexts"] and info.features["green_context_streams"]
    print(f"\n{info}")


def test_plan_matches_driver_for_every_valid_count(info):
    for k in info.valid_sm_counts() + [1, info.alignment + 1, info.sm_count // 2]:
        plan = gcexplore.plan_split(info, [k])
        assert _driver_split(info, [k]) == (plan.granted, plan.remainder), k


def test_plan_matches_driver_for_equal_groups(info):
    checked = 0
    for n in range(1, 8):
        for k in info.valid_sm_counts():
            if n * k > info.sm_count:
                break
            plan = gcexplore.plan_split(info, [k] * n)
            assert _driver_split(info, [k] * n) == (plan.granted, plan.remainder), (n, k)
            checked += 1
    assert checked > 30


def test_split_grants_the_plan(info):
    for counts in ([24], [16, 16], [66], [8] * 7):
        plan = gcexplore.plan_split(info, counts)
        with gcexplore.split(counts) as parts:
            assert [p.sm_count for p in parts] == plan.granted
            assert [p.requested_sm_count for p in parts] == list(counts)
            rem = parts.remainder
            assert (rem.sm_count if rem else 0) == plan.remainder
            assert parts.label == plan.label


@pytest.mark.parametrize("counts", [[16, 32], [8, 24, 40]])
def test_heterogeneous_split(info, counts):
    with gcexplore.split(counts) as parts:
        assert [p.sm_count for p in parts] == counts
        assert parts.remainder.sm_count == info.sm_count - sum(counts)
        print(f"\n{parts}")


LAYOUTS = [[24], [8, 16], [16, 32], [8, 24, 40], [64, 64], [66], [8] * 4]


@pytest.mark.parametrize("counts", LAYOUTS, ids=lambda c: "+".join(map(str, c)))
def test_partitions_run_on_their_own_disjoint_sms(info, counts):
    with gcexplore.split(counts) as parts:
        seen = {}
        for p in parts.all:
            ids = p.sm_ids()
            assert len(ids) == p.sm_count, (p, sorted(ids))
            assert all(0 <= i < 1024 for i in ids)
            seen[p.name] = ids
        for (a, ia), (b, ib) in itertools.combinations(seen.items(), 2):
            assert not (ia & ib), f"{a} and {b} share SMs {sorted(ia & ib)}"
        assert sum(len(v) for v in seen.values()) == info.sm_count


def test_primary_context_runs_on_every_sm(info):
    with gcexplore.split([24]):
        with gcexplore.whole_device() as dev:
            assert len(dev.sm_ids()) == info.sm_count


def test_torch_matmul_is_confined_to_its_partition(info):
    torch = pytest.importorskip("torch")
    n = 8192

    def timed(stream):
        with torch.cuda.stream(stream):
            a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
            b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
            for _ in range(2):
                a @ b
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record(stream)
            for _ in range(3):
                a @ b
            end.record(stream)
        end.synchronize()
        return start.elapsed_time(end) / 3

    with gcexplore.whole_device() as whole:
        t_all = timed(whole.torch_stream())
    with gcexplore.split([8]) as parts:
        t_8 = timed(parts[0].torch_stream())
    print(f"\n8192^3 bf16 matmul: whole device {t_all:.3f} ms, 8 SMs {t_8:.3f} ms ({t_8 / t_all:.1f}x)")
    assert t_8 >= 8 * t_all


def test_cupy_runs_on_a_partition():
    cupy = pytest.importorskip("cupy")
    with gcexplore.split([16]) as parts:
        s = parts[0].cupy_stream()
        with s:
            x = cupy.arange(1 << 20, dtype=cupy.float32)
            total = float((x * 2).sum())
        s.synchronize()
    assert total == pytest.approx(2 * (1 << 20) * ((1 << 20) - 1) / 2, rel=1e-5)


# --- use(): stateless restore -------------------------------------------------


def _in_fresh_thread(fn):
    out = {}

    def run():
        try:
            out["value"] = fn()
        except BaseException as e:  # surfaced below
            out["error"] = e

    t = threading.Thread(target=run)
    t.start()
    t.join()
    if "error" in out:
        raise out["error"]
    return out["value"]


def test_use_restores_null_context():
    def body():
        assert _current() == 0
        with gcexplore.use(0):
            assert _current() != 0
        return _current()

    assert _in_fresh_thread(body) == 0


def test_use_restores_null_after_exception():
    def body():
        with pytest.raises(KeyError):
            with gcexplore.use(0):
                raise KeyError("boom")
        return _current()

    assert _in_fresh_thread(body) == 0


def test_use_restores_previous_green_context():
    with gcexplore.split([16, 16]) as parts:
        def body():
            with gcexplore.use(parts[0]):
                green = _current()
                assert green == int(parts[0].context.handle)
                with gcexplore.use(0):
                    assert _current() not in (0, green)
                    with gcexplore.use(parts[1]):
                        assert _current() == int(parts[1].context.handle)
                    with pytest.raises(ValueError):
                        with gcexplore.use(parts[1]):
                            raise ValueError
                assert _current() == green
            return _current()

        assert _in_fresh_thread(body) == 0


def test_use_nested_deeply_restores_each_level():
    with gcexplore.split([8, 8, 8]) as parts:
        targets = [0, parts[0], parts[1], 0, parts[2], parts.remainder] * 3

        def body():
            seen = []

            def nest(i):
                seen.append(_current())
                if i == len(targets):
                    return
                with gcexplore.use(targets[i]):
                    nest(i + 1)
                assert _current() == seen[i]

            nest(0)
            return _current()

        assert _in_fresh_thread(body) == 0


def test_use_is_per_thread():
    with gcexplore.split([16, 16]) as parts:
        barrier = threading.Barrier(2)
        results = {}

        def worker(k):
            try:
                before = _current()
                with gcexplore.use(parts[k]):
                    barrier.wait(timeout=10)
                    inside = _current()
                    barrier.wait(timeout=10)
                results[k] = (before, inside, _current())
            except BaseException as e:
                results[k] = e

        threads = [threading.Thread(target=worker, args=(k,)) for k in (0, 1)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for k in (0, 1):
            assert not isinstance(results[k], BaseException), results[k]
            before, inside, after = results[k]
            assert before == 0 and after == 0
            assert inside == int(parts[k].context.handle)


@pytest.mark.multigpu
def test_use_restores_device_across_gpus():
    from cuda.bindings import runtime

    def body():
        with gcexplore.use(0):
            assert runtime.cudaGetDevice()[1] == 0
            with gcexplore.use(1):
                assert runtime.cudaGetDevice()[1] == 1
            assert runtime.cudaGetDevice()[1] == 0
            ctx0 = _current()
            with pytest.raises(RuntimeError):
                with gcexplore.use(1):
                    raise RuntimeError
            assert _current() == ctx0 and runtime.cudaGetDevice()[1] == 0
        return _current()

    assert _in_fresh_thread(body) == 0


# --- lifecycle and errors -------------------------------------------------------


def test_close_is_idempotent_and_closed_handles_refuse_use():
    parts = gcexplore.split([16])
    p = parts[0]
    parts.close()
    parts.close()
    assert parts.is_closed and p.is_closed
    with pytest.raises(gcexplore.GreenContextError, match="is closed"):
        p.stream
    with pytest.raises(gcexplore.GreenContextError, match="is closed"):
        parts[0]
    with pytest.raises(gcexplore.GreenContextError, match="is closed"):
        with gcexplore.use(p):
            pass


def test_extra_streams_and_priorities():
    with gcexplore.split([16], streams=3) as parts:
        p = parts[0]
        assert len(p.streams) == 3 and len({int(s.handle) for s in p.streams}) == 3
        s = p.create_stream(priority=-1)
        assert s.priority == -1
        assert int(s.context.handle) == int(p.context.handle)


def test_bad_requests_on_the_gpu(info):
    with pytest.raises(ValueError, match=f"has {info.sm_count} SMs; valid partition sizes are"):
        gcexplore.split([info.sm_count + 68])
    with pytest.raises(ValueError, match="does not exist"):
        gcexplore.device_info(64)
    with pytest.raises(ValueError, match=r"streams must be an int in \[1, 64\], got 0"):
        gcexplore.split([16], streams=0)


def test_structured_split_options_gate_on_driver(info):
    if info.features["structured_split"]:
        pytest.skip(f"driver {info.driver_version_str} has the structured split")
    with pytest.raises(gcexplore.UnsupportedError, match=r"requires driver 13\.1, found 13\.0"):
        gcexplore.split([16, 16], coscheduled_sm_count=8)


def test_closed_layouts_are_reused_with_their_sms():
    gcexplore.release_contexts()
    with gcexplore.split([24, 40]) as first:
        ids = [p.sm_ids() for p in first.all]
        handles = [int(p.context.handle) for p in first.all]
        assert not first.reused
        per_layout = len(first._layout.contexts) + len(first._layout.temps)
    with gcexplore.split([24, 40]) as again:
        assert again.reused
        assert [int(p.context.handle) for p in again.all] == handles
        assert [p.sm_ids() for p in again.all] == ids
    with gcexplore.split([24, 40]) as a, gcexplore.split([24, 40]) as b:
        assert a.reused != b.reused  # only one kept layout exists; the other is new
        for pa in a.all:
            for pb in b.all:
                assert int(pa.context.handle) != int(pb.context.handle)
    assert gcexplore.release_contexts() == 2 * per_layout


def test_reuse_false_destroys_contexts():
    parts = gcexplore.split([16], reuse=False)
    ctxs = [p.context for p in parts.all]
    parts.close()
    assert all(c.is_closed for c in ctxs)


def test_split_close_cycles_leak_nothing():
    from cuda.bindings import driver

    def free_bytes():
        with gcexplore.use(0):
            return api.check(driver.cuMemGetInfo(), "cuMemGetInfo")[0]

    with gcexplore.split([8]):  # first-use allocations happen before the baseline
        pass
    before = free_bytes()
    for i in range(300):
        counts = [[16], [8, 24], [16, 16]][i % 3]
        with gcexplore.split(counts):
            pass
    after = free_bytes()
    print(f"\nfree memory before {before / 2**20:.0f} MiB, after 300 cycles {after / 2**20:.0f} MiB")
    assert abs(after - before) <= 0.01 * before


def test_device_facts_from_the_bindings_match_cuda_core(info):
    """device_info reads the SM resource through the driver API (no cuda.core import, no context):
    the same facts cuda.core's dev.resources.sm gives."""
    from cuda.core import Device

    from gcexplore.device import driver

    facts = driver.bindings_facts(info.index)
    dev = Device(info.index)
    with gcexplore.use(info.index):
        sm = dev.resources.sm
        want = {"name": dev.name, "compute_capability": tuple(dev.compute_capability), "sm_count": int(sm.sm_count),
                "min_partition_size": int(sm.min_partition_size), "alignment": int(sm.coscheduled_alignment)}
    assert facts == want
    assert (info.sm_count, info.min_partition_size, info.alignment) == (want["sm_count"], want["min_partition_size"],
                                                                        want["alignment"])
