"""What a masked-token pretraining scores without learning from context (``lra_bench.reports.masked_baselines``):
on the pretraining's own fixed validation masks of a run config, the unigram cross-entropy and majority accuracy
(``loss: ce``) or the mean absolute error of the training median, the image's visible mean and the visible
four-neighbour mean (``loss: l1``). docs/protocols.md reads the records' final validation loss against them.

Run:  python tools/masked_baselines.py task=listops profile=cpu pretrain=mlm
      python tools/masked_baselines.py task=image profile=cpu pretrain=mlm task.data_dir=/path/to/cifar10
      (any run.py overrides; the attention does not matter, the seed picks the masks)
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import _repo  # noqa: F401  (this checkout's lra_bench first: tools/_repo.py)
from hydra import compose, initialize_config_dir
from hydra.errors import HydraException
from omegaconf import OmegaConf

from lra_bench.config.plan import plan
from lra_bench.errors import LRABenchError
from lra_bench.reports.masked_baselines import grey_baselines, token_baselines
from lra_bench.train.pretrain import VAL_STEP, mask_positions

ROOT = Path(__file__).resolve().parents[1]


def baselines(overrides: list[str]) -> tuple[str, dict[str, float]]:
    """(a one-line description of the config, the baselines) of ``configs/run.yaml`` with ``overrides``."""
    with initialize_config_dir(config_dir=str(ROOT / "configs"), version_base="1.3"):
        cfg = compose(config_name="run", overrides=overrides)
    OmegaConf.resolve(cfg)
    p = plan(cfg)
    if p.pretrain is None or p.pretrain.settings.name != "mlm":
        raise LRABenchError("the baselines are of a masked-token pretraining: add pretrain=mlm to the overrides")
    s = p.pretrain.settings
    data = p.task.load(p.cache_dir)
    train, val = data.inputs["train"], data.inputs["val"]
    masks = mask_positions(val, p.task.pad_id, s.mask_rate, p.seed, VAL_STEP)  # val's shape, as the run's
    if p.task.dual:  # retrieval pretrains on both documents: (N, 2, L) -> (2N, L), the masks alike
        train, val, masks = (a.reshape(-1, a.shape[-1]) for a in (train, val, masks))
    what = (f"{p.task.name}, {len(val):,} validation sequences, mask rate {s.mask_rate}, loss {s.loss}, "
            f"seed {p.seed}: {int(masks.sum()):,} masked positions")
    if s.loss == "ce":
        return what, token_baselines(train, val, masks, p.task.pad_id)
    return what, grey_baselines(train, val, masks)


def main(argv: list[str] | None = None) -> int:
    overrides = list(sys.argv[1:] if argv is None else argv)
    if any(o in ("-h", "--help") for o in overrides):
        print(__doc__)
        return 0
    with tempfile.TemporaryDirectory() as scratch:
        extra = [] if any(o.startswith("paths.results_dir=") for o in overrides) else [
            f"paths.results_dir={scratch}"]  # nothing is trained or written there: plan() only wants the folder
        try:
            what, figures = baselines([*extra, *overrides])
        except (LRABenchError, HydraException) as e:  # a bad override or setting: one line, not a traceback
            print(f"error: {e}", file=sys.stderr)
            return 2
    print(what)
    print("| baseline | value |\n|---|---|")
    for name, value in figures.items():
        print(f"| {name} | {value:.4f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
