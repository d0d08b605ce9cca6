"""Our attention layers beside the PyPI packages people already use, at matched settings (``tools/bench_peers.py``).

Each ``Pair`` names one of our variants with its knobs and the package layer computing the same mechanism with the
same sizes. Both sides are one self-attention layer (input projection, attention, output projection; for Mega and
Mamba the whole mixing layer, gates included), no padding, no dropout anywhere (so the comparison is of the
algorithms and their implementations), fed (B, N, dim) and timed forward + backward by the same code. ``sdpa`` is
a layer around bare ``F.scaled_dot_product_attention`` with no mask: the fastest exact attention torch offers.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch.nn.functional as F
from einops import rearrange
from torch import Tensor, nn

from lra_bench.attention import get_attention_class
from lra_bench.errors import LRABenchError


class PeerMissing(LRABenchError):
    """The peer's package is not installed."""


class SDPALayer(nn.Module):
    """Fused q/k/v projection, ``F.scaled_dot_product_attention`` without a mask, output projection."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)

    def forward(self, x: Tensor) -> Tensor:
        q, k, v = rearrange(self.qkv(x), "b n (three h d) -> three b h n d", three=3, h=self.heads)  # (B, H, N, D)
        y = F.scaled_dot_product_attention(q, k, v)  # (B, H, N, D)
        return self.out(rearrange(y, "b h n d -> b n (h d)"))  # (B, N, C)


@dataclass(frozen=True)
class Pair:
    """One comparison: our ``ours`` variant with ``knobs`` against ``package``'s ``module.cls(**peer_kwargs)``."""

    name: str
    ours: str
    knobs: dict[str, Any]
    package: str  # the PyPI distribution ("torch" for the built-in reference)
    module: str
    cls: str
    peer_kwargs: Callable[[int, int, int], dict[str, Any]]  # (dim, heads, n) -> constructor arguments
    note: str = ""
    peer_call: dict[str, Any] = field(default_factory=dict)  # extra forward keyword arguments
    length_knobs: Callable[[int], dict[str, Any]] | None = None  # n -> our knobs that the package derives from N

    def knobs_at(self, n: int) -> dict[str, Any]:
        """Our knobs at length ``n``: the fixed ones and those that follow the package's own rule for N."""
        return {**self.knobs, **(self.length_knobs(n) if self.length_knobs else {})}

    @property
    def peer_label(self) -> str:
        return f"{self.package} {self.cls}"


