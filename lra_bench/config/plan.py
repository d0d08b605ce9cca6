"""The build layer: config sections -> validated task, model, trainer settings and device, for every entry point.

``plan(cfg)`` checks a whole run config and builds the model (cheap) before any data is touched; the runner, the
efficiency benchmark, its cells and the scripts all build through here, so a config means the same thing to each.
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf
from torch import nn

from lra_bench.attention.base import TokenMixer
from lra_bench.checks import Seed, check_kwargs, check_value, non_finite
from lra_bench.config.attention import attention_class, build_attention_factory
from lra_bench.config.sections import (
    CONFIG_DIR,
    config_hash,
    container,
    group_choice,
    group_options,
    resolve_class,
    run_container,
    section_dataclass,
)
from lra_bench.errors import ConfigError
from lra_bench.infra.loggers import LoggerSettings
from lra_bench.models.encoder import Classifier, DualClassifier, Encoder
from lra_bench.models.mega import MegaClassifier, mega_model
from lra_bench.models.pretraining import Pretrainer
from lra_bench.models.ssm import LinearDecoder, SSMEncoder
from lra_bench.store.files import inside, stable_hash
from lra_bench.store.records import protocol_of, run_dir
from lra_bench.train.estimate import GuardSettings
from lra_bench.train.settings import PretrainSettings, TrainerSettings

TASK_SUPPLIED_TO_ENCODER = ("attention", "vocab_size", "max_len", "pad_id")
TRANSFORMER_ONLY = frozenset({"num_heads", "mlp_dim", "positions", "pool"})  # model keys the state-space block lacks
RUN_SECTIONS = ("attention", "task", "model", "trainer", "logger", "profile", "paths", "seed")
#: every top-level key a run config may have: a misspelt one (``+trainr.max_steps=4``, ``trainr:`` in a task_profile
#: file, a task_profile file without its ``# @package _global_`` line) would otherwise be ignored and train defaults
TOP_LEVEL = (*RUN_SECTIONS, "pretrain", "rerun", "resume", "guard")
RESUME = Literal["auto", "force"]  # auto: resume only this run's own checkpoint (config hash, code); force: any
#: the environment variable behind each folder of configs/paths/default.yaml
PATH_ENV = {"results_dir": "LRA_RESULTS_DIR", "cache_dir": "LRA_CACHE_DIR", "bench_dir": "LRA_BENCH_DIR"}
PRETRAIN_FORMAT = 1  # bump when pretraining computes something else: cached encoders of older code are not reused


@dataclass
class PretrainPlan:
    """The self-pretraining phase of a run (``pretrain=mlm|causal``): its settings, the model that trains the
    classifier's own encoder, and the key of the pretrained encoder in the cache (config and seed)."""

    settings: PretrainSettings
    model: Pretrainer
    cache_key: str


@dataclass
class Plan:
    """Everything validated from the config, before any data is touched: the one thing handed below ``build``
    (the runner reads the DictConfig only to make it)."""

    attention: str
    task: Any
    model: Classifier | DualClassifier | LinearDecoder | MegaClassifier
    trainer: TrainerSettings
    logger: LoggerSettings
    seed: int
    profile: str
    results_dir: Path
    cache_dir: Path
    config_hash: str
    device: torch.device
    config: dict[str, Any]  # the resolved config, as the record and the logger keep it
    rerun: bool = False  # run again even when a finished record exists
    pretrain: PretrainPlan | None = None  # pretrain=none: trained from scratch
    guard: GuardSettings = field(default_factory=GuardSettings)  # the longest run that starts unforced
    resume: str = "auto"  # "force": resume a checkpoint whose config hash or code version differs from this run's

    @property
    def protocol(self) -> str:
        """"scratch", or the pretraining objective ("mlm", "causal"): what the record says and reports group by."""
        return protocol_of(self.config)

    @property
    def pretrained_dir(self) -> Path:
        """Where the pretrained encoder of this run's pretraining config and seed is cached: every run that shares
        them (a sweep of the fine-tune's settings) reuses it instead of pretraining again."""
        assert self.pretrain is not None
        key = self.pretrain.cache_key[:16]
        return inside(self.cache_dir / "pretrained", self.task.name, self.attention, f"seed{self.seed}-{key}")

    @property
    def model_name(self) -> str:
        """The block that was built: "encoder" (the Transformer of configs/model/encoder.yaml) or "ssm"."""
        encoder = getattr(self.model, "encoder", None) or getattr(self.model, "ssm", None)
        return "ssm" if isinstance(encoder, SSMEncoder) else "encoder"

    @property
    def run_dir(self) -> Path:
        """This run's folder in the results store (its record, lock and attempts)."""
        return run_dir(self.results_dir, self.task.name, self.attention, self.profile, self.seed, self.config_hash)

    @property
    def checkpoint_dir(self) -> Path:
        """This run's checkpoints: keyed by the results folder too (the config hash ignores paths), so two copies of
        one config with different results folders never resume or remove each other's checkpoints."""
        owner = stable_hash(str(self.results_dir.resolve()))[:8]
        return inside(self.cache_dir / "checkpoints", self.task.name, self.attention, f"{self.run_dir.name}-{owner}")


