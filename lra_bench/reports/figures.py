"""Saving report figures: a PNG at the given path and an SVG beside it (the one way every report figure is saved)."""

from __future__ import annotations

from pathlib import Path

from matplotlib.figure import Figure


def save_png_svg(fig: Figure, path: Path | str, dpi: int) -> Path:
    """Write ``path`` (PNG at ``dpi``) and ``path`` with suffix .svg, creating the folder; returns ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi)
    fig.savefig(path.with_suffix(".svg"))
    return path
