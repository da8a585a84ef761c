"""What every figure shares: colours, the figure class, the provenance stamp, number formats."""

from __future__ import annotations

import io
import re
from typing import Any, Sequence

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import FixedFormatter

from .. import analysis as A
from ..results.run import stamp_text
from ..schema import MODE_DESCRIPTIONS, MODES

__all__ = ["WORKLOAD_COLORS", "figure_stamp", "fmt_value", "metric_label", "mode_color", "mode_label",
           "new_figure", "panel_format", "plain_text", "ratio_text", "require_result", "stamp"]

WORKLOAD_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2",
                    "#17becf", "#bcbd22")
_KNOWN_MODE_COLORS = {"alone": "#7f7f7f", "concurrent": "#1f77b4", "sequential": "#d62728",
                      "streams": "#ff7f0e"}
_SPARE_COLORS = ("#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22")


def mode_color(mode: str) -> str:
    """A mode's colour; a mode the schema gained later gets a spare colour, never dropped."""
    if mode in _KNOWN_MODE_COLORS:
        return _KNOWN_MODE_COLORS[mode]
    extra = [m for m in MODES if m not in _KNOWN_MODE_COLORS] + [mode]
    return _SPARE_COLORS[extra.index(mode) % len(_SPARE_COLORS)]


def mode_label(mode: str) -> str:
    return MODE_DESCRIPTIONS.get(mode, mode)


_DOLLAR = re.compile(r"(?<!\\)\$")


def plain_text(s) -> str:
    """``s`` as literal text for matplotlib: every ``$`` escaped, so no name from data
    (a workload, device or partition name) is parsed as mathtext, fails to render or
    draws as math. Escaping twice changes nothing."""
    return _DOLLAR.sub(r"\\$", str(s))


class _Figure(Figure):
    """A Figure that shows itself as PNG in IPython without pyplot's inline backend.

    gcexplore's figures never ask for mathtext, and their text holds names from data:
    every text is drawn literally (:func:`plain_text`), whichever code set it.
    """

    def draw(self, renderer):
        text: Any  # findobj's filter keeps the artists that have text
        for text in self.findobj(lambda a: hasattr(a, "get_text") and hasattr(a, "set_text")):
            raw = text.get_text()
            if isinstance(raw, str) and "$" in raw:
                text.set_text(plain_text(raw))
        for ax in self.axes:  # fixed tick labels are formatted at draw time, from the formatter
            for axis in (ax.xaxis, ax.yaxis):
                for fmt in (axis.get_major_formatter(), axis.get_minor_formatter()):
                    if isinstance(fmt, FixedFormatter):
                        fmt.seq = [plain_text(v) for v in fmt.seq]
        return super().draw(renderer)

    def _repr_png_(self) -> bytes:
        buf = io.BytesIO()
        self.savefig(buf, format="png", dpi=100)
        return buf.getvalue()


def new_figure(figsize=(8.0, 4.8), **kwargs) -> Figure:
    return _Figure(figsize=figsize, layout="constrained", **kwargs)


def require_result(df: pd.DataFrame, columns: Sequence[str], where: str, hint: str) -> None:
    """TypeError / ValueError unless ``df`` is a non-empty DataFrame with ``columns``."""
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"{where} expects a pandas DataFrame ({hint}); got {type(df).__name__}")
    missing = [c for c in columns if c not in df.columns]
    if missing:
        kind = df.attrs.get("kind", "unknown")
        raise ValueError(
            f"{where} needs the columns {missing}, which this DataFrame (kind {kind!r}, "
            f"columns {list(df.columns)}) lacks; pass {hint}")
    if df.empty:
        raise ValueError(f"{where} got an empty DataFrame; nothing was measured to draw")


def figure_stamp(attrs: dict) -> str:
    """The provenance line every figure carries: device, recorded or live, date.

    Parameters
    ----------
    attrs : dict
        A result's ``df.attrs`` (keys ``device_name``, ``device_sm_count``, ``date``,
        ``recorded``, ``driver_version`` are read when present).

    Returns
    -------
    str
        E.g. ``"NVIDIA H100 80GB HBM3 (132 SMs, driver 13.0) · recorded 2025-11-26"``.
    """
    return stamp_text(attrs)


def stamp(fig: Figure, df: pd.DataFrame, headline: str = "") -> None:
    """The provenance line on top, and under it the figure's takeaway when it has one."""
    fig.suptitle(figure_stamp(df.attrs) + (f"\n{headline}" if headline else ""), fontsize=9, color="0.3")


def fmt_value(v: float) -> str:
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"


def ratio_text(r: float) -> str:
    """A ratio of two medians with the digits their spread supports: 48x, 1.9x, 1.01x."""
    return f"{r:.0f}x" if r >= 10 else (f"{r:.1f}x" if r >= 1.95 else f"{r:.2f}x")


def panel_format(values) -> str:
    """One number format for every label of a panel, from its largest value."""
    top = max((abs(float(v)) for v in values if np.isfinite(v)), default=0.0)
    return "{:,.0f}" if top >= 100 else ("{:.1f}" if top >= 10 else "{:.2f}")


def metric_label(metric: str) -> str:
    return A.RATES.get(metric, metric)
