"""The complexity probe itself must see an N x N tensor when one is built (so complexity tests can fail)."""

import torch

from tests.helpers.intermediates import largest_intermediate


def test_probe_sees_quadratic_tensor():
    x = torch.randn(1, 300, 8, requires_grad=True)
    numel, op = largest_intermediate(lambda: (x @ x.transpose(1, 2)).softmax(-1) @ x)
    assert numel >= 300 * 300, op


def test_probe_sees_only_linear_tensors_for_linear_work():
    x = torch.randn(1, 300, 8, requires_grad=True)
    numel, _ = largest_intermediate(lambda: (x.transpose(1, 2) @ x) @ x.transpose(1, 2))
    assert numel < 300 * 300