def check_name(group: str, name: Any, composed: list[str]) -> None:
    """Records are filed under ``<group>.name``: it must be the composed option, never an overridden string (which
    could file a run under another task or profile, or name a path outside the results folder). ``composed``: the
    options the config can be when Hydra's choice is unknown."""
    choice = group_choice(group)
    expected = [choice] if choice is not None else composed
    if name not in expected:
        raise ConfigError(f"{group}.name={name!r} is not the composed {group} ({' or '.join(expected) or 'unknown'}): "
                          f"the name comes from the config group, so choose the {group} with {group}={name} "
                          f"instead of overriding {group}.name")


def build_task(section: DictConfig | dict[str, Any]) -> Any:
    """The task dataclass named by the section's ``_target_`` (a ``Task`` subclass), validated against its fields."""
    from lra_bench.data.task import Task

    values = container(section)
    target = values.pop("_target_", None)
    names = group_options("task")
    cls = resolve_class(target, Task, "task", names)
    same_class = [n for n in names if OmegaConf.load(CONFIG_DIR / "task" / f"{n}.yaml").get("_target_") == target]
    check_name("task", values.get("name"), same_class)
    built = getattr(cls.__dataclass_fields__.get("name"), "default", None)  # the task the class is
    if isinstance(built, str) and values.get("name") != built:
        raise ConfigError(f"task._target_={target} builds the {built} task, but this config is task.name="
                          f"{values.get('name')!r}: its records would be filed under the wrong task; choose "
                          f"task={built} instead of overriding task._target_")
    return section_dataclass(cls, values, "task")


def build_model(model_section: DictConfig | dict[str, Any], attention_section: DictConfig | dict[str, Any],
                task: Any) -> Classifier | DualClassifier | LinearDecoder | MegaClassifier:
    """The classifier for ``task`` with the model section's sizes and the attention section's mixer."""
    model_kwargs = container(model_section)
    attention_cfg = attention_section
    block = model_kwargs.pop("block", "transformer")
    if block == "mega":  # configs/model/mega.yaml: Mega's own block (lra_bench/models/mega.py)
        factory = build_attention_factory(attention_cfg)
        with mixer_built(factory):
            return mega_model(model_kwargs, factory, task)
    if block == "ssm":  # configs/model/ssm.yaml
        foreign = sorted(TRANSFORMER_ONLY & set(model_kwargs))
        if foreign:
            raise ConfigError(f"model=ssm has no {', '.join(foreign)} (Transformer-block sizes, set by this profile); "
                              "use profile=s4, or drop them on the command line, e.g. "
                              + " ".join(f"~model.{k}" for k in foreign))
        check_kwargs(SSMEncoder, model_kwargs, "model (model=ssm)", supplied=TASK_SUPPLIED_TO_ENCODER,
                     prefix="model")
        factory = build_attention_factory(attention_cfg)
        with mixer_built(factory):
            ssm = SSMEncoder(attention=factory, vocab_size=task.vocab_size, max_len=task.max_len, pad_id=task.pad_id,
                             **model_kwargs)
        if task.dual:
            return DualClassifier(ssm, model_kwargs["dim"], task.num_classes, task.interaction)
        return LinearDecoder(ssm, task.num_classes)
    if block != "transformer":
        raise ConfigError(f"model.block must be 'ssm' (configs/model/ssm.yaml), 'mega' (configs/model/mega.yaml) or "
                          f"absent (the Transformer block of configs/model/encoder.yaml), got {block!r}")
    if {"norm", "prenorm"} & set(model_kwargs):
        raise ConfigError("model.norm and model.prenorm belong to the state-space and Mega blocks: add model=ssm "
                          "(profile=s4 is written for `model=ssm attention=s4d`) or model=mega (profile=mega is "
                          "written for `model=mega attention=mega`)")
    check_kwargs(Encoder, model_kwargs, "model", supplied=TASK_SUPPLIED_TO_ENCODER)
    factory = build_attention_factory(attention_cfg)
    with mixer_built(factory):
        encoder = Encoder(attention=factory, vocab_size=task.vocab_size, max_len=task.max_len, pad_id=task.pad_id,
                          **model_kwargs)
    if task.dual:
        return DualClassifier(encoder, model_kwargs["mlp_dim"], task.num_classes, task.interaction)
    return Classifier(encoder, mlp_dim=model_kwargs["mlp_dim"], num_classes=task.num_classes)


