"""Label placement for the report figures: deterministic, no two labels overlapping, no two leader lines crossing.

* :func:`stack`: labels along one axis (the column of names beside the line ends of a curve plot, the names of
  reference lines at an axis edge), in the order of their targets and as close to them as the room allows (least
  squares, by pool-adjacent-violators): leaders from targets on one line to labels in the same order never cross.
* :func:`place`: labels around the points of a scatter (the bubble chart). Each label takes, in a fixed order of
  points, the cheapest spot on rings of growing radius around its point: cost = the distance, plus penalties for
  covering a circle, an error bar or another soft obstacle, and for a label without a leader that sits as near to
  another circle as to its own (it would read as that one's); a spot is refused when its box would overlap a placed
  label or a hard obstacle, leave the axes, or when its leader would cross a placed leader or run through a placed
  label (or a placed leader through it). Sizes are the rendered text extents, measured with the figure's renderer.

Every geometry here is in display pixels of the figure as it is drawn; offsets handed to matplotlib are in points,
so the layout holds at any dpi the figure is saved with.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np

Box = tuple[float, float, float, float]  # x0, y0, x1, y1 in display pixels
Segment = tuple[float, float, float, float]  # x0, y0, x1, y1 in display pixels

#: directions tried around a point, preferred first: right, left, above, below, then the diagonals and between
ANGLES = (0.0, 180.0, 90.0, 270.0, 45.0, 135.0, 315.0, 225.0, 22.5, 157.5, 337.5, 202.5, 67.5, 112.5, 292.5, 247.5)
PAD_PX = 2.0  # the least gap between two labels, and between a label and a hard obstacle
BOX_PAD = 0.1  # the label's white box: pad in units of its font size (boxstyle "square,pad=0.1")


def stack(targets, sizes, lo: float, hi: float, gap: float = 0.0) -> np.ndarray:
    """Centres (same order as ``targets``) for labels of extent ``sizes`` wanted at ``targets`` on one axis, inside
    [``lo``, ``hi``], at least ``gap`` apart, in the targets' order (ties by position in the input), minimising the
    squared distances to the targets. ValueError when they cannot fit in [lo, hi]."""
    t = np.asarray(targets, float)
    s = np.asarray(sizes, float)
    if t.shape != s.shape:
        raise ValueError(f"{len(t)} targets but {len(s)} sizes")
    if not len(t):
        return t
    order = np.argsort(t, kind="stable")
    ts, ss = t[order], s[order]
    steps = (ss[:-1] + ss[1:]) / 2 + gap  # least distance between consecutive centres
    offset = np.concatenate([[0.0], np.cumsum(steps)])
    need = offset[-1] + (ss[0] + ss[-1]) / 2
    if need > hi - lo + 1e-9:
        raise ValueError(f"{len(t)} labels need {need:.0f} px along the axis, the room is {hi - lo:.0f} px")
    # q = centre - offset must be nondecreasing: isotonic regression of (target - offset), then the bounds
    q = _isotonic(ts - offset)
    q = np.clip(q, lo + ss[0] / 2, hi - ss[-1] / 2 - offset[-1])
    out = np.empty_like(t)
    out[order] = q + offset
    return out


def _isotonic(y: np.ndarray) -> np.ndarray:
    """The nondecreasing sequence closest to ``y`` in least squares (pool adjacent violators, equal weights)."""
    means: list[float] = []
    counts: list[int] = []
    for v in y:
        means.append(float(v))
        counts.append(1)
        while len(means) > 1 and means[-2] > means[-1]:
            n = counts[-2] + counts[-1]
            means[-2] = (means[-2] * counts[-2] + means[-1] * counts[-1]) / n
            counts[-2] = n
            means.pop()
            counts.pop()
    return np.repeat(means, counts)


@dataclass
class Label:
    """A label for the point (x, y) in data coordinates, kept outside the point's circle of ``radius`` points."""

    x: float
    y: float
    text: str
    radius: float = 0.0
    fontsize: float = 9.0
    color: str = "black"
    style: str = "normal"


def overlaps(a: Box, b: Box, pad: float = 0.0) -> bool:
    return a[0] < b[2] + pad and b[0] < a[2] + pad and a[1] < b[3] + pad and b[1] < a[3] + pad


def _cross(o, a, b) -> float:
    return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0])


def segments_cross(s: Segment, t: Segment) -> bool:
    """True when the two segments share a point (touching counts)."""
    p, q, r, u = (s[0], s[1]), (s[2], s[3]), (t[0], t[1]), (t[2], t[3])
    d1, d2, d3, d4 = _cross(r, u, p), _cross(r, u, q), _cross(p, q, r), _cross(p, q, u)
    if ((d1 > 0) != (d2 > 0)) and ((d3 > 0) != (d4 > 0)) and 0 not in (d1, d2, d3, d4):
        return True

    def on(o, a, b):  # b on segment o-a, given collinear
        return min(o[0], a[0]) - 1e-9 <= b[0] <= max(o[0], a[0]) + 1e-9 and \
            min(o[1], a[1]) - 1e-9 <= b[1] <= max(o[1], a[1]) + 1e-9

    return ((d1 == 0 and on(r, u, p)) or (d2 == 0 and on(r, u, q)) or (d3 == 0 and on(p, q, r))
            or (d4 == 0 and on(p, q, u)))


