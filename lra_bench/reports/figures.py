"""What every report figure shares: the palette (one colour per mixer, the same in every plot), the y limits fitted
to the plotted data, and saving (a PNG at the given path and an SVG beside it)."""

from __future__ import annotations

import zlib
from pathlib import Path

import matplotlib
import numpy as np
from matplotlib.figure import Figure

#: 30 colours, the most distinct first: chosen greedily (sRGB grid of 21 levels per channel) for the largest smallest
#: CIE94 difference to the colours before them and to white, black, three greys and crimson (the paper's marks),
#: among lightness 35-70 and chroma 25-75, so each reads as a line on white and under a black error bar
DISTINCT = ("#1f77b4", "#66bf40", "#f280e6", "#665900", "#e69940", "#99008c", "#00b3b3", "#00664d", "#cc8c8c",
            "#8ca6ff", "#268000", "#8c66cc", "#b35900", "#8c8c59", "#80404d", "#cc4d8c", "#26b3e6", "#26808c",
            "#0d4db3", "#009966", "#664d73", "#ff664d", "#8cb38c", "#b3a600", "#a680a6", "#734d33", "#a66659",
            "#a61a00", "#ff73a6", "#59734d")

#: every mixer of the zoo (and those announced) with its colour: the baselines and the state-space models take the
#: most distinct colours, then the paper's rows in its order (synthesizer, drawn over flash in every plot, swapped
#: with mega away from flash's green), then the rest; a new mixer takes the next colour
PALETTE: dict[str, str] = dict(zip(
    ("softmax", "flash", "s4d", "lru", "local", "strided", "longformer", "linformer", "reformer", "sinkhorn",
     "mega", "bigbird", "linear", "performer", "global", "routing", "compressed", "nystromformer", "efficient",
     "rfa", "fnet", "gmlp", "mlp_mixer", "synthesizer", "mamba"), DISTINCT, strict=False))
SPARE = DISTINCT[len(PALETTE):]  # for names not in PALETTE (a mixer of your own)


def mixer_color(name: str) -> str:
    """The colour of mixer ``name`` in every figure: ``PALETTE[name]``; a name not in it (a mixer of your own) gets
    one of the SPARE colours by a hash of its name -- the same in every figure, but two such names may share one
    (add them to PALETTE to give each its own)."""
    return PALETTE.get(name) or SPARE[zlib.crc32(name.encode()) % len(SPARE)]


def fitted_limits(values, pad: float = 0.06, least: float = 1.0) -> tuple[float, float]:
    """(low, high) axis limits around the finite ``values`` (the plotted data, not reference lines): their range
    padded by ``pad`` of it on each side, at least ``least`` (data units) each side. ValueError when none is finite."""
    v = np.asarray(list(values), float)
    v = v[np.isfinite(v)]
    if not len(v):
        raise ValueError("no finite value to fit the axis to")
    margin = max(least, pad * float(v.max() - v.min()))
    return float(v.min() - margin), float(v.max() + margin)


def seeds_text(seeds) -> str:
    """"seed 0", "seeds 0, 1, 2", "seeds 0-9" (a run of 4 or more consecutive seeds): the seed numbers found, for a
    title."""
    found = sorted({int(s) for s in seeds})
    if not found:
        return "no seed"
    if len(found) == 1:
        return f"seed {found[0]}"
    if len(found) >= 4 and found == list(range(found[0], found[-1] + 1)):
        return f"seeds {found[0]}-{found[-1]}"
    return "seeds " + ", ".join(str(s) for s in found)


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
