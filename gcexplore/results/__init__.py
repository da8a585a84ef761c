"""Results on disk and their checks: save / load with metadata (atomic writes), the recorded
results, Chrome-trace export, and the validation every analysis runs first."""

from .._lazy import face

PUBLIC = {"io": ("load", "load_recorded", "save"), "chrome_trace": ("to_chrome_trace",)}
EXTRA = {"io": ("recorded_names", "recorded_folder")}
# names this package offered before the families had packages of their own
MOVED: dict[str, str] = dict.fromkeys(("campaign_status", "load_campaign"), "gcexplore.campaigns.store")
__all__, __getattr__, __dir__, WHERE = face(__name__, PUBLIC, EXTRA, MOVED)