def segment_hits_box(s: Segment, box: Box) -> bool:
    """True when the segment passes through the (closed) box: Liang-Barsky clipping."""
    x0, y0, x1, y1 = s
    dx, dy = x1 - x0, y1 - y0
    lo, hi = 0.0, 1.0
    for p, q in ((-dx, x0 - box[0]), (dx, box[2] - x0), (-dy, y0 - box[1]), (dy, box[3] - y0)):
        if p == 0:
            if q < 0:
                return False
            continue
        r = q / p
        if p < 0:
            lo = max(lo, r)
        else:
            hi = min(hi, r)
        if lo > hi:
            return False
    return True


def _box_exit(cx: float, cy: float, box: Box, tx: float, ty: float) -> tuple[float, float]:
    """Where the ray from the box centre (cx, cy) towards (tx, ty) leaves the box."""
    dx, dy = tx - cx, ty - cy
    half_w, half_h = (box[2] - box[0]) / 2, (box[3] - box[1]) / 2
    scale = min(half_w / abs(dx) if dx else math.inf, half_h / abs(dy) if dy else math.inf)
    return cx + dx * min(scale, 1.0), cy + dy * min(scale, 1.0)


def _circle_box_fraction(cx: float, cy: float, r: float, box: Box) -> float:
    """Share of the circle's bounding square covered by the box (a cheap measure of how much a label hides it)."""
    if r <= 0:
        return 0.0
    w = max(0.0, min(cx + r, box[2]) - max(cx - r, box[0]))
    h = max(0.0, min(cy + r, box[3]) - max(cy - r, box[1]))
    return w * h / (4 * r * r)


def _gap(box: Box, x: float, y: float, r: float) -> float:
    """Distance from the box to the edge of the circle (x, y, r); negative when they overlap."""
    dx = max(box[0] - x, 0.0, x - box[2])
    dy = max(box[1] - y, 0.0, y - box[3])
    return math.hypot(dx, dy) - r


def _ambiguous(box: Box, i: int, centres, radii) -> bool:
    """A label without a leader reads as the label of the nearest circle: True when another circle is as near."""
    own = _gap(box, *centres[i], radii[i])
    return any(_gap(box, x, y, r) < own + PAD_PX for j, ((x, y), r) in enumerate(zip(centres, radii, strict=True))
               if j != i)


def text_size(ax, text: str, fontsize: float, style: str = "normal") -> tuple[float, float]:
    """(width, height) in display pixels of ``text`` as the figure renders it, its white box included."""
    probe = ax.text(0, 0, text, fontsize=fontsize, style=style, transform=None)
    ext = probe.get_window_extent()
    probe.remove()
    pad = 2 * BOX_PAD * fontsize * ax.figure.dpi / 72.0
    return ext.width + pad, ext.height + pad


