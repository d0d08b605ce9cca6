"""Noisy and busy benchmark cells: timings whose interquartile range is wide relative to their median, and
timings made while other processes used the cores.

On a loaded machine the timed steps of a cell scatter, and a log-log exponent fitted through such cells can
be nonsense (an exponent of -1.76 for linear attention was fitted from one). Table 2 and the scaling plot
flag those cells and exponents and give the command that re-runs them: more repeats make a new cell (the
repeat count is part of a cell's key) and the report keeps the newest cell of each length. A steadily slowed
cell does not scatter: each cell therefore records the cores other work used while it was timed
(``machine.other_cores``, ``lra_bench.infra.machine``); a ``busy`` cell is marked in Table 2 and left out of the
bubble chart. Cells from before that field have no verdict (never counted busy).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

NOISY_IQR = 0.25  # (q3 - q1) / median of the timed steps above this flags a cell
MARK = "⚠"
BUSY_MARK = "(busy)"
RERUN_REPEATS = 20


def relative_iqr(df: pd.DataFrame) -> pd.Series:
    """(q3 - q1) / median per cell; NaN where a quartile is missing or the cell did not finish."""
    q1, q3, median = (pd.to_numeric(df.get(c, np.nan), errors="coerce") for c in ("q1_s", "q3_s", "median_s"))
    spread = (q3 - q1) / median
    return spread.where(df["status"] == "ok")


def _verdict(df: pd.DataFrame, value: bool) -> pd.Series:
    """True where the cell's ``machine.busy`` verdict is ``value``; False where it is the other or unknown."""
    flag = df["machine.busy"] if "machine.busy" in df.columns else pd.Series(None, index=df.index, dtype=object)
    return flag.map(lambda v: v is value or v == float(value)).astype(bool)


def busy(df: pd.DataFrame) -> pd.Series:
    """True where a cell was timed while other work used the cores (``machine.busy``); False where unknown."""
    return _verdict(df, True)


def idle(df: pd.DataFrame) -> pd.Series:
    """True where the cell's load was measured and it was not busy (``machine.busy`` False); False where unknown."""
    return _verdict(df, False)


def with_noise(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` plus ``iqr_rel``, ``noisy`` (True where iqr_rel > NOISY_IQR) and ``busy``."""
    out = df.copy()
    out["iqr_rel"] = relative_iqr(out)
    out["noisy"] = out["iqr_rel"] > NOISY_IQR
    out["busy"] = busy(out)
    return out


def busy_note(cells: pd.DataFrame) -> str:
    """Markdown naming the cells of one setting timed while other work used the cores ('' when none)."""
    hit = cells[cells["busy"]]
    if hit.empty:
        return ""
    listed = ", ".join(f"{r.attention} N={int(r.n)} ({float(getattr(r, 'other_cores', float('nan'))):.2f} cores)"
                       for r in hit.rename(columns={"machine.other_cores": "other_cores"})
                       .sort_values(["attention", "n"]).itertuples())
    return (f"{BUSY_MARK} **{len(hit)} of {len(cells)} cells timed while other work used the cores** (other "
            f"processes' average use during the timed steps, beyond the cores the cell left spare): {listed}. "
            f"Their speeds are slower than the code; the bubble chart leaves them out. Re-run them on an idle "
            f"machine:\n\n```bash\n{rerun_command(hit)}\n```\n")


def rerun_command(cells: pd.DataFrame) -> str:
    """One benchmark command that re-runs the given cells (same task, profile, batch, lengths and modes)."""
    first = cells.iloc[0]
    attentions = ",".join(sorted(cells["attention"].unique()))
    lens = ",".join(str(int(n)) for n in sorted(cells["n"].unique()))
    modes = ",".join(sorted(cells["mode"].unique()))
    previous = pd.to_numeric(cells["repeats"], errors="coerce").max() if "repeats" in cells else np.nan
    repeats = max(RERUN_REPEATS, 2 * int(previous)) if np.isfinite(previous) else RERUN_REPEATS
    task = first["task"] if isinstance(first.get("task"), str) else "text"  # the benchmark's default task
    multi = "-m " if "," in attentions else ""
    block = first.get("block")
    model = f" model={block}" if isinstance(block, str) and block != "transformer" else ""
    return (f"python scripts/benchmark.py {multi}attention={attentions}{model} task={task} profile={first['profile']} "
            f"'bench.seq_lens=[{lens}]' 'bench.modes=[{modes}]' bench.batch_size={int(first['batch'])} "
            f"bench.repeats={repeats}")


def noise_note(cells: pd.DataFrame) -> str:
    """Markdown naming the noisy cells of one setting and the command that re-runs them ('' when none)."""
    noisy = cells[cells["noisy"]]
    if noisy.empty:
        return ""
    listed = ", ".join(f"{r.attention} N={int(r.n)} (IQR {r.iqr_rel:.0%} of the median)"
                       for r in noisy.sort_values(["attention", "n"]).itertuples())
    measured_idle = idle(noisy)
    if measured_idle.all():  # the load was measured and low: "find an idle machine" would not help
        cause = ("The machine was idle while they were timed (other work stayed under the busy threshold), so the "
                 "spread is not load: it comes from the steps themselves or from the variants taking turns. Re-run "
                 "them with more repeats, one variant at a time if several took turns")
    else:
        cause = ("Some were timed on an idle machine, the others probably on a busy one. " if measured_idle.any()
                 else "The machine was probably busy. ") + "Re-run them on an idle machine"
    return (f"{MARK} **Noisy timings**: {listed}. Their interquartile range exceeds {NOISY_IQR:.0%} of the median, so "
            f"these cells and the time exponents fitted from them are unreliable. {cause} (the newer cells replace "
            f"these in the report):\n\n```bash\n{rerun_command(noisy)}\n```\n")
