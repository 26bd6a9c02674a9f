"""The comparison as one bar chart a reader understands without the table.

One group of bars per figure, one bar per mode, each figure as a share of what was possible (of the
questions, the tasks, the calls sent, the escalations), so figures of different sizes sit on one axis.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib
from matplotlib import pyplot

from coordinator.compare.figures import Figures

__all__ = ["plot"]

# (label, numerator, denominator): each bar is numerator / denominator of its mode, in percent.
_SHARES = (
    ("questions fully answered", "questions_answered", "questions"),
    ("tasks answered", "tasks_answered", "tasks"),
    ("calls wasted", "calls_wasted", "calls_sent"),
    ("escalations routed right", "escalations_routed", "escalations"),
)
_COLOURS = {"generic": "#c0504d", "generic-abort": "#e3a09e", "structured": "#4f81bd"}


def _share(figures: Figures, numerator: str, denominator: str) -> float:
    whole = getattr(figures, denominator)
    return 100.0 * getattr(figures, numerator) / whole if whole else 0.0


def plot(modes: dict[str, Figures], scenarios: int, seed: int, path: Path) -> Path:
    """Write the chart to ``path`` (PNG) and return it; its folder must exist (none is created)."""
    matplotlib.use("Agg")  # a file, never a window

    figure, axes = pyplot.subplots(figsize=(9, 4.8), dpi=120)
    width = 0.8 / len(modes)
    for index, (mode, figures) in enumerate(modes.items()):
        shares = [_share(figures, numerator, denominator) for _, numerator, denominator in _SHARES]
        positions = [group + (index - (len(modes) - 1) / 2) * width for group in range(len(_SHARES))]
        bars = axes.bar(positions, shares, width, label=mode, color=_COLOURS.get(mode))
        axes.bar_label(bars, fmt="%.0f%%", fontsize=8, padding=2)
    axes.set_xticks(range(len(_SHARES)), [label for label, _, _ in _SHARES])
    axes.set_ylabel("% of what was possible")
    axes.set_ylim(0, 110)
    kept = ", ".join(f"{mode} {figures.partial_results_kept}" for mode, figures in modes.items())
    axes.set_title(
        f"Generic errors against the contract: {scenarios} chaos scenarios, seed {seed}\n"
        f"partial results kept: {kept}",
        fontsize=10,
    )
    axes.legend(frameon=False)
    axes.spines[["top", "right"]].set_visible(False)
    figure.tight_layout()
    figure.savefig(path)  # into a folder that is there: `research compare` checks it, and creates none
    pyplot.close(figure)
    return path
