"""The serving family: decode and prefill under load on two partitions. ``roles`` builds the
workloads (a synthetic decoder stack or the user's own, open-loop arrivals), ``experiment`` measures
(``serve``), ``advisor`` measures as little as it must (``advise_split``), ``analysis`` computes the
tails, goodput and advice (``margin``: how close a met SLO is), ``clocks`` checks the GPU clocks against
CUPTI, ``view`` draws them, ``cli`` is ``gcexplore serve``. Built on the core; nothing in the core imports it."""

from .._lazy import face
from .._registry import register_command
from . import kind as _kind  # noqa: F401 (registers the family's result kind)

PUBLIC = {
    "roles": ("decoder_stack", "serving_roles"),
    "experiment": ("serve",),
    "advisor": ("advise_split",),
    "analysis": ("ServingSLO", "goodput_table", "serving_table"),
    "view": ("plot_serving",),
}
EXTRA = {
    "roles": ("ARRIVALS", "ModelShape", "ServingModel", "arrivals"),
    "experiment": ("SERVING_MODES",),
    "analysis": ("Advice", "SERVING_TABLE_COLUMNS", "advise", "advise_recorded", "deadline_of", "loads_of",
                 "predict_serving", "prediction_errors", "trade_facts", "ttft_queue"),
}
__all__, __getattr__, __dir__, WHERE = face(__name__, PUBLIC, EXTRA)

register_command("serve", f"{__name__}.cli:add_serve")
