"""Attention zoo. Importing this package imports every module in it, so each variant registers.

Adding a variant = adding ``lra_bench/attention/NAME.py`` (a subclass of ``Attention`` -- or of ``TokenMixer``
for a mixer without queries and keys -- with ``name = "NAME"``) and ``configs/attention/NAME.yaml``; nothing
else needs editing. A variant may also live outside this package (your own module, named by ``_target_``); it
registers when its config is used (``lra_bench.config.attention.attention_class``).
"""

import importlib
import pkgutil

from lra_bench.attention.base import (
    Attention,
    TokenMixer,
    cites_its_source,
    get_attention_class,
    key_padding_bias,
    list_attentions,
)

for _module in pkgutil.iter_modules(__path__):
    if _module.name != "base" and not _module.name.startswith("_"):
        importlib.import_module(f"{__name__}.{_module.name}")

__all__ = ["Attention", "TokenMixer", "cites_its_source", "get_attention_class", "key_padding_bias", "list_attentions"]
