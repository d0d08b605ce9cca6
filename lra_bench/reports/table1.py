"""LRA Table 1 from run records: test accuracy (%) per attention and task, mean and 95 % interval over seeds and
test examples, marks against a reference variant and the confidence set for the best
(:mod:`lra_bench.reports.verdicts`), collapsed runs (:mod:`lra_bench.reports.chance`), failure cells, the paper's
5-task average and the 6-task average with Path-X FAIL counted as 50 (shared/reference/LRA.md §2.1).

Rules, stated once:

* Records are read with :func:`load_runs`; unreadable or truncated ``record.json`` files are skipped with a
  warning, never fatal. Of several records with the same ``config_hash`` only the latest counts. Names (task,
  attention, profile) are shown with control characters escaped, so no record can split a row.
* Synthetic-data runs (``synthetic: true``, or a synthetic data source) never enter a score.
* A cell is (profile, attention, task) under one training protocol (``records.protocol_of``: from scratch, or
  self-pretrained first): records of several protocols are split first (``reports.protocols.by_protocol``, one
  Table 1 each) and never share a cell.
* Within a protocol, a cell holds one identity: one configuration (the resolved config but the
  seed: ``variant``) scored on one test set (``test_set``, the test inputs' and labels' fingerprint). When records
  of several identities share a cell, the identity of the newest ok record is used (the newest record's, when none
  is ok): a later success replaces an earlier failure of another configuration. The others are left out and listed
  below the table with what they were (:func:`conflicts`). The code version of each record is kept in the records,
  not in the identity: seeds of one configuration run at different commits form one cell.
* Within a cell, one record per seed counts: the latest one.
  Its value is the mean of the ok runs' test accuracy over seeds with a 95 % interval (:func:`interval`) that
  holds both sources of noise, the seeds and the test examples drawn, clipped to [0, 100] and never of zero width;
  with one seed, the Wilson interval of its test sample alone. A cell with no ok run but a failed / OOM / killed /
  diverged one reads FAIL / OOM / KILL / DIV; a cell never run is blank. Runs at chance are counted as collapsed.
* "LRA avg (5)" is the mean of the 5 task means (ListOps, Text, Retrieval, Image, Pathfinder), as the paper;
  when some of the 5 are missing, or a task is at chance for every variant (shown, but left out), it is the mean
  over the others, marked "partial (k/5 tasks)"; its interval combines the task means' (independent test sets,
  Welch-Satterthwaite df).
* "avg (6, Path-X FAIL=50)" is the convention of later papers (S4 ...): the 5 task means plus Path-X, with a
  Path-X that failed (or was never run, marked ``*``) counted as 50; only defined when all 5 tasks are present.
"""

from __future__ import annotations

import logging
import math
import unicodedata
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from lra_bench.reports import paper
from lra_bench.reports import significance as sig
from lra_bench.reports.chance import cell_at_chance, collapsed
from lra_bench.reports.same_predictions import representatives
from lra_bench.reports.store import read_json_tree
from lra_bench.reports.tasks import TASK_LABELS, TASKS, TASKS5
from lra_bench.reports.verdicts import AVG, verdicts_note, verdicts_of
from lra_bench.stats.intervals import (
    binomial_se,
    cell_interval,
    mean_interval,
    seeds_binomial_interval,
    t_interval,
    wilson,
)
from lra_bench.store import predictions
from lra_bench.store.records import RECORD_NAME, STATUSES, protocol_of, semantic_hash

log = logging.getLogger(__name__)

FAIL_LABELS = {"oom": "OOM", "killed": "KILL", "diverged": "DIV", "failed": "FAIL"}
AVG5 = "LRA avg (5)"
AVG6 = "avg (6, Path-X FAIL=50)"
PAPER_AVG = "paper avg (5)"
PATHX_FAIL_SCORE = 50.0
#: tie-break when picking a profile automatically: the bigger, more faithful setting first
PROFILE_RANK = ("paper", "small", "cpu", "smoke")

RUN_COLUMNS = ["task", "attention", "profile", "seed", "status", "test_acc", "synthetic", "params",
               "examples_per_s", "steps_per_s", "batch_size", "seq_len", "peak_bytes", "test_majority_rate",
               "device", "config_hash", "finished_at", "message", "path", "evals", "test_examples", "predictions",
               "variant", "test_set", "test_fingerprint", "code_version",
               "protocol", "pair_key", "ft_steps", "pt_steps", "pretrain_s", "train_loop_s", "pretraining"]
CELL = ["profile", "attention", "task"]
IDENTITY = ["variant", "test_set"]
REFERENCE = "softmax"  # what every variant is tested against unless told otherwise (--reference)


def _is_synthetic(rec: dict) -> bool:
    if rec.get("synthetic"):
        return True
    if rec.get("dataset_source") == "synthetic":
        return True
    task_cfg = (rec.get("config") or {}).get("task") or {}
    return isinstance(task_cfg, dict) and task_cfg.get("source") == "synthetic"