#: trainer keys that only the fine-tune uses (the pretraining has its own): left out of the pretraining's cache key
FINE_TUNE_ONLY = ("max_steps", "batch_size", "lr", "schedule", "warmup_steps", "schedule_steps", "weight_decay",
                  "eval_every")


def build_pretrain(cfg: DictConfig, model: nn.Module, task: Any, seed: int,
                   device: torch.device) -> PretrainPlan | None:
    """The pretraining phase of ``pretrain=mlm|causal`` (None for ``pretrain=none`` or a config without the group):
    its settings checked against the task and the mixers, its model built without touching the global RNG (the
    classifier's initialisation and the fine-tune's random stream are those of the same run from scratch)."""
    section = cfg.get("pretrain")
    name = section.get("name", "none") if section is not None else "none"
    check_name("pretrain", name, group_options("pretrain"))
    if name == "none":
        if set(section) - {"name"}:
            raise ConfigError(f"pretrain=none has no settings, got {sorted(set(section) - {'name'})}: choose "
                              "pretrain=mlm or pretrain=causal to pretrain")
        return None
    if task.name not in (section.get("task_defaults") or {}) and any(
            OmegaConf.is_interpolation(section, k) for k in ("mask_rate", "loss") if k in section):
        raise ConfigError(f"pretrain={name} has no default loss or mask rate for task {task.name!r} (its "
                          "task_defaults): set them, e.g. pretrain.loss=ce" + (" pretrain.mask_rate=0.15"
                                                                                if name == "mlm" else ""))
    settings = section_dataclass(PretrainSettings, section, "pretrain")
    if settings.loss == "l1" and not task.pixels:
        raise ConfigError(f"pretrain.loss=l1 regresses a grey value, and task {task.name!r} has tokens, not pixels: "
                          "use pretrain.loss=ce")
    mixers = [m for m in model.modules() if isinstance(m, TokenMixer)]
    if name == "causal" and not all(m.causal for m in mixers):
        raise ConfigError(f"pretrain=causal predicts the next token, which needs a causal mixer; attention="
                          f"{mixers[0].name} sees both directions. Use pretrain=mlm, or a causal mixer: "
                          "attention=s4d or attention=lru with attention.bidirectional=false")
    encoder = model.encoder
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        pretrainer = Pretrainer(encoder, encoder.dim, task.vocab_size, settings.loss, task.dual)
    config = run_container(cfg)
    trainer = {k: v for k, v in config["trainer"].items() if k not in FINE_TUNE_ONLY}
    key = stable_hash({"format": PRETRAIN_FORMAT, "seed": seed, "device": device.type, "trainer": trainer,
                       **{k: config[k] for k in ("task", "model", "attention", "pretrain")}})
    return PretrainPlan(settings=settings, model=pretrainer, cache_key=key)


