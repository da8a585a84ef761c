"""The user's step in a comm run on the CPU (issue 48): ``CommSpec(compute=...)`` checked when built and
before any rank starts, the factory built per layout on that layout's compute stream by the real rank
program (its GPU parts stood in: no torch, no NCCL, no green contexts), rows kept when a factory raises;
dtypes and bucketed gradients (one collective call per bucket); and the refusal of one communicator on
two partitions (sglang#31117) before anything of the step is enqueued."""

from __future__ import annotations

import contextlib
import itertools
import sys
import types

import pytest

import gcexplore as gx
from gcexplore.comm import collectives, compute, rank
from gcexplore.comm.compute import CommunicatorShared, check_communicators
from gcexplore.comm.rank import CommSpec

import _comm_compute_standin as standin

SM = 132
CARD = gx.DeviceInfo(name="stand-in H100", index=0, compute_capability=(9, 0), sm_count=SM, min_partition_size=8,
                     alignment=8, driver_version=13000)


# ------------------------------------------------------------------------------ the spec's checks


@pytest.mark.parametrize("kwargs, error, match", [
    ({"compute": 3}, TypeError, "package.module:function"),
    ({"compute": standin.step}, TypeError, "does not travel to a spawned rank"),
    ({"compute": "not a factory"}, ValueError, "built-in recipe .* or a factory 'package.module:function'"),
    ({"compute": "memory:n=-4"}, ValueError, "must be positive"),
    ({"compute": "memory:width=4"}, ValueError, "has no option 'width'"),
    ({"compute": "memory", "compute_kwargs": {"n": 4}}, ValueError, "options go in the recipe"),
    ({"compute_kwargs": {"n": 4}}, ValueError, "with compute=None"),
    ({"compute": "_comm_compute_standin:step", "compute_kwargs": {"stream": 1}}, ValueError, "the rank passes"),
    ({"compute": "_comm_compute_standin:step", "compute_kwargs": {"width": object()}}, ValueError, "JSON"),
    ({"compute": "_comm_compute_standin:step", "compute_kwargs": [1]}, TypeError, "a mapping"),
    ({"dtype": "int8"}, ValueError, "float32, bfloat16, float16"),
    ({"sizes": ["64M"], "buckets": [["32M", "32M"]]}, ValueError, "64M repeats"),
    ({"buckets": [["1M", "3M"], ["2M", "2M"]]}, ValueError, "4M repeats"),
    ({"buckets": [[]]}, ValueError, "a bucket must be a non-empty list"),
])
def test_spec_refuses_a_bad_user_step_when_built(kwargs, error, match):
    with pytest.raises(error, match=match):
        CommSpec(**kwargs)


def test_spec_keeps_the_users_step():
    s = CommSpec(compute="_comm_compute_standin:step", compute_kwargs={"width": 8}, dtype="bfloat16",
                 sizes=["1M"], buckets=[["25M", "25M", "14M"], [1 << 20, "2M"]])
    assert s.compute == "_comm_compute_standin:step" and s.compute_kwargs == {"width": 8}
    assert s.buckets == ((25 << 20, 25 << 20, 14 << 20), (1 << 20, 2 << 20))
    meta = s.metadata()
    assert meta["compute"] == s.compute and meta["dtype"] == "bfloat16" and meta["compute_kwargs"] == {"width": 8}
    assert CommSpec(compute=" memory:n=1024 ").compute == "memory:n=1024"
    assert CommSpec().compute is None  # the GEMM chain stays the default


@pytest.mark.parametrize("ref, error, match", [
    ("no_such_module_gcx:step", ValueError, "cannot be imported here"),
    ("_comm_compute_standin:missing", ValueError, "cannot be imported here"),
    ("_comm_compute_standin:NOT_A_FUNCTION", TypeError, "not a function"),
    ("_comm_compute_standin:needs_x", TypeError, "does not name the parameter"),
])
def test_a_factory_that_cannot_be_built_is_refused_before_any_rank_starts(ref, error, match):
    spec = CommSpec(compute=ref, comm_sms=(16,))
    with pytest.raises(error, match=match):
        spec.check(CARD, 2)


def test_sizes_must_split_into_the_dtypes_elements():
    CommSpec(sizes=[6], dtype="float16").check(CARD, 3)  # 3 ranks x 2 bytes
    with pytest.raises(ValueError, match="multiple of 12 bytes .float32"):
        CommSpec(sizes=[6]).check(CARD, 3)
    with pytest.raises(ValueError, match="multiple of 4 bytes .bfloat16"):
        CommSpec(sizes=["1M"], buckets=[["1M", 6]], dtype="bfloat16").check(CARD, 2)


# ------------------------------------------------------------------------------ stand-ins for the GPU parts


class _Stream:
    def __init__(self, name):
        self.name, self.handle = name, 0

    def __cuda_stream__(self):
        return (0, 0)

    def __repr__(self):
        return f"<stream {self.name}>"

    def wait(self, event):
        pass

    def record(self, options=None):
        return _Event()