def _number(value) -> float:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return math.nan
    return out if math.isfinite(out) else math.nan


def pairing(config: dict) -> tuple[str, float, float]:
    """(pair_key, fine-tune steps, pretraining steps) of a resolved config: runs that differ only in their
    protocol, seed and step budgets share the pair_key (the protocol-effect table pairs them by it)."""
    trainer = config.get("trainer") if isinstance(config.get("trainer"), dict) else {}
    pre = config.get("pretrain") if isinstance(config.get("pretrain"), dict) else {}
    rest = {k: v for k, v in _placeless(config).items() if k not in ("pretrain", "seed", "trainer")}
    key = semantic_hash({**rest, "trainer": {k: v for k, v in trainer.items() if k != "max_steps"}})
    return key, _number(trainer.get("max_steps")), _number(pre.get("max_steps", 0))


def printable(text: str) -> str:
    """``text`` with every control or format character (a newline, a tab, an escape sequence, a zero-width one)
    escaped as Python would write it, and Markdown's column separator ``|`` escaped: one table cell, one line."""
    out = "".join(repr(c)[1:-1] if unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp") else c for c in text)
    return out.replace("|", "\\|")


def _placeless(config: dict) -> dict:
    """``config`` without ``task.data_dir``: where the data lay (it moves between machines and sittings) is not what
    was run; which data was is the cell's test set (``test_set_of``), a fingerprint of the data itself."""
    task = config.get("task")
    if isinstance(task, dict) and "data_dir" in task:
        return {**config, "task": {k: v for k, v in task.items() if k != "data_dir"}}
    return config


def variant_of(rec: dict) -> str:
    """The configuration a record ran, whatever its seed and wherever its data lay: the semantic hash of its config
    without the seed and ``task.data_dir``."""
    config = rec.get("config")
    if not isinstance(config, dict):
        return "unknown"  # a record without its config (written by hand): one identity for all of them
    return semantic_hash({k: v for k, v in _placeless(config).items() if k != "seed"})


def test_fingerprint_of(rec: dict) -> str:
    """The fingerprint of the test set a record was scored on (``predictions.test_fingerprint``: its inputs and
    labels): the record's, or older records' the one their predictions carry; "" when it has neither."""
    kept = rec.get(predictions.FIELD) if isinstance(rec.get(predictions.FIELD), dict) else {}
    return str(rec.get("test_fingerprint") or kept.get("test_fingerprint") or "")


def test_set_of(rec: dict) -> str:
    """The test set a record was scored on, as a cell's identity: its test fingerprint, else the dataset's."""
    return test_fingerprint_of(rec) or str(rec.get("dataset_fingerprint") or "")


def _row(rec: dict) -> dict:
    """One flat row of a record; raises ValueError when the record cannot be placed in Table 1."""
    for key in ("task", "attention", "status"):
        if not isinstance(rec.get(key), str) or not rec[key]:
            raise ValueError(f"no {key!r}")
    if rec["status"] not in STATUSES:
        raise ValueError(f"status {rec['status']!r} not in {STATUSES}")
    thr = rec.get("throughput") if isinstance(rec.get("throughput"), dict) else {}
    mem = rec.get("memory") if isinstance(rec.get("memory"), dict) else {}
    phases = rec.get("phases") if isinstance(rec.get("phases"), dict) else {}
    config = rec.get("config") if isinstance(rec.get("config"), dict) else {}
    acc = _number(rec.get("test_acc"))
    if not math.isnan(acc) and not 0.0 <= acc <= 1.0:
        raise ValueError(f"test_acc {acc} outside [0, 1]")
    return {
        "task": printable(rec["task"]), "attention": printable(rec["attention"]),
        "profile": printable(str(rec.get("profile", "?"))),
        "seed": rec.get("seed"), "status": rec["status"], "test_acc": acc, "synthetic": _is_synthetic(rec),
        "params": _number(rec.get("params")), "examples_per_s": _number(thr.get("examples_per_s")),
        "steps_per_s": _number(thr.get("steps_per_s")), "batch_size": _number(thr.get("batch_size")),
        "seq_len": _number(thr.get("seq_len")), "peak_bytes": _number(mem.get("peak_bytes")),
        "test_majority_rate": _number(rec.get("test_majority_rate")), "device": str(rec.get("device", "")),
        "config_hash": rec.get("config_hash") or rec.get("_path"),
        "finished_at": str(rec.get("finished_at") or rec.get("started_at") or ""),
        "message": printable(str(rec.get("message") or "")), "path": rec.get("_path", ""),
        "evals": rec["evals"] if isinstance(rec.get("evals"), list) else [],
        "test_examples": _number(rec.get("test_examples")),
        "predictions": rec[predictions.FIELD] if isinstance(rec.get(predictions.FIELD), dict) else None,
        "variant": variant_of(rec), "test_set": test_set_of(rec),
        "test_fingerprint": test_fingerprint_of(rec), "code_version": str(rec.get("code_version") or ""),
        "protocol": protocol_of(config), **dict(zip(("pair_key", "ft_steps", "pt_steps"), pairing(config),
                                                   strict=True)),
        "pretrain_s": _number(phases.get("pretrain_s")), "train_loop_s": _number(phases.get("train_loop_s")),
        "pretraining": rec["pretraining"] if isinstance(rec.get("pretraining"), dict) else None,
    }


def load_runs(results_dir: Path | str) -> pd.DataFrame:
    """One row per readable record under ``results_dir`` (``RUN_COLUMNS``), the latest per ``config_hash``.

    Corrupt, truncated or incomplete records are skipped with a warning (logged and ``warnings.warn``);
    synthetic runs are kept here, flagged in ``synthetic``, and left out by :func:`table1`.
    """
    results_dir = Path(results_dir)
    if not results_dir.is_dir():
        log.warning("no records: %s is not a folder", results_dir)
        return pd.DataFrame(columns=RUN_COLUMNS)
    raw, skipped = read_json_tree(results_dir, RECORD_NAME)
    rows = []
    for rec in raw:
        try:
            rows.append(_row(rec))
        except ValueError as e:
            log.warning("skipping incomplete record %s: %s", rec.get("_path"), e)
            skipped.append(rec.get("_path", "?"))
    if skipped:
        warnings.warn(f"skipped {len(skipped)} unreadable, incomplete or misfiled record(s): {', '.join(skipped)}",
                      stacklevel=2)
    if not rows:
        return pd.DataFrame(columns=RUN_COLUMNS)
    df = pd.DataFrame(rows, columns=RUN_COLUMNS)
    df = df.sort_values(["finished_at", "path"], kind="stable").drop_duplicates("config_hash", keep="last")
    return df.reset_index(drop=True)


def _candidates(df: pd.DataFrame, profile: str | None) -> pd.DataFrame:
    """The non-synthetic runs of ``profile`` (every profile: None), oldest first, each with its identity's rank
    in its cell (``_rank`` 0 = the one used: the identity of the newest ok record, else of the newest record)."""
    out = df[~df["synthetic"].astype(bool)]
    if profile is not None:
        out = out[out["profile"] == profile]
    mixed = out.groupby(["profile", "attention", "task"])["protocol"].nunique() if "protocol" in out else None
    if mixed is not None and (mixed > 1).any():
        cells = ", ".join(f"{a}/{t} ({p})" for p, a, t in mixed[mixed > 1].index)
        raise ValueError(f"records of several training protocols in one cell: {cells}; give each protocol its own "
                         "table (lra_bench.reports.protocols.by_protocol)")
    out = out.sort_values(["finished_at", "path"], kind="stable")
    if out.empty:
        return out.assign(_rank=pd.Series(dtype=int))
    ok = (out["status"] == "ok") & out["test_acc"].notna()
    marks = out.assign(_ok_pos=np.where(ok, np.arange(len(out)), -1), _pos=np.arange(len(out)))
    last = marks.groupby([*CELL, *IDENTITY], sort=False).agg(ok_pos=("_ok_pos", "max"), pos=("_pos", "max"))
    last = last.reset_index().sort_values(["ok_pos", "pos"], ascending=False, kind="stable")  # newest ok first
    last["_rank"] = last.groupby(CELL, sort=False).cumcount()
    ranks = out.merge(last[[*CELL, *IDENTITY, "_rank"]], on=[*CELL, *IDENTITY], how="left")["_rank"]
    return out.assign(_rank=ranks.to_numpy())


def scored_runs(df: pd.DataFrame, profile: str | None = None) -> pd.DataFrame:
    """The runs that count for scores: not synthetic, in ``profile`` if given, one identity per cell (the newest ok
    one; :func:`conflicts` lists the others), the latest record per seed. Pure: it warns about nothing (the report
    lists the conflicts once)."""
    if df.empty:
        return df
    out = _candidates(df, profile)
    out = out[out["_rank"] == 0].assign(_seed=out["seed"].astype(str))
    kept = out.drop_duplicates([*CELL, "_seed"], keep="last")
    return kept.drop(columns=["_seed", "_rank"]).reset_index(drop=True)


CONFLICT_COLUMNS = ["profile", "attention", "task", "used_variant", "used_test_set", "variant", "test_set", "records",
                    "statuses", "newest", "paths", "runs"]


def conflicts(df: pd.DataFrame, profile: str | None = None) -> pd.DataFrame:
    """Every identity left out of a cell because another one is used there (:func:`scored_runs`): what it was
    (its configuration and test set, how many records with which statuses, the newest) and which was used."""
    if df.empty:
        return pd.DataFrame(columns=CONFLICT_COLUMNS)
    out = _candidates(df, profile)
    used = out[out["_rank"] == 0].drop_duplicates(CELL).set_index(CELL)[IDENTITY]
    rows = []
    for key, g in out[out["_rank"] > 0].groupby([*CELL, *IDENTITY], sort=True):
        counts = g["status"].value_counts()
        rows.append({**dict(zip([*CELL, *IDENTITY], key, strict=True)),
                     "used_variant": used.loc[key[:3], "variant"], "used_test_set": used.loc[key[:3], "test_set"],
                     "records": len(g), "statuses": ", ".join(f"{n} {s}" for s, n in counts.items()),
                     "newest": str(g["finished_at"].max()), "paths": list(g["path"]),
                     "runs": [Path(str(path)).parent.name for path in g["path"]]})
    return pd.DataFrame(rows, columns=CONFLICT_COLUMNS)


def conflicts_note(df: pd.DataFrame, profile: str | None = None) -> str:
    """Markdown: the records left out of Table 1's cells because another configuration (or test set) is used there,
    one line each; empty when there are none."""
    left = conflicts(df, profile)
    if left.empty:
        return ""

    def what(variant: str, test_set: str, other_test_set: str) -> str:
        return f"config {variant[:10]}" + (f", test set {test_set[:10]}" if test_set != other_test_set else "")

    lines = [f"**Left out**: records of another configuration or test set than the one a cell uses (a cell holds "
             f"one; it uses the one with the newest ok record). {len(left)} left out:\n"]
    for r in left.itertuples():
        runs = ", ".join(f"`{printable(run)}`" for run in r.runs[:3]) + (f" and {len(r.runs) - 3} more"
                                                                          if len(r.runs) > 3 else "")
        lines.append(f"- {r.attention} / {TASK_LABELS.get(r.task, r.task)} (profile `{r.profile}`): left out "
                     f"{what(r.variant, r.test_set, r.used_test_set)} ({r.records} record(s): {r.statuses}; newest "
                     f"{r.newest}; {runs}); used {what(r.used_variant, r.used_test_set, r.test_set)}")
    return "\n".join(lines) + "\n"


def pick_profile(df: pd.DataFrame) -> str | None:
    """The profile with the most (attention, task) cells holding an ok, non-synthetic run; ties by PROFILE_RANK."""
    runs = scored_runs(df)
    if runs.empty:
        return None
    ok = runs[(runs.status == "ok") & runs.test_acc.notna()]
    base = ok if not ok.empty else runs
    coverage = base[["profile", "attention", "task"]].drop_duplicates().groupby("profile").size()

    def rank(p: str) -> int:
        return PROFILE_RANK.index(p) if p in PROFILE_RANK else len(PROFILE_RANK)

    return sorted(coverage.index, key=lambda p: (-coverage[p], rank(p), p))[0]


def attention_order(names) -> list[str]:
    """The paper's row order for the attentions it has, then the others alphabetically."""
    names = set(names)
    known = [a for a in paper.TABLE1 if a in names]
    return known + sorted(names - set(known))


CELL_COLUMNS = ["profile", "attention", "task", "mean", "std", "n", "lo", "hi", "se", "df", "interval", "accs", "seeds",
                "failures", "majority", "collapsed", "collapsed_seeds", "at_chance", "sample"]
ONE_SEED = "1 seed: test sampling only"
#: the kinds of a cell's interval (its ``interval`` column)
BOTH, BINOMIAL, SEEDS_ONLY = "seeds + test examples", "seeds + binomial test sampling", "seeds only"


def interval(cell: sig.Sample, test_examples: float) -> dict:
    """95 % interval of a cell (%): with 2+ seeds and per-example predictions, over seeds and test examples
    (:func:`lra_bench.stats.intervals.cell_interval`); with 2+ seeds but no predictions, the seeds' spread plus the
    binomial bound of test sampling; with 2+ seeds and no known test size, Student t over seeds alone; with one seed
    the Wilson interval of its test sample (labelled ONE_SEED); NaN without a known test size."""
    n = len(cell.accs)
    if n >= 2 and cell.correct is not None:
        _, lo, hi, se, df = cell_interval(cell.correct)
        return {"lo": lo * 100, "hi": hi * 100, "se": se * 100, "df": df, "interval": BOTH}
    known = math.isfinite(test_examples) and test_examples > 0
    if n >= 2 and known:
        _, lo, hi, se, df = seeds_binomial_interval(np.asarray(cell.accs) / 100, int(test_examples))
        return {"lo": lo * 100, "hi": hi * 100, "se": se * 100, "df": df, "interval": BINOMIAL}
    if n >= 2:
        m, lo, hi, se = t_interval(cell.accs)
        return {"lo": max(lo, 0.0), "hi": min(hi, 100.0), "se": se, "df": float(n - 1), "interval": SEEDS_ONLY}
    nan = {"lo": math.nan, "hi": math.nan, "se": math.nan, "df": math.nan, "interval": ""}
    if n == 0 or not known:
        return nan
    p = cell.accs[0] / 100.0
    lo, hi = wilson(round(p * test_examples), int(test_examples))
    return {"lo": lo * 100, "hi": hi * 100, "se": binomial_se(p, int(test_examples)) * 100, "df": math.inf,
            "interval": ONE_SEED}


def task_cells(df: pd.DataFrame, profile: str | None = None) -> pd.DataFrame:
    """One row per (profile, attention, task) that was run: mean/std/n of test accuracy (%) over ok seeds, its 95 %
    interval (:func:`interval`: lo, hi, se, df and which kind), the seeds and their accuracies, the counts of
    non-ok runs per status, the majority-class rate (%), how many ok runs collapsed (and which: ``collapsed_seeds``,
    aligned with ``accs``) and whether the cell is at chance (:mod:`lra_bench.reports.chance`), and the cell's
    :class:`lra_bench.reports.significance.Sample`."""
    runs = scored_runs(df, profile)
    rows = []
    if runs.empty:
        return pd.DataFrame(columns=CELL_COLUMNS)
    for (prof, att, task), g in runs.groupby(["profile", "attention", "task"], sort=True):
        ok = g[(g.status == "ok") & g.test_acc.notna()]
        accs = (ok.test_acc * 100.0).tolist()
        bad = g[~g.index.isin(ok.index)]
        failures = {s: int((bad.status == s).sum()) for s in FAIL_LABELS if (bad.status == s).any()}
        if (bad.status == "ok").any():  # ok but no test accuracy: counted as a failure
            failures["failed"] = failures.get("failed", 0) + int((bad.status == "ok").sum())
        n = len(accs)
        sizes = ok.test_examples.dropna()
        cell = sig.sample(accs, ok.predictions.tolist(), ok.test_fingerprint.tolist())
        bounds = interval(cell, float(sizes.iloc[0]) if len(sizes) else math.nan)
        majority = float(g.test_majority_rate.mean() * 100)
        flags = [bool(collapsed(r.test_acc, r.test_examples, r.test_majority_rate, r.predictions))
                 for r in ok.itertuples()]
        n_collapsed = sum(flags)
        rows.append({"profile": prof, "attention": att, "task": task, "n": n,
                     "mean": float(np.mean(accs)) if n else math.nan,
                     "std": float(np.std(accs, ddof=1)) if n > 1 else math.nan, **bounds,
                     "accs": accs, "seeds": ok.seed.tolist(), "failures": failures, "majority": majority,
                     "collapsed": n_collapsed, "collapsed_seeds": flags,
                     "at_chance": cell_at_chance(n, n_collapsed, bounds["lo"], bounds["hi"], majority),
                     "sample": cell})
    return pd.DataFrame(rows, columns=CELL_COLUMNS)


def cell_text(mean: float, n: int, failures: dict[str, int], lo: float = math.nan, hi: float = math.nan,
              marks: str = "", n_collapsed: int = 0) -> str:
    """``mean [lo, hi] (n seeds[: test sampling only][; k collapsed]; failures) marks``, or the failure labels of a
    cell."""
    if n == 0:
        if not failures:
            return ""
        return "/".join(FAIL_LABELS[s] for s in FAIL_LABELS if s in failures)
    seeds = f"{n} seeds" if n > 1 else ONE_SEED
    extra = (f"; {n_collapsed} collapsed" if n_collapsed else "") + "".join(
        f"; {k} {FAIL_LABELS[s]}" for s, k in failures.items())
    value = f"{mean:.2f}" + (f" [{lo:.2f}, {hi:.2f}]" if math.isfinite(lo) and math.isfinite(hi) else "")
    return f"{value} ({seeds}{extra})" + (f" {marks}" if marks else "")


def _marks(verdict: dict | None, best: dict | None, att: str) -> str:
    mark = sig.MARKS[verdict["verdict"]] if verdict else ""
    return " ".join(m for m in (mark, sig.BEST_MARK if best and att in best["set"] else "") if m)


def _interval_over(row: dict, tasks: list[str]) -> tuple[float, float]:
    """The 95 % interval of the mean of ``row``'s task means over ``tasks`` (``mean_interval``), within [0, 100];
    NaN where a task has no standard error."""
    if not all(math.isfinite(row[f"{t}_se"]) for t in tasks):
        return math.nan, math.nan
    _, lo, hi, _, _ = mean_interval([row[f"{t}_mean"] for t in tasks], [row[f"{t}_se"] for t in tasks],
                                    [row[f"{t}_df"] for t in tasks])
    return max(lo, 0.0), min(hi, 100.0)


def _avg_columns(row: dict, average: dict) -> dict:
    """The average columns of one row over the tasks the average covers (``average["tasks"]``: the 5 without those
    at chance for every variant)."""
    att = row["attention"]
    verdict, best = average["vs_ref"].get(att), average["best"]
    ranked = [t for t in average["tasks"] if not math.isnan(row[f"{t}_mean"])]
    all5 = [t for t in TASKS5 if not math.isnan(row[f"{t}_mean"])]
    k = len(ranked)
    avg_present = float(np.mean([row[f"{t}_mean"] for t in ranked])) if k else math.nan
    out = {"n_tasks": k, "avg_present": avg_present,
           "avg5": float(np.mean([row[f"{t}_mean"] for t in all5])) if len(all5) == len(TASKS5) else math.nan,
           "avg6": math.nan, "pathx_counted_as_fail": False, "avg_lo": math.nan, "avg_hi": math.nan,
           "avg_vs_ref": verdict["verdict"] if verdict else "",
           "avg_p_holm": verdict["p_holm"] if verdict else math.nan,
           "avg_d": verdict["d"] if verdict else math.nan, "avg_lower": verdict["lower"] if verdict else math.nan,
           "avg_best": bool(best and att in best["set"]),
           "avg_p_rank1": best["p_rank1"].get(att, math.nan) if best else math.nan,
           "avg_collapsed": int(sum(row[f"{t}_collapsed"] for t in ranked))}
    if k:
        out["avg_lo"], out["avg_hi"] = _interval_over(row, ranked)
    if len(all5) == len(TASKS5):
        px = row["pathx_mean"]
        out["pathx_counted_as_fail"] = math.isnan(px)
        out["avg6"] = float((sum(row[f"{t}_mean"] for t in all5) + (PATHX_FAIL_SCORE if math.isnan(px) else px)) / 6)
    if k:
        spread = f" [{out['avg_lo']:.2f}, {out['avg_hi']:.2f}]" if math.isfinite(out["avg_lo"]) else ""
        partial = "" if k == len(TASKS5) else f" (partial: {k}/5 tasks)"
        marks = _marks(verdict, best, att)
        out[AVG5] = f"{avg_present:.2f}{spread}{partial}" + (f" {marks}" if marks else "")
    else:
        out[AVG5] = ""
    if math.isnan(out["avg6"]):
        out[AVG6] = ""
    else:
        pathx_not_run = out["pathx_counted_as_fail"] and row["pathx_n_runs"] == 0
        out[AVG6] = f"{out['avg6']:.2f}" + ("*" if pathx_not_run else "")
    return out


def _same_as(same: list[list[str]], reference: str, att: str) -> str:
    """The name ``att``'s result is tested and ranked under when it is one result under several names, else ''."""
    rep = representatives(same, reference).get(att, att)
    return rep if rep != att else ""


def table1(df: pd.DataFrame, profile: str | None = None, paper_columns: bool = True,
           reference: str = REFERENCE, margin: float = sig.MARGIN,
           cells: pd.DataFrame | None = None) -> tuple[pd.DataFrame, str]:
    """Table 1 rows (one per profile x attention) and its Markdown (one block per profile).

    The frame holds the display columns (task labels, ``AVG5``, ``AVG6``, ``PAPER_AVG``) and numeric ones:
    ``<task>_mean``, ``<task>_std``, ``<task>_n``, the 95 % interval ``<task>_lo`` / ``_hi`` (``_se``, ``_df``,
    ``_interval``: its kind), ``<task>_collapsed`` (collapsed runs) and ``_at_chance``, the verdict against
    ``reference`` ``<task>_vs_ref`` with ``_d`` (difference, points), ``_p_holm``, ``_lower`` (its one-sided 95 %
    lower bound) and ``_method``, ``<task>_best`` (in the confidence set for the column's best) and ``_p_rank1``,
    ``<task>_same_as`` / ``avg_same_as`` (the name this variant's result is tested under when it repeats another's
    predictions: its P(rank 1) is that result's, not a share of its own),
    ``avg5`` (the paper's 5-task mean), ``avg6``, ``avg_present`` (the LRA average shown: the tasks not at
    chance), ``avg_lo`` / ``avg_hi``, ``avg_vs_ref``, ``avg_d``, ``avg_lower``, ``avg_best``, ``avg_p_rank1``,
    ``avg_collapsed``, ``n_tasks``, ``params`` (median over the attention's ok records), and ``paper_<task>`` /
    ``paper_avg5`` when ``paper_columns``. ``table.attrs["verdicts"]``: profile -> :func:`verdicts_of`'s result.
    ``cells``: :func:`task_cells` of ``df`` and ``profile`` when the caller has them already (decoding every
    record's predictions is the slow part).
    """
    cells = task_cells(df, profile) if cells is None else cells
    if cells.empty:
        which = f" for profile {profile!r}" if profile else ""
        return pd.DataFrame(), f"(no non-synthetic run records{which})"
    runs = scored_runs(df, profile)
    rows, notes, all_verdicts = [], {}, {}
    for prof in sorted(cells.profile.unique()):
        pc = cells[cells.profile == prof]
        verdicts = all_verdicts[prof] = verdicts_of(pc, reference, margin)
        notes[prof] = verdicts_note(pc, verdicts, reference, margin)
        for att in attention_order(pc.attention.unique()):
            ac = pc[pc.attention == att].set_index("task")
            row: dict = {"profile": prof, "attention": att}
            for task in TASKS:
                c = ac.loc[task] if task in ac.index else None
                n = int(c["n"]) if c is not None else 0
                failures = c["failures"] if c is not None else {}
                for key in ("mean", "std", "lo", "hi", "se", "df"):
                    row[f"{task}_{key}"] = float(c[key]) if c is not None else math.nan
                row[f"{task}_n"], row[f"{task}_interval"] = n, c["interval"] if c is not None else ""
                row[f"{task}_n_runs"] = n + sum(failures.values())
                row[f"{task}_collapsed"] = int(c["collapsed"]) if c is not None else 0
                row[f"{task}_at_chance"] = bool(c["at_chance"]) if c is not None else False
                test = verdicts.get(task, {})
                verdict, best = test.get("vs_ref", {}).get(att), test.get("best")
                row[f"{task}_vs_ref"] = verdict["verdict"] if verdict else ""
                for key in ("d", "p_holm", "lower"):
                    row[f"{task}_{key}"] = verdict[key] if verdict else math.nan
                row[f"{task}_method"] = verdict["method"] if verdict else ""
                row[f"{task}_best"] = bool(best and att in best["set"])
                row[f"{task}_p_rank1"] = best["p_rank1"].get(att, math.nan) if best else math.nan
                row[f"{task}_same_as"] = _same_as(test.get("same", []), reference, att)
                row[TASK_LABELS[task]] = cell_text(row[f"{task}_mean"], n, failures, row[f"{task}_lo"],
                                                   row[f"{task}_hi"], _marks(verdict, best, att),
                                                   row[f"{task}_collapsed"])
            ok = runs[(runs.profile == prof) & (runs.attention == att) & (runs.status == "ok")]
            row["params"] = float(ok.params.median()) if ok.params.notna().any() else math.nan
            row.update(_avg_columns(row, verdicts[AVG]))
            row["avg_same_as"] = _same_as(verdicts[AVG]["same"], reference, att)
            if paper_columns:
                ref = paper.TABLE1.get(att)
                for i, task in enumerate(TASKS5):
                    row[f"paper_{task}"] = ref[i] if ref else math.nan
                row["paper_avg5"] = ref[-1] if ref else math.nan
                row[PAPER_AVG] = f"{ref[-1]:.2f}" if ref else ""
            rows.append(row)
    table = pd.DataFrame(rows)
    table.attrs["verdicts"] = all_verdicts
    table.attrs["reference"] = reference
    display = ["attention", *(TASK_LABELS[t] for t in TASKS), AVG5, AVG6] + ([PAPER_AVG] if paper_columns else [])
    md = ["Test accuracy (%) of the best-validation weights on the full test set: mean over seeds and its 95 % "
          "confidence interval [low, high] with both sources of noise, the seeds and the test examples drawn (the "
          "seeds' spread plus the test-sampling variance from the per-example predictions, by the mean squares of "
          "the seeds x examples design; Student t with Welch-Satterthwaite degrees of freedom; clipped to [0, 100], "
          "never of zero width; without per-example predictions the binomial p (1 - p) / N bounds the test "
          f"sampling); with one seed the interval of the test sample alone (Wilson), labelled \"{ONE_SEED}\". "
          "\"k collapsed\": runs at chance (one predicted class, or an accuracy within its own test-sampling "
          "interval of the majority-class rate). FAIL / OOM / KILL / DIV = no successful run, only failed / "
          "out-of-memory / SIGKILLed / diverged ones; blank = never run; synthetic-data runs never count. "
          f"{AVG5}: mean of the 5 task means as the paper (Path-X excluded), or the mean over the tasks present, "
          "marked partial; a task at chance for every variant is shown but left out of it; its interval combines "
          f"the tasks' (independent test sets; Welch-Satterthwaite degrees of freedom). {AVG6}: the 6-task "
          "convention of later papers (S4 ...), Path-X FAIL (or, marked *, not run) counted as 50.\n"]
    for prof, t in table.groupby("profile", sort=True):
        pr = runs[runs.profile == prof]
        synthetic = int((df["synthetic"].astype(bool) & (df["profile"] == prof)).sum())
        md.append(f"**Profile `{prof}`**: {len(pr)} run(s) counted, {synthetic} synthetic run(s) excluded.\n")
        md.append(t[display].to_markdown(index=False))
        md.append("")
        md.append(notes[prof])
        if left := conflicts_note(df, prof):
            md.append(left)
    if paper_columns:
        ref = table[table.attention.isin(list(paper.TABLE1))].drop_duplicates("attention")
        if not ref.empty:
            cols = {f"paper_{task}": TASK_LABELS[task] for task in TASKS5} | {"paper_avg5": "Avg"}
            pt = ref[["attention", *cols]].rename(columns=cols)
            pt.insert(6, "Path-X", "FAIL")
            sinkhorn = ("; the printed Sinkhorn average 51.39 differs from its 5-task mean 51.48"
                        if "sinkhorn" in set(ref.attention) else "")
            md.append(f"The paper's Table 1 for the same attentions (Tay et al. 2020, TPU, full LRA configs"
                      f"{sinkhorn}):\n")
            md.append(pt.to_markdown(index=False, floatfmt=".2f"))
            md.append("")
    return table, "\n".join(md)


def one_profile(table: pd.DataFrame, profile: str | None = None) -> pd.DataFrame:
    """The rows of ``profile`` in a Table 1 frame; with None, the only profile there (ValueError if several)."""
    if table.empty:
        return table
    if profile is None:
        profiles = sorted(table.profile.unique())
        if len(profiles) > 1:
            raise ValueError(f"Table 1 holds several profiles {profiles}: say which one (--profile)")
        profile = profiles[0]
    return table[table.profile == profile]


SCORE_COLUMNS = ["attention", "profile", "score", "n_tasks", "params", "score_lo", "score_hi", "best", "p_rank1",
                 "seeds", "seeds_max", "collapsed", "same_as"]


def lra_scores(table: pd.DataFrame, profile: str | None = None) -> pd.DataFrame:
    """attention, profile, score (the LRA average over the tasks it covers: the 5, or those present, without a task
    at chance for every variant), n_tasks, params of one profile, with the score's 95 % interval (score_lo,
    score_hi), whether it is in the confidence set for the best average (best) and its P(rank 1), the fewest and
    the most seeds of its tasks (seeds, seeds_max), its collapsed runs on them, and same_as (the name its average
    is tested and ranked under when it repeats another variant's predictions on every task, else ''). ``attrs``:
    "tasks" (covered), "left_out" (at chance), "all_at_chance" (every task present is at chance: ``score`` is then
    their mean accuracy, which ranks nothing), "detectable" (task -> Detectable) and "reference"."""
    if table.empty:
        return pd.DataFrame(columns=SCORE_COLUMNS)
    t = one_profile(table, profile)
    prof = t.profile.iloc[0] if len(t) else profile
    verdicts = table.attrs.get("verdicts", {}).get(prof, {})
    tasks = verdicts.get(AVG, {}).get("tasks", list(TASKS5))
    left_out = verdicts.get(AVG, {}).get("left_out", [])
    if not tasks and left_out:  # every task at chance for every variant: no LRA score ranks them; the chart's y is
        return _chance_scores(t, left_out, verdicts, table.attrs.get("reference", REFERENCE))  # their mean accuracy
    t = t[t.n_tasks > 0]
    per_task = t[[f"{task}_n" for task in tasks]].replace(0, np.nan) if tasks else pd.DataFrame(index=t.index)
    out = pd.DataFrame({"attention": t.attention, "profile": t.profile, "score": t.avg_present,
                        "n_tasks": t.n_tasks, "params": t.params, "score_lo": t.avg_lo, "score_hi": t.avg_hi,
                        "best": t.avg_best, "p_rank1": t.avg_p_rank1, "seeds": per_task.min(axis=1),
                        "seeds_max": per_task.max(axis=1), "collapsed": t.avg_collapsed,
                        "same_as": t.avg_same_as}).reset_index(drop=True)
    out.attrs.update(tasks=list(tasks), left_out=left_out, all_at_chance=False,
                     detectable=_detectable(verdicts),
                     reference=table.attrs.get("reference", REFERENCE))
    return out


def _detectable(verdicts: dict) -> dict:
    """task -> its Detectable gap, for the tasks that have one (the verdicts of one profile)."""
    return {k: v["detectable"] for k, v in verdicts.items() if k != AVG and v["detectable"]}


def _chance_scores(t: pd.DataFrame, tasks: list[str], verdicts: dict, reference: str) -> pd.DataFrame:
    """``lra_scores`` when every task present is at chance for every variant (a smoke sweep): each variant's mean
    test accuracy over those tasks with its 95 % interval, no best set (nothing ranks them), ``attrs``
    "all_at_chance" True, so that the chart shows what speed and memory the runs had beside the chance line and
    says that its y is no LRA score."""
    rows = []
    for row in t.to_dict("records"):
        present = [task for task in tasks if not math.isnan(row[f"{task}_mean"])]
        if not present:
            continue
        lo, hi = _interval_over(row, present)
        seeds = [row[f"{task}_n"] for task in present]
        rows.append({"attention": row["attention"], "profile": row["profile"],
                     "score": float(np.mean([row[f"{task}_mean"] for task in present])), "n_tasks": len(present),
                     "params": row["params"], "score_lo": lo, "score_hi": hi, "best": False, "p_rank1": math.nan,
                     "seeds": min(seeds), "seeds_max": max(seeds),
                     "collapsed": int(sum(row[f"{task}_collapsed"] for task in present)), "same_as": ""})
    out = pd.DataFrame(rows, columns=SCORE_COLUMNS)
    out.attrs.update(tasks=[], left_out=list(tasks), all_at_chance=True,
                     detectable=_detectable(verdicts),
                     reference=reference)
    return out
