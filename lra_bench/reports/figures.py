"""Saving report figures: a PNG at the given path and an SVG beside it (the one way every report figure is saved)."""

from __future__ import annotations

from pathlib import Path

import matplotlib
from matplotlib.figure import Figure


def save_png_svg(fig: Figure, path: Path | str, dpi: int) -> Path:
    """Write ``path`` (PNG at ``dpi``) and ``path`` with suffix .svg, creating the folder; returns ``path``.

    Both are byte-stable for the same figure (no creation date, fixed SVG ids), so regenerating a curated report
    from unchanged records changes no file in git."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi)
    with matplotlib.rc_context({"svg.hashsalt": "lra-bench"}):
        fig.savefig(path.with_suffix(".svg"), metadata={"Date": None})
    return path
