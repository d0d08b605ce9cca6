"""LRA Table 1 from run records: test accuracy (%) per attention and task, mean and 95 % interval over seeds,
marks against a reference variant and ties with the best (:mod:`lra_bench.reports.significance`), failure cells,
the paper's 5-task average and the 6-task average with Path-X FAIL counted as 50 (shared/reference/LRA.md §2.1).

Rules, stated once:

* Records are read with :func:`load_runs`; unreadable or truncated ``record.json`` files are skipped with a
  warning, never fatal. Of several records with the same ``config_hash`` only the latest counts.
* Synthetic-data runs (``synthetic: true``, or a synthetic data source) never enter a score.
* A cell is (profile, attention, task) under one training protocol (``records.protocol_of``: from scratch, or
  self-pretrained first): records of several protocols are split first (``reports.protocols.by_protocol``, one
  Table 1 each) and never share a cell. Within a cell, one record per seed counts: the latest one.
  Its value is the mean of the ok runs' test accuracy over seeds with a 95 % interval: Student t (n - 1 df, std
  ddof 1) with 2+ seeds, the one seed's Wilson interval over its test examples otherwise. A cell with no ok run
  but a failed / OOM / killed / diverged one reads FAIL / OOM / KILL / DIV; a cell never run is blank.
* "LRA avg (5)" is the mean of the 5 task means (ListOps, Text, Retrieval, Image, Pathfinder), as the paper;
  when some of the 5 are missing it is the mean over those present, marked "partial (k/5 tasks)"; its interval
  combines the task means' (independent test sets, Welch-Satterthwaite df).
* "avg (6, Path-X FAIL=50)" is the convention of later papers (S4 ...): the 5 task means plus Path-X, with a
  Path-X that failed (or was never run, marked ``*``) counted as 50; only defined when all 5 tasks are present.
"""

from __future__ import annotations

import logging
import math
import warnings
import zlib
from pathlib import Path

import numpy as np
import pandas as pd

from lra_bench.reports import paper
from lra_bench.reports import significance as sig
from lra_bench.reports.store import read_json_tree
from lra_bench.stats.intervals import binomial_se, mean_interval, t_interval, wilson
from lra_bench.store import predictions
from lra_bench.store.records import RECORD_NAME, STATUSES, protocol_of, semantic_hash

log = logging.getLogger(__name__)

TASKS5 = paper.TASKS  # listops, text, retrieval, image, pathfinder
TASKS = (*TASKS5, "pathx")
TASK_LABELS = {"listops": "ListOps", "text": "Text", "retrieval": "Retrieval", "image": "Image",
               "pathfinder": "Pathfinder", "pathx": "Path-X"}
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
               "protocol", "pair_key", "ft_steps", "pt_steps", "pretrain_s", "train_loop_s", "pretraining"]
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
    rest = {k: v for k, v in config.items() if k not in ("pretrain", "seed", "trainer")}
    key = semantic_hash({**rest, "trainer": {k: v for k, v in trainer.items() if k != "max_steps"}})
    return key, _number(trainer.get("max_steps")), _number(pre.get("max_steps", 0))


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
        "task": rec["task"], "attention": rec["attention"], "profile": str(rec.get("profile", "?")),
        "seed": rec.get("seed"), "status": rec["status"], "test_acc": acc, "synthetic": _is_synthetic(rec),
        "params": _number(rec.get("params")), "examples_per_s": _number(thr.get("examples_per_s")),
        "steps_per_s": _number(thr.get("steps_per_s")), "batch_size": _number(thr.get("batch_size")),
        "seq_len": _number(thr.get("seq_len")), "peak_bytes": _number(mem.get("peak_bytes")),
        "test_majority_rate": _number(rec.get("test_majority_rate")), "device": str(rec.get("device", "")),
        "config_hash": rec.get("config_hash") or rec.get("_path"),
        "finished_at": str(rec.get("finished_at") or rec.get("started_at") or ""),
        "message": str(rec.get("message") or ""), "path": rec.get("_path", ""),
        "evals": rec["evals"] if isinstance(rec.get("evals"), list) else [],
        "test_examples": _number(rec.get("test_examples")),
        "predictions": rec[predictions.FIELD] if isinstance(rec.get(predictions.FIELD), dict) else None,
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