PAIRS: tuple[Pair, ...] = (
    Pair("flash", "flash", {"attn_dropout": 0.0}, "torch", "lra_bench.bench.peers", "SDPALayer",
         lambda dim, heads, n: {"dim": dim, "heads": heads}, "exact attention; ours checks the mask for padding"),
    Pair("performer", "performer", {"nb_features": 256, "kernel": "softmax"}, "performer-pytorch",
         "performer_pytorch", "SelfAttention",
         lambda dim, heads, n: {"dim": dim, "heads": heads, "dim_head": dim // heads, "nb_features": 256,
                                "causal": False}, "FAVOR+ softmax kernel, 256 orthogonal random features"),
    Pair("efficient", "efficient", {}, "linear-attention-transformer", "linear_attention_transformer."
         "linear_attention_transformer", "SelfAttention", lambda dim, heads, n: {"dim": dim, "heads": heads},
         "both softmax(Q) over features, softmax(K) over positions (Shen et al.), non-causal"),
    Pair("linformer", "linformer", {"low_rank_features": 256, "attn_dropout": 0.0}, "linformer", "linformer",
         "LinformerSelfAttention", lambda dim, heads, n: {"dim": dim, "seq_len": n, "k": 256, "heads": heads},
         "k = 256, separate E and F projections"),
    Pair("nystromformer", "nystromformer", {"num_landmarks": 256, "pinv_iterations": 6, "conv_kernel": 33},
         "nystrom-attention", "nystrom_attention", "NystromAttention",
         lambda dim, heads, n: {"dim": dim, "dim_head": dim // heads, "heads": heads, "num_landmarks": 256,
                                "pinv_iterations": 6, "residual": True, "residual_conv_kernel": 33},
         "256 landmarks, 6 pinv iterations, depthwise conv 33 on V"),
    Pair("reformer", "reformer", {"n_hashes": 4, "chunk_len": 64, "attn_dropout": 0.0}, "reformer-pytorch",
         "reformer_pytorch", "LSHSelfAttention",
         lambda dim, heads, n: {"dim": dim, "heads": heads, "bucket_size": 64, "n_hashes": 4, "causal": False},
         "shared-QK LSH, 4 hashes, chunks of 64, N / 64 buckets (the package's rule)",
         length_knobs=lambda n: {"n_buckets": n // 64}),  # ours defaults to min(2N/64, 64): 32 at 1K, 16 here
    Pair("local", "local", {"block_size": 128, "num_neighbor_blocks": 1, "attn_dropout": 0.0}, "local-attention",
         "local_attention", "LocalMHA",
         lambda dim, heads, n: {"dim": dim, "window_size": 128, "heads": heads, "dim_head": dim // heads,
                                "use_rotary_pos_emb": False},
         "windows of 128 seeing the previous, own and next window (the package's non-causal default); "
         "the package also masks keys beyond 128 positions (exact_windowsize)"),
    Pair("sinkhorn", "sinkhorn", {"block_size": 64, "iterations": 5, "temperature": 0.75, "attn_dropout": 0.0},
         "sinkhorn-transformer", "sinkhorn_transformer", "SinkhornSelfAttention",
         lambda dim, heads, n: {"dim": dim, "heads": heads, "dim_head": dim // heads, "bucket_size": 64,
                                "max_seq_len": n, "non_permutative": False, "sinkhorn_iter": 5, "temperature": 0.75},
         "blocks / buckets of 64, each attending to its own and one Sinkhorn-sorted block, 5 iterations at "
         "temperature 0.75; the sorting networks differ (ours: an MLP on key-block means, the package's: dot "
         "products of query and key block means, with Gumbel noise)"),
    Pair("mega", "mega", {"z_dim": 64, "ndim": 16, "attention_function": "softmax"}, "mega-pytorch", "mega_pytorch",
         "MegaLayer", lambda dim, heads, n: {"dim": dim, "ema_heads": 16, "attn_dim_qk": 64, "attn_dim_value": 2 * dim,
                                             "laplacian_attn_fn": False, "causal": False},
         "the whole Mega layer: bidirectional EMA (16 dimensions per channel; the package's shares rates across "
         "channels), one softmax head over all N with z 64, V 2*dim, gates; the package's T5 bucketed bias"),
    Pair("mamba", "mamba", {"kernel": "torch"}, "mambapy", "mambapy.vim", "VMambaBlock",
         lambda dim, heads, n: {"config": importlib.import_module("mambapy.vim").MambaConfig(
             d_model=dim, n_layers=1, bidirectional=True)},
         "the whole bidirectional Mamba block (Vision Mamba v2): d_state 16, expand 2, conv 4; both PyTorch parallel "
         "scans (ours odd-even reduction, the package's Blelloch), no CUDA kernel"),
)
PAIR_NAMES = tuple(p.name for p in PAIRS)


def get_pair(name: str) -> Pair:
    for pair in PAIRS:
        if pair.name == name:
            return pair
    raise LRABenchError(f"unknown peer comparison {name!r}; valid: {', '.join(PAIR_NAMES)}")


def build_ours(pair: Pair, dim: int, heads: int, n: int) -> nn.Module:
    """Our layer with the pair's knobs as a function of x (B, N, dim), with no mask (no padding)."""
    layer = get_attention_class(pair.ours)(dim=dim, num_heads=heads, seq_len=n, dropout=0.0, **pair.knobs_at(n))
    return _Called(layer, {"mask": None})


def build_peer(pair: Pair, dim: int, heads: int, n: int) -> nn.Module:
    """The package's layer as a function of x (B, N, dim); ``PeerMissing`` with the install command if absent."""
    try:
        module = importlib.import_module(pair.module)
    except ModuleNotFoundError as e:
        raise PeerMissing(f"{pair.package} is not installed ({e}); pip install {pair.package} "
                          "(on the GPU machine: the wheels in ../shared/device/wheels, see its README)") from e
    return _Called(getattr(module, pair.cls)(**pair.peer_kwargs(dim, heads, n)), pair.peer_call)


class _Called(nn.Module):
    """A layer called with fixed keyword arguments; keeps the layer's parameters for ``.to`` and counting."""

    def __init__(self, layer: nn.Module, kwargs: dict[str, Any]) -> None:
        super().__init__()
        self.layer = layer
        self.kwargs = kwargs

    def forward(self, x: Tensor) -> Tensor:
        return self.layer(x, **self.kwargs)


def build(pair: Pair, side: str, dim: int, heads: int, n: int) -> nn.Module:
    """``side`` "ours" or "peer"."""
    if side not in ("ours", "peer"):
        raise LRABenchError(f"side must be ours or peer, got {side!r}")
    return (build_ours if side == "ours" else build_peer)(pair, dim, heads, n)