def place(ax, labels: list[Label], hard: list[Box] = (), soft: list[Box] = (), leader_color: str = "gray"):
    """Annotate every label without overlap (see the module's docstring); returns the annotations, in the order of
    ``labels``. ``hard``: boxes no label may overlap (other annotations); ``soft``: boxes a label should not cover
    (error bars). Call it after the layout is final (tight_layout, limits): it reads the axes' pixel geometry."""
    fig = ax.figure
    pt = fig.dpi / 72.0
    frame = ax.get_window_extent()
    inside = (frame.x0 + PAD_PX, frame.y0 + PAD_PX, frame.x1 - PAD_PX, frame.y1 - PAD_PX)
    centres = [tuple(ax.transData.transform((lb.x, lb.y))) for lb in labels]
    radii = [lb.radius * pt for lb in labels]
    sizes = [text_size(ax, lb.text, lb.fontsize, lb.style) for lb in labels]
    crowd = [sum(1 for (x2, y2) in centres if math.hypot(x2 - x, y2 - y) < 60 * pt) for (x, y) in centres]
    order = sorted(range(len(labels)), key=lambda i: (-crowd[i], -centres[i][1], centres[i][0], labels[i].text))
    placed: dict[int, Box] = {}
    leaders: dict[int, Segment] = {}
    reach = math.hypot(frame.width, frame.height)
    for i in order:
        cx, cy = centres[i]
        w, h = sizes[i]
        first = radii[i] + 2 * pt
        step = max(h / 2, 3 * pt)
        best, best_cost = None, math.inf
        ring = 0
        while first + ring * step < min(best_cost, reach):
            r = first + ring * step
            for rank, angle in enumerate(ANGLES):
                ux, uy = math.cos(math.radians(angle)), math.sin(math.radians(angle))
                bx, by = cx + ux * (r + w / 2), cy + uy * (r + h / 2)
                box = (bx - w / 2, by - h / 2, bx + w / 2, by + h / 2)
                if box[0] < inside[0] or box[1] < inside[1] or box[2] > inside[2] or box[3] > inside[3]:
                    continue
                if any(overlaps(box, b, PAD_PX) for b in placed.values()) or any(overlaps(box, b, PAD_PX)
                                                                                   for b in hard):
                    continue
                leader = None
                if ring > 0:
                    ex, ey = _box_exit(bx, by, box, cx, cy)
                    dist = math.hypot(ex - cx, ey - cy)
                    if dist <= radii[i]:
                        continue
                    sx, sy = cx + (ex - cx) * radii[i] / dist, cy + (ey - cy) * radii[i] / dist
                    leader = (sx, sy, ex, ey)
                    if any(segments_cross(leader, s) for s in leaders.values()):
                        continue
                    if any(segment_hits_box(leader, b) for b in placed.values()):
                        continue
                if any(segment_hits_box(s, box) for s in leaders.values()):
                    continue
                cost = r + rank * 0.3 * pt
                cost += 40 * pt * sum(_circle_box_fraction(x2, y2, r2, box)
                                      for j, ((x2, y2), r2) in enumerate(zip(centres, radii, strict=True)))
                cost += 20 * pt * sum(1 for b in soft if overlaps(box, b))
                if leader is None and _ambiguous(box, i, centres, radii):
                    cost += 15 * pt
                if leader is not None:
                    cost += 10 * pt * sum(1 for j, (x2, y2) in enumerate(centres) if j != i and radii[j] > 0
                                          and segment_hits_box(leader, (x2 - radii[j], y2 - radii[j],
                                                                        x2 + radii[j], y2 + radii[j])))
                if cost < best_cost:
                    best, best_cost = (box, leader), cost
            ring += 1
        if best is None:
            raise ValueError(f"no room for the label {labels[i].text!r} without overlapping another: enlarge the "
                             "figure or shorten the labels")
        placed[i], leader = best
        if leader is not None:
            leaders[i] = leader
    out = []
    for i, lb in enumerate(labels):
        box = placed[i]
        bx, by = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
        dx, dy = (bx - centres[i][0]) / pt, (by - centres[i][1]) / pt
        arrow = ({"arrowstyle": "-", "color": leader_color, "lw": 0.6, "shrinkA": 0, "shrinkB": lb.radius}
                 if i in leaders else None)
        out.append(ax.annotate(lb.text, (lb.x, lb.y), xytext=(dx, dy), textcoords="offset points", ha="center",
                               va="center", fontsize=lb.fontsize, color=lb.color, style=lb.style, zorder=5,
                               arrowprops=arrow, annotation_clip=False,
                               bbox={"boxstyle": f"square,pad={BOX_PAD}", "facecolor": "white", "alpha": 0.7,
                                     "edgecolor": "none"}))
    return out


COLUMN_GAP_PT = 16.0  # from the axes' right edge to the column of names: room for the leaders' slant


def column_height_pt(n: int, fontsize: float) -> float:
    """Points of height a column of ``n`` names at ``fontsize`` needs (what :func:`column` stacks)."""
    return n * (fontsize * 1.2 + 2 * BOX_PAD * fontsize + 1.0) + 4.0


def column(ax, entries: list[dict], fontsize: float = 7.0) -> list:
    """Names in a column right of ``ax``, one per entry (dicts: text, color, y in data units, and x: the data x
    where the entry's line ends, or None), stacked in the order of their y (a y outside the axis is held at its
    edge) as near to it as the room allows, each joined to its line's end by a leader: along the end's height to
    the axes' edge, then to the name -- all leaders leave the edge in the names' order, so none crosses another.
    Returns the Text artists. Call it once the layout and the limits are final; drawn in figure fractions, so it
    holds at any dpi. ValueError when the names cannot fit beside the axes (make the figure taller)."""
    fig = ax.figure
    frame = ax.get_window_extent()
    width, height = fig.bbox.width, fig.bbox.height
    pt = fig.dpi / 72.0
    sizes = [text_size(ax, e["text"], fontsize) for e in entries]
    right = ax.get_xlim()[1]
    ends = [ax.transData.transform((right if e.get("x") is None else e["x"], e["y"])) for e in entries]
    targets = np.clip([float(y) for _, y in ends], frame.y0, frame.y1)
    try:
        centres = stack(targets, [h for _, h in sizes], frame.y0 - 4 * pt, frame.y1 + 4 * pt, gap=1.0)
    except ValueError as e:
        raise ValueError(f"the names beside the panel do not fit: {e}; make the figure taller") from e
    x_text = frame.x1 + COLUMN_GAP_PT * pt
    out = []
    for e, (ex, ey), target, y in zip(entries, ends, targets, centres, strict=True):
        out.append(fig.text(x_text / width, y / height, e["text"], fontsize=fontsize, color=e["color"], ha="left",
                            va="center"))
        if e.get("x") is None:
            continue
        xs = [ex, frame.x1, x_text - 2 * pt]
        ys = [ey, target, y]
        fig.add_artist(plt.Line2D([x / width for x in xs], [v / height for v in ys], transform=fig.transFigure,
                                  color=e["color"], lw=0.5, alpha=0.7, ls=":" if ex < frame.x1 - 1 else "-"))
    return out