def scored_runs(df: pd.DataFrame, profile: str | None = None) -> pd.DataFrame:
    """The runs that count for scores: not synthetic, in ``profile`` if given, the latest record per seed."""
    if df.empty:
        return df
    out = df[~df["synthetic"].astype(bool)]
    if profile is not None:
        out = out[out["profile"] == profile]
    mixed = out.groupby(["profile", "attention", "task"])["protocol"].nunique() if "protocol" in out else None
    if mixed is not None and (mixed > 1).any():
        cells = ", ".join(f"{a}/{t} ({p})" for p, a, t in mixed[mixed > 1].index)
        raise ValueError(f"records of several training protocols in one cell: {cells}; give each protocol its own "
                         "table (lra_bench.reports.protocols.by_protocol)")
    out = out.sort_values(["finished_at", "path"], kind="stable")
    seed_key = out["seed"].astype(str)
    out = out.assign(_seed=seed_key)
    cell = ["profile", "attention", "task", "_seed"]
    kept = out.drop_duplicates(cell, keep="last")
    dropped = out[~out.index.isin(kept.index)]
    for key, group in dropped.groupby(cell, sort=True):
        used = kept.set_index(cell).loc[key]
        prof, att, task, seed = key
        left_out = ", ".join(f"{r.path or '?'} (config {str(r.config_hash)[:10]}, {r.finished_at})"
                             for r in group.itertuples())
        warnings.warn(f"{len(group) + 1} configs of {att}/{task} (profile {prof}) at seed {seed}: the scores use the "
                      f"newest, {used['path'] or '?'} (config {str(used['config_hash'])[:10]}); left out: {left_out}",
                      stacklevel=2)
    return kept.drop(columns="_seed").reset_index(drop=True)


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


#: every attention of the zoo in a fixed order, so an attention keeps its colour across figures
ZOO_ORDER = (*paper.TABLE1, "flash", "global", "routing", "compressed", "nystromformer", "efficient", "rfa", "fnet",
             "gmlp", "mlp_mixer")


def attention_color(name: str):
    """A fixed tab20 colour per attention name (the same in every figure)."""
    from matplotlib import colormaps

    i = ZOO_ORDER.index(name) if name in ZOO_ORDER else zlib.crc32(name.encode())
    return colormaps["tab20"](i % 20)


CELL_COLUMNS = ["profile", "attention", "task", "mean", "std", "n", "lo", "hi", "se", "df", "interval", "accs", "seeds",
                "failures", "majority", "sample"]
ONE_SEED = "1 seed: test sampling only"


def interval(accs_pct: list[float], test_examples: float) -> dict:
    """95 % interval of a cell (%): over seeds (t, n - 1 df) with 2+ seeds, else the Wilson interval of the one
    seed's test sample (labelled ONE_SEED), NaN when its test size is unknown."""
    n = len(accs_pct)
    if n >= 2:
        m, lo, hi, se = t_interval(accs_pct)
        return {"lo": lo, "hi": hi, "se": se, "df": float(n - 1), "interval": "t"}
    nan = {"lo": math.nan, "hi": math.nan, "se": math.nan, "df": math.nan, "interval": ""}
    if n == 0 or not (math.isfinite(test_examples) and test_examples > 0):
        return nan
    p = accs_pct[0] / 100.0
    lo, hi = wilson(round(p * test_examples), int(test_examples))
    return {"lo": lo * 100, "hi": hi * 100, "se": binomial_se(p, int(test_examples)) * 100, "df": math.inf,
            "interval": ONE_SEED}


def task_cells(df: pd.DataFrame, profile: str | None = None) -> pd.DataFrame:
    """One row per (profile, attention, task) that was run: mean/std/n of test accuracy (%) over ok seeds, its 95 %
    interval (:func:`interval`: lo, hi, se, df and which kind), the seeds and their accuracies, the counts of
    non-ok runs per status, and the cell's :class:`lra_bench.reports.significance.Sample`."""
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
        rows.append({"profile": prof, "attention": att, "task": task, "n": n,
                     "mean": float(np.mean(accs)) if n else math.nan,
                     "std": float(np.std(accs, ddof=1)) if n > 1 else math.nan,
                     **interval(accs, float(sizes.iloc[0]) if len(sizes) else math.nan),
                     "accs": accs, "seeds": ok.seed.tolist(), "failures": failures,
                     "majority": float(g.test_majority_rate.mean() * 100),
                     "sample": sig.sample(accs, ok.predictions.tolist())})
    return pd.DataFrame(rows, columns=CELL_COLUMNS)


def cell_text(mean: float, n: int, failures: dict[str, int], lo: float = math.nan, hi: float = math.nan,
              marks: str = "") -> str:
    """``mean [lo, hi] (n seeds[: test sampling only]; failures) marks``, or the failure labels of a cell."""
    if n == 0:
        if not failures:
            return ""
        return "/".join(FAIL_LABELS[s] for s in FAIL_LABELS if s in failures)
    seeds = f"{n} seeds" if n > 1 else ONE_SEED
    extra = "".join(f"; {k} {FAIL_LABELS[s]}" for s, k in failures.items())
    value = f"{mean:.2f}" + (f" [{lo:.2f}, {hi:.2f}]" if math.isfinite(lo) and math.isfinite(hi) else "")
    return f"{value} ({seeds}{extra})" + (f" {marks}" if marks else "")


