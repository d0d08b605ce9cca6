"""FNet: token mixing by the real part of a 2-D discrete Fourier transform (no parameters).

Lee-Thorp et al. 2021, "FNet: Mixing Tokens with Fourier Transforms", https://arxiv.org/abs/2105.03824.

y = Re(F_N X F_C) for X (N × C) with the padded rows zeroed first, so padded content never leaks.
The transform still spans the padded length N, so a padded input does not give the truncated input's
outputs (``truncation_exact = False``). FFT computed in fp32.

Time O(B·N·C·(log N + log C)), memory O(B·N·C).
"""

from __future__ import annotations

import torch
from torch import Tensor

from lra_bench.attention.base import TokenMixer


class FNetMixing(TokenMixer):
    """Re(FFT₂(x)) over (sequence, hidden); replaces attention, has no weights.

    Args:
        dim, num_heads, seq_len, dropout: supplied by the encoder (see ``TokenMixer``); heads are unused.
    """

    name = "fnet"
    truncation_exact = False

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        self.check_input(x, mask)
        dtype = x.dtype
        with torch.autocast(device_type=x.device.type, enabled=False):
            x = x.float()
            if mask is not None:
                x = x.masked_fill(~mask[..., None], 0.0)  # (B, N, C)
            y = torch.fft.fft2(x, dim=(-2, -1)).real  # (B, N, C)
        return self.out_drop(y.to(dtype))