@contextlib.contextmanager
def mixer_built(factory: functools.partial) -> Iterator[None]:
    """Any error a mixer's constructor raises (torch's own checks included) becomes one ConfigError naming the mixer
    and its settings: a setting no declared range caught still fails as a configuration, before any data."""
    try:
        yield
    except ConfigError:
        raise
    except (ValueError, TypeError, RuntimeError, ArithmeticError, IndexError) as e:
        name = getattr(factory.func, "name", factory.func.__name__)
        knobs = " ".join(f"attention.{k}={v!r}" for k, v in factory.keywords.items()) or "its defaults"
        first = str(e).splitlines()[0] if str(e) else ""
        raise ConfigError(f"attention={name} cannot be built with {knobs}: {type(e).__name__}: {first}; change "
                          "those settings") from e


def resolve_device(name: str) -> torch.device:
    """``auto`` -> CUDA when available, else CPU; a CUDA device without CUDA is a ConfigError."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"trainer.device={name} but CUDA is not available; use trainer.device=cpu or auto")
    return device


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def use_deterministic_algorithms(deterministic: bool) -> None:
    """``trainer.deterministic`` for the training and evaluation that follow. Not part of ``plan``: the call imports
    ``torch._dynamo`` (about 2 s of start-up), which a process that only checks configs (a sweep's parent, a
    config error) never needs."""
    torch.use_deterministic_algorithms(deterministic, warn_only=True)


def plan(cfg: DictConfig) -> Plan:
    """Validate the whole config and build the model (cheap); raises ConfigError/DataError on bad input."""
    for key in RUN_SECTIONS:
        if key not in cfg:
            raise ConfigError(f"config has no '{key}' section; run through run.py or compose configs/run.yaml")
    config = run_container(cfg)
    for key in config:
        if key not in TOP_LEVEL:
            close = difflib.get_close_matches(str(key), TOP_LEVEL, n=1)
            hint = f"did you mean {close[0]}? " if close else ""
            raise ConfigError(f"unknown top-level config key {key!r}: {hint}a run config has only "
                              f"{', '.join(TOP_LEVEL)} (a YAML file of your own that adds keys at the top needs its "
                              f"'# @package _global_' line and the sections' own names)")
    if (found := non_finite(config)) is not None:  # any number anywhere: NaN and inf train nonsense or break records
        raise ConfigError(f"{found[0]}={found[1]} is not a finite number; fix it in the config or on the command line")
    check_value("", "seed", config["seed"], Seed, prefix="")
    check_value("", "rerun", config.get("rerun", False), bool, prefix="")
    check_value("", "resume", config.get("resume", "auto"), RESUME, prefix="")
    for key, env in PATH_ENV.items():
        if config["paths"].get(key) == "":
            raise ConfigError(f"paths.{key} is empty ({env} set to an empty string?): unset {env} to use the "
                              f"default folder, or set it to a folder")
    name = attention_class(cfg.attention).name
    task = build_task(cfg.task)
    check_name("profile", cfg.profile.get("name"), group_options("profile"))
    trainer = section_dataclass(TrainerSettings, cfg.trainer, "trainer")
    # Before any parallel CPU op: the flag lives in each thread's MXCSR register, and torch's worker threads
    # copy it from this thread when they are created (set later, it would reach this thread only).
    torch.set_flush_denormal(trainer.flush_denormal)
    logger = section_dataclass(LoggerSettings, cfg.logger, "logger")
    device = resolve_device(trainer.device)
    task.check_source()
    seed_everything(cfg.seed)
    model = build_model(cfg.model, cfg.attention, task)
    pretrain = build_pretrain(cfg, model, task, int(cfg.seed), device)
    guard = section_dataclass(GuardSettings, cfg.get("guard") or {}, "guard")
    return Plan(attention=name, task=task, model=model, trainer=trainer, logger=logger, seed=int(cfg.seed),
                profile=str(cfg.profile.name), results_dir=Path(cfg.paths.results_dir),
                cache_dir=Path(cfg.paths.cache_dir), config_hash=config_hash(config), device=device, config=config,
                rerun=bool(cfg.get("rerun", False)), resume=str(config.get("resume", "auto")), guard=guard,
                pretrain=pretrain)