def _marks(verdict: dict | None, tied: set[str] | None, att: str) -> str:
    mark = sig.MARKS[verdict["verdict"]] if verdict else ""
    return " ".join(m for m in (mark, sig.BEST_MARK if tied and att in tied else "") if m)


def _avg_columns(row: dict, verdict: dict | None = None, tied: set[str] | None = None) -> dict:
    present = [t for t in TASKS5 if not math.isnan(row[f"{t}_mean"])]
    k = len(present)
    avg_present = float(np.mean([row[f"{t}_mean"] for t in present])) if k else math.nan
    out = {"n_tasks": k, "avg_present": avg_present, "avg5": avg_present if k == len(TASKS5) else math.nan,
           "avg6": math.nan, "pathx_counted_as_fail": False, "avg_lo": math.nan, "avg_hi": math.nan,
           "avg_vs_ref": verdict["verdict"] if verdict else "",
           "avg_p_holm": verdict["p_holm"] if verdict else math.nan,
           "avg_tied": bool(tied and row["attention"] in tied)}
    if k and all(math.isfinite(row[f"{t}_se"]) for t in present):
        _, out["avg_lo"], out["avg_hi"], _, _ = mean_interval([row[f"{t}_mean"] for t in present],
                                                              [row[f"{t}_se"] for t in present],
                                                              [row[f"{t}_df"] for t in present])
    if k == len(TASKS5):
        px = row["pathx_mean"]
        out["pathx_counted_as_fail"] = math.isnan(px)
        out["avg6"] = float((sum(row[f"{t}_mean"] for t in present) + (PATHX_FAIL_SCORE if math.isnan(px) else px)) / 6)
    if k:
        spread = f" [{out['avg_lo']:.2f}, {out['avg_hi']:.2f}]" if math.isfinite(out["avg_lo"]) else ""
        partial = "" if k == len(TASKS5) else f" (partial: {k}/5 tasks)"
        marks = _marks(verdict, tied, row["attention"])
        out[AVG5] = f"{avg_present:.2f}{spread}{partial}" + (f" {marks}" if marks else "")
    else:
        out[AVG5] = ""
    if math.isnan(out["avg6"]):
        out[AVG6] = ""
    else:
        pathx_not_run = out["pathx_counted_as_fail"] and row["pathx_n_runs"] == 0
        out[AVG6] = f"{out['avg6']:.2f}" + ("*" if pathx_not_run else "")
    return out


def significance_of(cells: pd.DataFrame, reference: str) -> dict[str, dict]:
    """For one profile's cells, per task and for the average ("avg"): the verdicts against ``reference``
    (``vs_ref``, empty when it has no such cell), the best variant and the set tied with it (None when untested)."""
    per_task = {task: dict(zip(g.attention, g["sample"], strict=True))
                for task, g in cells[cells.n > 0].groupby("task")}
    out = {}
    for task, samples in per_task.items():
        # the best among the cells that can be tested (2+ seeds): a single-seed best would leave every tie untested
        testable = {a: s for a, s in samples.items() if len(s.accs) >= 2} or samples
        top = sig.best({a: float(np.mean(s.accs)) for a, s in testable.items()})
        out[task] = {"vs_ref": sig.against(reference, samples) if reference in samples else {}, "best": top,
                     "tied": sig.tied_with_best(sig.against(top, samples))}
    five = {t: s for t, s in per_task.items() if t in TASKS5}
    averages: dict[str, tuple[int, float, bool]] = {}  # variant -> (tasks, sum of means, every task 2+ seeds)
    for samples in five.values():
        for a, s in samples.items():
            k, total, testable = averages.get(a, (0, 0.0, True))
            averages[a] = (k + 1, total + float(np.mean(s.accs)), testable and len(s.accs) >= 2)
    most = max((k for k, _, _ in averages.values()), default=0)
    full = {a: v for a, v in averages.items() if v[0] == most}
    full = {a: v for a, v in full.items() if v[2]} or full
    top = sig.best({a: total / k for a, (k, total, _) in full.items()})
    has_ref = any(reference in s for s in five.values())
    out["avg"] = {"vs_ref": sig.against_average(reference, five) if has_ref else {}, "best": top,
                  "tied": sig.tied_with_best(sig.against_average(top, five)) if top else None}
    return out