class _Event:
    clock = itertools.count()

    def __init__(self):
        self.t = next(_Event.clock) * 0.01

    def __sub__(self, other):
        return self.t - other.t

    def sync(self):
        pass


class _Engine:
    def __init__(self, info, streams=2):
        self.gate, self.event_options, self.spins = _Stream("gate"), None, []
        self.whole = types.SimpleNamespace(streams=[_Stream("whole-a"), _Stream("whole-b")])

    def launch_spin(self, stream, ns):
        self.spins.append(stream)

    def close(self):
        pass


class _Comm:
    made: list = []

    def __init__(self, nranks=2):
        self.nranks, self.calls, self.destroyed = nranks, [], False
        _Comm.made.append(self)

    def allreduce(self, send, recv, op, stream):
        self.calls.append(("allreduce", send, stream))

    def split(self, color, key, config=None):
        return _Comm(self.nranks)

    def destroy(self):
        self.destroyed = True


class _Parts:
    def __init__(self, k):
        self.label = f"{k}+{SM - k}"
        self._p = [types.SimpleNamespace(sm_count=k, stream=_Stream(f"p0:{k}"))]
        self.remainder = types.SimpleNamespace(sm_count=SM - k, stream=_Stream(f"rest:{SM - k}"))

    def __getitem__(self, i):
        return self._p[i]


@pytest.fixture
def standins(monkeypatch):
    """The rank program with no GPU: a torch, NCCL, engine and split of its own; tensors are their sizes."""
    from gcexplore.device import driver, partitions
    from gcexplore.experiments import engine

    cuda = types.SimpleNamespace(set_device=lambda d: None, synchronize=lambda d=None: None,
                                 get_stream_from_external=lambda h, device=None: ("torch stream", h),
                                 stream=lambda s: contextlib.nullcontext())
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda, __version__="stand-in"))
    nccl = types.SimpleNamespace(SUM="sum", Communicator=types.SimpleNamespace(init=lambda n, r, uid: _Comm(n)),
                                 UniqueId=types.SimpleNamespace(from_bytes=lambda b: b))
    monkeypatch.setattr(collectives, "nccl_module", lambda: nccl)
    monkeypatch.setattr(collectives, "nccl_versions", lambda: {"nccl4py": "stand-in", "nccl": "2.28.9"})
    monkeypatch.setattr(collectives, "_tensors", lambda send, recv, device, dtype="float32": ((send, dtype), recv))
    monkeypatch.setattr(driver, "device_info", lambda device=0: CARD)
    monkeypatch.setattr(engine, "Engine", _Engine)
    monkeypatch.setattr(partitions, "split", lambda ks, device=0, rounding="exact": contextlib.nullcontext(_Parts(ks[0])))
    _Comm.made.clear()
    standin.CALLS.clear()
    return nccl


def _spec(**kw):
    return CommSpec(**{"collectives": ("allreduce",), "sizes": ("1M",), "comm_sms": (16, 32), "ctas": (), "repeats": 3,
                       "warmup": 1, "trace": False, **kw})


def test_the_users_compute_is_built_per_layout_on_its_compute_stream(standins):
    sent = []
    meta = rank.run_rank(0, 2, b"uid", _spec(compute="_comm_compute_standin:step", compute_kwargs={"width": 8}),
                         sent.append)
    calls = standin.CALLS
    # baselines on the whole GPU's compute stream, then the largest partition first, each on its remainder
    assert [(c["stream"].name, c["sm_count"]) for c in calls] == [("whole-b", SM), ("rest:100", 100), ("rest:116", 116)]
    assert all(c["width"] == 8 and c["device"] == 0 for c in calls)
    rows = [r for tag, rs in sent if tag == "rows" for r in rs]
    compute = {(r["layout"], r["mode"]) for r in rows if r["workload"] == "compute"}
    assert compute == {(lay, m) for lay in ("plain", "16+116", "32+100") for m in ("alone", "overlapped")}
    assert meta["rank"] == 0


def test_a_factory_that_raises_keeps_the_rows_measured_before(standins):
    sent = []
    with pytest.raises(RuntimeError, match="needs the whole GPU, got 100 SMs"):
        rank.run_rank(0, 2, b"uid", _spec(compute="_comm_compute_standin:fails_on_a_partition"), sent.append)
    rows = [r for tag, rs in sent if tag == "rows" for r in rs]
    assert rows and {r["layout"] for r in rows} == {"plain"}  # the baselines, sent before the partition's build
    assert all(c.destroyed for c in _Comm.made)  # the rank closed what it opened


def test_a_factory_that_names_comm_gets_a_communicator_of_its_own(standins):
    rank.run_rank(0, 2, b"uid", _spec(compute="_comm_compute_standin:with_comm"), lambda m: None)
    main, own = _Comm.made[0], standin.CALLS[0]["comm"]
    assert own is not main and {id(c["comm"]) for c in standin.CALLS} == {id(own)}  # one, made once
    assert own.destroyed and main.destroyed


