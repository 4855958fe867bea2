"""PyTorch models through Relax: ``torch.export`` programs load with TVM's
``from_exported_program``, partition on every built-in platform, and the partitioned module
computes what the model does.

torch is a test dependency of the Relax venv (``requirements-relax.txt``); ``make test-relax``
sets ``PARTITION_LAB_REQUIRE_TORCH=1``, so a missing torch fails there instead of skipping.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import partition_lab
from partition_lab.relax import op_map
from partition_lab.relax.runtime import run_llvm

if os.environ.get("PARTITION_LAB_REQUIRE_TORCH") == "1":
    import torch
else:
    torch = pytest.importorskip("torch")

PLATFORMS = ("cpu", "neuron", "neuron@2020", "tensorcore")


class _ConvNet(torch.nn.Module):
    """A CNN of the ops torchvision models are made of: conv, batch norm, ReLU6, a residual
    add, pooling, flatten and a linear head."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 16, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(16)
        self.conv2 = torch.nn.Conv2d(16, 16, 3, padding=1)
        self.pool = torch.nn.AdaptiveAvgPool2d(1)
        self.fc = torch.nn.Linear(16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.nn.functional.relu6(self.bn(self.conv(x)))
        y = y + torch.relu(self.conv2(y))
        return self.fc(torch.flatten(self.pool(y), 1))


class _Block(torch.nn.Module):
    """A transformer feed-forward block: LayerNorm, linear, GELU, linear, residual."""

    def __init__(self) -> None:
        super().__init__()
        self.norm = torch.nn.LayerNorm(32)
        self.up = torch.nn.Linear(32, 64)
        self.down = torch.nn.Linear(64, 32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


MODELS = {"convnet": (_ConvNet, (2, 3, 16, 16)), "ffn_block": (_Block, (2, 8, 32))}


def _exported(name: str) -> tuple[object, np.ndarray, np.ndarray]:
    """The exported program of ``name``, an input and the eager model's output for it."""
    torch.manual_seed(0)
    cls, shape = MODELS[name]
    model = cls().eval()
    x = torch.randn(*shape)
    with torch.no_grad():
        want = model(x).numpy()
    return torch.export.export(model, (x,)), x.numpy(), want


@pytest.mark.parametrize("name", sorted(MODELS))
def test_an_exported_program_loads_with_every_op_mapped(name):
    program, _, _ = _exported(name)
    mod, params = partition_lab.load_model(program)
    assert params == {}
    result = partition_lab.partition(mod, "neuron")
    unmapped = {op for op in result.relax.relax_ops
                if not op_map.is_mapped(op) and op not in op_map.HOST_ONLY}
    assert not unmapped


@pytest.mark.parametrize("platform", PLATFORMS)
@pytest.mark.parametrize("name", sorted(MODELS))
def test_the_partitioned_program_computes_what_the_model_does(name, platform):
    program, x, want = _exported(name)
    mod, _ = partition_lab.load_model(program)
    result = partition_lab.partition(mod, platform)
    placed = sorted(n for region in result.plan.regions for n in region.nodes)
    assert placed == sorted(node.id for node in result.graph)  # every op in one region
    if platform != "cpu":  # every op of these models is supported somewhere off the host
        assert result.plan.accelerator_regions
    else:
        assert not result.plan.accelerator_regions
    (got,) = run_llvm(result.mod, [x])
    # tensorcore computes in float16: compare at float16's precision there
    tolerance = 2e-2 if platform == "tensorcore" else 1e-4
    np.testing.assert_allclose(np.asarray(got, dtype="float32"), want, rtol=tolerance,
                               atol=tolerance)