def significance_note(cells: pd.DataFrame, tests: dict[str, dict], reference: str) -> str:
    """Markdown: what each mark means, the tests made, the variants tied with the best, and which cells cannot
    enter a paired comparison (records without per-example predictions)."""
    ok = cells[cells.n > 0]
    lines = [f"Against `{reference}` (Holm-corrected across variants, 5 %): {sig.MARKS[sig.BETTER]} better, "
             f"{sig.MARKS[sig.WORSE]} worse, {sig.MARKS[sig.TIED]} not significantly different; "
             f"{sig.BEST_MARK} statistically tied with the best of the column (the best included; the best is "
             "taken among cells with 2 or more seeds, and every variant is tested against it, Holm-corrected the "
             "same way). "]
    methods = [v["method"] for t in tests.values() for v in t["vs_ref"].values() if v["method"]]
    if methods:
        counts = pd.Series(methods).value_counts()
        lines.append("Tests made: " + ", ".join(f"{k} {m}" for m, k in counts.items()) + " (paired = over seeds and "
                     "test examples; welch = over seeds only, where per-example predictions are missing: it "
                     "leaves out test-example sampling, so it only says whether the variants differ on this test "
                     "set; mixed = an average over tasks of both). ")
    elif reference not in set(ok.attention):
        lines.append(f"No `{reference}` cell in this profile, so nothing is marked against it (--reference). ")
    single = ok[ok.n < 2]
    if len(single):
        lines.append(f"{len(single)} of {len(ok)} cells have a single seed: their interval is the test sample's "
                     "alone (Wilson) and they enter no test -- a test needs 2 or more seeds on both sides, since "
                     "the seed-to-seed spread is otherwise unknown. ")
    unpaired = [r for r in ok.itertuples() if r.sample.correct is None]
    missing = [f"{r.attention}/{r.task}" for r in unpaired if r.sample.why_unpaired.endswith(sig.NO_PREDICTIONS)]
    other = [f"{r.attention}/{r.task} ({r.sample.why_unpaired})" for r in unpaired
             if not r.sample.why_unpaired.endswith(sig.NO_PREDICTIONS)]
    if missing and len(missing) == len(ok):
        lines.append(f"None of the {len(ok)} cells' records kept per-example test predictions (older records), so "
                     "no paired comparison is possible here; cells with 2 or more seeds are compared over seeds only. ")
    elif missing:
        shown = ", ".join(missing[:12]) + (f" and {len(missing) - 12} more" if len(missing) > 12 else "")
        lines.append(f"No paired comparison is possible for {len(missing)} cell(s) whose records lack per-example "
                     f"test predictions (older records): {shown}. ")
    if other:
        lines.append(f"No paired comparison is possible for {len(other)} more cell(s): {', '.join(other)}. ")
    ref_print = {r.task: r.sample.fingerprint for r in ok.itertuples()
                 if r.attention == reference and r.sample.correct is not None}
    elsewhere = [f"{r.attention}/{r.task}" for r in ok.itertuples() if r.sample.correct is not None
                 and r.task in ref_print and r.sample.fingerprint != ref_print[r.task]]
    if elsewhere:
        lines.append(f"Not compared with `{reference}`, whose predictions are on a different test set: "
                     f"{', '.join(elsewhere)}. ")
    ties = [f"{TASK_LABELS.get(t, 'LRA avg')}: {', '.join(sorted(tests[t]['tied']))}"
            for t in (*TASKS, "avg") if t in tests and tests[t]["tied"] is not None]
    if ties:
        lines.append("\n\nTied with the best: " + "; ".join(ties) + ".")
    return "".join(lines).rstrip() + "\n"