def test_a_recipe_of_the_built_ins_is_built_as_the_compute(standins, monkeypatch):
    from gcexplore.workloads import spec as wspec

    built = []

    def as_workload(obj, name=None, *, device=0):
        built.append((obj, name, device))
        return gx.workloads.Workload(name or "x", lambda *, stream: None)

    monkeypatch.setattr(wspec, "as_workload", as_workload)
    rank.run_rank(0, 2, b"uid", _spec(compute="memory:n=1024"), lambda m: None)
    assert built == [("memory:n=1024", "compute", 0)] * 3  # the baselines and each partition


def test_bucketed_gradients_are_one_collective_call_each(standins):
    comm = _Comm(2)
    wl = collectives.bucketed(comm, "allreduce", [1 << 20, 3 << 20, 1 << 20], device=0, dtype="bfloat16")
    assert wl.bytes == 5 << 20 and collectives.collective(comm, "allreduce", 8, device=0).fn.communicators == (comm,)
    s = _Stream("p0")
    wl.fn(stream=s)
    assert [(c[0], c[1], c[2]) for c in comm.calls] == [("allreduce", ((n >> 1, "bfloat16")), s)
                                                      for n in (1 << 20, 3 << 20, 1 << 20)]
    sent = []
    rank.run_rank(0, 2, b"uid", _spec(buckets=[["1M", "3M"]], comm_sms=(16,), compute="_comm_compute_standin:step"),
                  sent.append)
    rows = [r for tag, rs in sent if tag == "rows" for r in rs]
    assert {r["size_bytes"] for r in rows if r["workload"] == "comm"} == {1 << 20, 4 << 20}  # a point per bucket list


# ------------------------------------------------------------------------------ one communicator per partition


def _wl(name, comms):
    def run(*, stream):
        raise AssertionError("nothing of a refused step may be enqueued")

    run.communicators = tuple(comms)
    return gx.workloads.Workload(name, run)


def test_one_communicator_on_two_partitions_is_refused_with_why_and_what_to_do():
    c, d = object(), object()
    p0, p1 = _Stream("p0"), _Stream("p1")
    with pytest.raises(CommunicatorShared, match="deadlock .sglang#31117.*comm.split") as e:
        check_communicators([(_wl("comm", [c]), p0), (_wl("tp_allreduce", [c]), p1)])
    assert "'comm' and 'tp_allreduce' run on two partitions" in str(e.value)
    assert isinstance(e.value, ValueError)
    check_communicators([(_wl("comm", [c]), p0), (_wl("tp_allreduce", [d]), p1)])  # one each: fine
    check_communicators([(_wl("a", [c]), p0), (_wl("b", [c]), p0)])  # one stream: NCCL sees one order
    check_communicators([(_wl("comm", [c]), p0), (gx.workloads.Workload("gemm", lambda *, stream: None), p1)])


def test_the_stepper_refuses_before_it_enqueues_anything():
    eng, barriers = _Engine(None), []
    st = rank._Stepper(eng, lambda stream: barriers.append(stream))
    c = object()
    with pytest.raises(CommunicatorShared):
        st.step([(_wl("comm", [c]), _Stream("p0")), (_wl("compute", [c]), _Stream("p1"))])
    assert eng.spins == [] and barriers == []  # no gate, no barrier, no workload


def test_a_users_compute_declaring_the_ranks_communicator_is_refused_in_the_rank(standins, monkeypatch):
    def shares(device=0):  # a step that runs its own collectives on the rank's communicator
        def run(*, stream):
            pass

        run.communicators = (_Comm.made[0],)
        return run

    monkeypatch.setattr(standin, "shares", shares, raising=False)
    sent = []
    with pytest.raises(CommunicatorShared, match="two partitions"):
        rank.run_rank(0, 2, b"uid", _spec(compute="_comm_compute_standin:shares"), sent.append)
    rows = [r for tag, rs in sent if tag == "rows" for r in rs]
    assert {(r["mode"], r["workload"]) for r in rows} <= {("alone", "compute"), ("alone", "comm")}  # never overlapped
    assert compute.communicators_of(shares()) == (_Comm.made[0],)


def test_the_command_line_takes_the_users_step_and_checks_it_first(tmp_path, capsys):
    from gcexplore.cli import main
    from gcexplore.comm.cli import spec_from

    out = str(tmp_path / "c.parquet")
    for argv, said in ((["--compute", "not a factory"], "or a factory 'package.module:function'"),
                       (["--compute", "_comm_compute_standin:step", "--compute-kwargs", "{width: 8}"], "JSON object"),
                       (["--dtype", "int8"], "float32, bfloat16, float16")):
        assert main(["comm", *argv, "--out", out]) == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and said in err
    assert not list(tmp_path.iterdir())
    import argparse

    from gcexplore.comm.cli import add_comm

    ap = argparse.ArgumentParser()
    add_comm(ap.add_subparsers())
    args = ap.parse_args(["comm", "--compute", "_comm_compute_standin:step", "--compute-kwargs", '{"width": 8}',
                          "--dtype", "bfloat16", "--out", out])
    s = spec_from(args)
    assert (s.compute, s.compute_kwargs, s.dtype) == ("_comm_compute_standin:step", {"width": 8}, "bfloat16")
