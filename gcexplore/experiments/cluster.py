"""The Dask cluster of a local campaign: one worker process per GPU, on loopback or with TLS.

Whoever can reach a Dask scheduler or worker can run code on it as its user, so the
local cluster's listeners (scheduler, nannies, workers, dashboards) bind 127.0.0.1
unless the caller asks for a network address, and then only with TLS. Dask is imported
only when a cluster starts.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

from ..device.driver import UnsupportedError, device_count

__all__ = ["LOOPBACK", "ClusterStart", "local_cluster", "require_distributed", "visible_gpus"]


def visible_gpus() -> list[str]:
    """The GPUs this process may use: CUDA_VISIBLE_DEVICES entries, else 0..device_count-1."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [v.strip() for v in env.split(",") if v.strip()]

    try:
        return [str(i) for i in range(device_count())]
    except UnsupportedError:
        return []


def require_distributed():
    try:
        import distributed
    except ImportError:
        raise ImportError("campaigns run on Dask distributed, which is not installed: "
                          "pip install 'gcexplore[campaign]' (or pip install distributed)") from None
    return distributed


LOOPBACK = "127.0.0.1"
_MODULE = re.compile(r"[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*\Z")


def _is_loopback(host: str) -> bool:
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def local_devices(devices: Sequence | None = None) -> list[str]:
    """The GPUs a local campaign cluster has a worker for (default every visible one); raises
    UnsupportedError, in one sentence, where there are none."""
    devs = [str(d) for d in (visible_gpus() if devices is None else devices)]
    if not devs:
        why = "no GPU is visible here"
        try:
            device_count()
        except UnsupportedError as e:  # "no NVIDIA driver found", as every GPU-less error opens
            why = str(e).split(";")[0]
        raise UnsupportedError(f"{why}, so a local campaign cluster has no workers; pass client= "
                               "or scheduler='tcp://host:8786' to use a cluster whose workers have GPUs")
    return devs


def local_cluster(devices: Sequence | None = None, *, host: str = LOOPBACK, security=None,
                  dashboard_address: str | None = None, warm: Sequence[str] | None = None, **scheduler_options):
    """A Dask cluster on this machine: one worker process per GPU, one thread each.

    Each worker is a Nanny-managed process with ``CUDA_VISIBLE_DEVICES`` set to its one
    GPU before it starts, so a worker's device 0 is its own card. Whoever can reach a
    Dask scheduler or worker can run code on it as this user, so by default every
    listener (scheduler, nannies, workers, dashboard) is on the loopback interface
    only; a cluster reachable from other machines (``host`` not loopback) needs TLS.

    Parameters
    ----------
    devices : sequence of int or str, optional
        GPU indices or UUIDs; default every visible GPU.
    host : str, default "127.0.0.1"
        The interface every listener binds; a non-loopback address (``"0.0.0.0"``, the
        machine's own) needs ``security``.
    security : distributed.Security, optional
        TLS certificates with ``require_encryption=True``; the listeners then speak
        ``tls://`` and refuse peers without a certificate of the same authority.
    dashboard_address : str, optional
        Default a free port on ``host``.
    warm : sequence of str, optional
        Warm each worker as it starts, before it joins (the cluster's start then takes
        that long, in parallel on every worker): import gcexplore's experiments and these
        modules (``"bench.campaign_pairs"``), make the GPU context and compile the
        built-in kernels. None: the workers start bare (a campaign warms them by a task).

    The scheduler hands a worker its next task only when the worker is free (Dask's
    ``worker-saturation`` 1.0 here), so tasks start in the order the campaign gives
    (longest first) up to the last one.

    Raises
    ------
    UnsupportedError (a RuntimeError)
        No GPU is visible (pass ``client=`` or ``scheduler=`` to use a cluster elsewhere).
    ValueError
        A network-reachable ``host`` without a TLS ``security``.
    """
    d = require_distributed()
    Nanny, Scheduler, SpecCluster = d.Nanny, d.Scheduler, d.SpecCluster
    tls = security is not None and bool(getattr(security, "require_encryption", False))
    if not _is_loopback(host) and not tls:
        raise ValueError(f"a campaign cluster on {host!r} could be reached from the network, and whoever reaches "
                         "a Dask worker runs code as you: pass security=distributed.Security(tls_ca_file=..., "
                         "tls_scheduler_cert=..., tls_worker_cert=..., tls_client_cert=..., require_encryption=True) "
                         "(docs/guide.md, 'Campaigns on several machines'), or keep host='127.0.0.1'")
    devs = local_devices(devices)
    if warm is not None:
        bad = [m for m in warm if not _MODULE.match(str(m))]
        if bad:
            raise ValueError(f"warm names modules to import, such as 'bench.campaign_pairs'; got {bad}")
    bind = f"[{host}]" if ":" in host else host
    preload, preload_env = {}, {}
    if warm is not None:
        from ._campaign_preload import ENV, dask_setup

        preload = {"preload": [dask_setup.__module__]}
        preload_env = {ENV: ",".join(map(str, warm))}
    net = {"host": host, "protocol": "tls" if tls else "tcp", **({"security": security} if tls else {})}
    workers = {f"gpu{d}": {"cls": Nanny, "options": {"nthreads": 1, "name": f"gpu{d}", "silence_logs": 40,
                                                     "dashboard_address": f"{bind}:0", **net,
                                                     "env": {"CUDA_VISIBLE_DEVICES": d, **preload_env},
                                                     **preload}} for d in devs}
    scheduler = {"cls": Scheduler, "options": {"dashboard_address": dashboard_address or f"{bind}:0", **net,
                                               **scheduler_options}}
    import dask

    # one task per free worker: a second task queued on a worker early could leave another card idle at the end;
    # no statistical profiler (it samples the measuring thread's stack 100 times a second, taking the GIL from it)
    # and an event-loop check every 0.5 s, not 50 times a second (the Nannies hand this config to their workers)
    with dask.config.set({"distributed.scheduler.worker-saturation": 1.0, "distributed.worker.profile.enabled": False,
                          "distributed.admin.tick.interval": "500ms"}):
        return SpecCluster(workers=workers, scheduler=scheduler, name="gcexplore-campaign", silence_logs=40,
                           **({"security": security} if tls else {}))


class ClusterStart:
    """A local cluster started in a thread, its workers warmed as they start (``warm=``), while
    the client imports, checks and plans: the two overlap instead of adding up."""

    def __init__(self, devices, modules):
        import threading
        import time

        self.cluster, self.error, self.seconds, self._t0 = None, None, None, time.perf_counter()
        self.started_at = time.time()  # Unix seconds, to place the workers' start-up steps (their preload report)
        self._thread = threading.Thread(target=self._start, args=(devices, modules), name="gcexplore-cluster-start")
        self._thread.start()

    def _start(self, devices, modules):
        import time

        try:
            self.cluster = local_cluster(devices, warm=modules)
        except BaseException as e:  # raised in the caller's thread by result()
            self.error = e
        self.seconds = time.perf_counter() - self._t0

    def result(self):
        self._thread.join()
        if self.error is not None:
            raise self.error
        return self.cluster

    def discard(self) -> None:
        """The campaign failed before it used the cluster: close it once it is up."""
        self._thread.join()
        if self.cluster is not None:
            self.cluster.close()
