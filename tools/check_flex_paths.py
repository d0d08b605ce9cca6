"""Check on a device that the FlexAttention kernel of the sparse variants computes what their blocked kernel does.

For local, strided, global, longformer and bigbird (their configs' settings, or ``--n``-scaled), on a padded batch:
    1. flex == blocked, attention dropout 0: outputs at real positions and, where the device has a FlexAttention
       backward (CUDA), the gradients of q, k and v;
    2. compiled flex == eager flex with attention dropout and a fixed dropout seed (the hashed mask compiles to the
       same decisions): outputs, and gradients on CUDA.
Eager FlexAttention evaluates the mask on every pair and ignores the block mask's tiles, so it is the reference
for the tiles the compiled kernel skips. Prints one line per check and exits 1 if any fails. The test suite runs
the same checks on CPU (forward only: torch has no FlexAttention backward on CPU); on the GPU machine this is the
first thing to run.

    python tools/check_flex_paths.py                       # N=1025 (a partial last tile), batch 4, dim 256, 4 heads
    python tools/check_flex_paths.py --n 300 --batch 2 --no-compile
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import _repo  # noqa: F401  (this checkout's lra_bench first: tools/_repo.py)
import torch
from omegaconf import OmegaConf

from lra_bench.attention._sparse import SparsePatternAttention
from lra_bench.config.attention import build_attention_factory

CONFIGS_DIR = Path(__file__).resolve().parents[1] / "configs"

VARIANTS = ("local", "strided", "global", "longformer", "bigbird")


def layer_for(name: str, dim: int, heads: int, n: int, attn_dropout: float, device: torch.device
              ) -> SparsePatternAttention:
    cfg = OmegaConf.load(CONFIGS_DIR / "attention" / f"{name}.yaml")
    cfg.attn_dropout = attn_dropout
    if name == "longformer":
        cfg.window = min(cfg.window, n // 4)  # keep the band sparse at short test lengths
    torch.manual_seed(0)
    layer = build_attention_factory(cfg)(dim=dim, num_heads=heads, seq_len=n, dropout=0.0)
    assert isinstance(layer, SparsePatternAttention)
    return layer.to(device).train()


def max_error(a: torch.Tensor, b: torch.Tensor, rows: torch.Tensor) -> float:
    """Largest |a - b| over real query rows, relative to max |b| there."""
    keep = rows[:, None, :, None].expand_as(a)  # (B, H, N, D)
    return float((a[keep] - b[keep]).abs().max() / b[keep].abs().max().clamp(min=1e-6))


def run(name: str, args: argparse.Namespace, device: torch.device) -> list[tuple[str, float, bool]]:
    b, h, n, d = args.batch, args.heads, args.n, args.dim // args.heads
    grads = device.type == "cuda"
    gen = torch.Generator(device="cpu").manual_seed(1)
    q, k, v = (torch.randn(b, h, n, d, generator=gen).to(device) for _ in range(3))
    mask = torch.ones(b, n, dtype=torch.bool)
    mask[-1, n - n // 3:] = False  # a padded row
    mask = mask.to(device)
    results = []

    def outputs(fn, seed_rng: int) -> tuple[torch.Tensor, list[torch.Tensor]]:
        qq, kk, vv = (t.clone().requires_grad_(grads) for t in (q, k, v))
        torch.manual_seed(seed_rng)  # the same random blocks on both sides
        with torch.set_grad_enabled(grads):
            out = fn(qq, kk, vv)
            if grads:
                (out * mask[:, None, :, None]).float().square().sum().backward()
        return out.detach(), [t.grad for t in (qq, kk, vv)] if grads else []

    layer = layer_for(name, args.dim, h, n, 0.0, device)
    ref, ref_g = outputs(lambda qq, kk, vv: layer.attend_blocked(qq, kk, vv, mask), 2)
    got, got_g = outputs(lambda qq, kk, vv: layer.attend_flex(qq, kk, vv, mask, compiled=args.compile), 2)
    results.append(("flex vs blocked, outputs", max_error(got, ref, mask), True))
    for which, a, r in zip("qkv", got_g, ref_g, strict=False):
        results.append((f"flex vs blocked, grad {which}", max_error(a, r, mask), True))
    if args.compile:
        layer = layer_for(name, args.dim, h, n, 0.1, device)
        seed = torch.tensor(1234, device=device)
        eager, eager_g = outputs(lambda qq, kk, vv: layer.attend_flex(qq, kk, vv, mask, compiled=False, seed=seed), 3)
        comp, comp_g = outputs(lambda qq, kk, vv: layer.attend_flex(qq, kk, vv, mask, compiled=True, seed=seed), 3)
        results.append(("compiled vs eager with dropout, outputs", max_error(comp, eager, mask), True))
        for which, a, r in zip("qkv", comp_g, eager_g, strict=False):
            results.append((f"compiled vs eager with dropout, grad {which}", max_error(a, r, mask), True))
    return results


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--variants", nargs="+", choices=VARIANTS, default=list(VARIANTS))
    ap.add_argument("--n", type=int, default=1025,
                    help="default 1025: not a multiple of the 128-token tile, as real lengths (max_len + 1)")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--tolerance", type=float, default=None, help="relative; default 2e-2 on CUDA (TF32), 1e-4 CPU")
    ap.add_argument("--no-compile", dest="compile", action="store_false", help="skip torch.compile (eager only)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = ap.parse_args()
    device = torch.device(args.device)
    tolerance = args.tolerance or (2e-2 if device.type == "cuda" else 1e-4)
    warnings.filterwarnings("ignore", message="flex_attention called without torch.compile")
    failed = 0
    for name in args.variants:
        for check, error, _ in run(name, args, device):
            ok = error <= tolerance
            failed += not ok
            print(f"{name:>10}  {check:<45} rel. error {error:.2e}  {'ok' if ok else 'FAIL'}", flush=True)
    print(f"{failed} check(s) failed" if failed else "all checks passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
