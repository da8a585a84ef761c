"""The campaigns family: a grid of experiments over several GPUs through Dask. ``grid`` is the
campaign (``campaign``, ``Campaign``), ``_task`` what runs on a worker, ``cluster`` and ``dispatch``
start the workers and feed them, ``_preload``, ``_fork_preload`` and ``worker_cpus`` prepare them,
``store`` is the folder (spec, shards, failures; ``disk_full`` when it has no room), ``best_splits`` a
campaign's best split per task, ``cli`` is ``gcexplore campaign``. Built on the core; nothing in the core imports it."""

from .._lazy import face
from .._registry import register_command

PUBLIC = {
    "grid": ("Campaign", "campaign", "register_experiment"),
    "store": ("campaign_status", "load_campaign"),
}
EXTRA = {"best_splits": ("task_best_splits",)}
__all__, __getattr__, __dir__, WHERE = face(__name__, PUBLIC, EXTRA)

register_command("campaign", f"{__name__}.cli:add_campaign")
register_command("cluster", f"{__name__}.cli:add_cluster")