def table1(df: pd.DataFrame, profile: str | None = None, paper_columns: bool = True,
           reference: str = REFERENCE) -> tuple[pd.DataFrame, str]:
    """Table 1 rows (one per profile x attention) and its Markdown (one block per profile).

    The frame holds the display columns (task labels, ``AVG5``, ``AVG6``, ``PAPER_AVG``) and numeric ones:
    ``<task>_mean``, ``<task>_std``, ``<task>_n``, the 95 % interval ``<task>_lo`` / ``_hi`` (``_se``, ``_df``,
    ``_interval``: its kind), the test against ``reference`` ``<task>_vs_ref`` / ``_p_holm`` / ``_method``,
    ``<task>_tied`` (tied with the column's best), ``avg5``, ``avg6``, ``avg_present``, ``avg_lo`` / ``avg_hi``,
    ``avg_vs_ref``, ``avg_tied``, ``n_tasks``, ``params`` (median over the attention's ok records), and
    ``paper_<task>`` / ``paper_avg5`` when ``paper_columns``.
    """
    cells = task_cells(df, profile)
    if cells.empty:
        which = f" for profile {profile!r}" if profile else ""
        return pd.DataFrame(), f"(no non-synthetic run records{which})"
    runs = scored_runs(df, profile)
    rows, notes = [], {}
    for prof in sorted(cells.profile.unique()):
        pc = cells[cells.profile == prof]
        tests = significance_of(pc, reference)
        notes[prof] = significance_note(pc, tests, reference)
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
                test = tests.get(task, {})
                verdict = test.get("vs_ref", {}).get(att)
                row[f"{task}_vs_ref"] = verdict["verdict"] if verdict else ""
                row[f"{task}_p_holm"] = verdict["p_holm"] if verdict else math.nan
                row[f"{task}_method"] = verdict["method"] if verdict else ""
                row[f"{task}_tied"] = bool(test.get("tied") and att in test["tied"])
                row[TASK_LABELS[task]] = cell_text(row[f"{task}_mean"], n, failures, row[f"{task}_lo"],
                                                   row[f"{task}_hi"], _marks(verdict, test.get("tied"), att))
            ok = runs[(runs.profile == prof) & (runs.attention == att) & (runs.status == "ok")]
            row["params"] = float(ok.params.median()) if ok.params.notna().any() else math.nan
            row.update(_avg_columns(row, tests["avg"]["vs_ref"].get(att), tests["avg"]["tied"]))
            if paper_columns:
                ref = paper.TABLE1.get(att)
                for i, task in enumerate(TASKS5):
                    row[f"paper_{task}"] = ref[i] if ref else math.nan
                row["paper_avg5"] = ref[-1] if ref else math.nan
                row[PAPER_AVG] = f"{ref[-1]:.2f}" if ref else ""
            rows.append(row)
    table = pd.DataFrame(rows)
    display = ["attention", *(TASK_LABELS[t] for t in TASKS), AVG5, AVG6] + ([PAPER_AVG] if paper_columns else [])
    md = ["Test accuracy (%) of the best-validation weights on the full test set: mean over seeds and its 95 % "
          "confidence interval [low, high] (Student t with n - 1 degrees of freedom, n seeds shown: the seed-to-seed "
          "spread on this test set, test sampling not included); with one seed the interval of the test sample "
          f"alone (Wilson), labelled \"{ONE_SEED}\". FAIL / OOM / KILL / DIV = no "
          "successful run, only failed / out-of-memory / SIGKILLed / diverged ones; blank = never run; "
          f"synthetic-data runs never count. {AVG5}: mean of the 5 task means as the paper (Path-X excluded), or "
          "the mean over the tasks present, marked partial; its interval combines the tasks' (independent test "
          f"sets; Welch-Satterthwaite degrees of freedom). {AVG6}: the 6-task convention of later papers (S4 ...), "
          "Path-X FAIL (or, marked *, not run) counted as 50.\n"]
    for prof, t in table.groupby("profile", sort=True):
        pr = runs[runs.profile == prof]
        synthetic = int((df["synthetic"].astype(bool) & (df["profile"] == prof)).sum())
        md.append(f"**Profile `{prof}`**: {len(pr)} run(s) counted, {synthetic} synthetic run(s) excluded.\n")
        md.append(t[display].to_markdown(index=False))
        md.append("")
        md.append(notes[prof])
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


SCORE_COLUMNS = ["attention", "profile", "score", "n_tasks", "params", "score_lo", "score_hi", "tied", "seeds",
                 "seeds_max"]


def lra_scores(table: pd.DataFrame, profile: str | None = None) -> pd.DataFrame:
    """attention, score (5-task average, or the mean over the tasks present), n_tasks, params of one profile, with
    the score's 95 % interval (score_lo, score_hi), whether it is tied with the best average (tied) and the fewest
    and the most seeds of its tasks (seeds, seeds_max)."""
    if table.empty:
        return pd.DataFrame(columns=SCORE_COLUMNS)
    t = one_profile(table, profile)
    t = t[t.n_tasks > 0]
    per_task = t[[f"{task}_n" for task in TASKS5]].replace(0, np.nan)
    return pd.DataFrame({"attention": t.attention, "profile": t.profile, "score": t.avg_present,
                         "n_tasks": t.n_tasks, "params": t.params, "score_lo": t.avg_lo, "score_hi": t.avg_hi,
                         "tied": t.avg_tied, "seeds": per_task.min(axis=1),
                         "seeds_max": per_task.max(axis=1)}).reset_index(drop=True)
