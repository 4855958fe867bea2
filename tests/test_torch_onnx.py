"""The PyTorch module -> ONNX export (``_torch_onnx.py``): the TorchScript exporter as the dynamo
export's fallback, and failures that name the construct, the place and a known fix in one line.

The oracle for numerics is PyTorch running the module; for "the dynamo export fails", torch
itself (each case first checks that ``torch.onnx.export(..., dynamo=True)`` raises, so a torch
that fixes the bug makes the test say so instead of passing on the dynamo route).
"""

from __future__ import annotations

import dataclasses
import inspect
import io
import json
from pathlib import Path

import numpy as np
import onnx
import pytest

from partition_lab import _torch_onnx
from partition_lab.api import bind_params
from partition_lab.cli import main
from partition_lab.core.provenance import recorded_exporter
from partition_lab.errors import ModelFormatError, PartitionLabError

try:  # hides Triton from torch first: importing it after TVM crashes the process
    from partition_lab.relay.frontends._torch import require_torch

    torch = require_torch("the PyTorch export tests")
except PartitionLabError as missing:
    pytest.skip(str(missing), allow_module_level=True)

from partition_lab.relay.frontends import load_model  # noqa: E402
from partition_lab.relay.runtime import run_module  # noqa: E402

nn, F = torch.nn, torch.nn.functional


class MaskedAttention(nn.Module):
    """Swin's attention in a dozen lines: SDPA with a mask computed in the graph (Swin's relative
    position bias), then ``.reshape(*input_shape, -1)`` of the transposed output. torch 2.14's
    decomposition of SDPA gives that output other strides than the traced graph assumed, so its
    ``view`` cannot be decomposed ("Cannot view a tensor with shape ... and strides ...")."""

    def __init__(self, hidden: int = 32, heads: int = 2, seq: int = 16) -> None:
        super().__init__()
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden)
        self.heads = heads
        self.bias = nn.Parameter(torch.randn(1, heads, seq, seq))

    def forward(self, x):
        input_shape = x.shape[:-1]
        q, k, v = self.qkv(x).view(*input_shape, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=self.bias * 2)
        return self.proj(out.transpose(1, 2).reshape(*input_shape, -1))


def _reshape_line() -> int:
    """The line of MaskedAttention's ``.reshape(*input_shape, -1)``, which torch names."""
    lines, first = inspect.getsourcelines(MaskedAttention.forward)
    return first + next(i for i, line in enumerate(lines) if "reshape(*input_shape" in line)


WHERE = f"/tests/test_torch_onnx.py:{_reshape_line()} in forward"


@pytest.fixture(scope="module")
def attention() -> tuple[nn.Module, object]:
    torch.manual_seed(0)
    module, x = MaskedAttention().eval(), torch.randn(2, 16, 32)
    with pytest.raises(Exception, match="Cannot view a tensor"), _torch_onnx.quiet_torch():
        torch.onnx.export(module, (x,), dynamo=True, optimize=False, verbose=False)
    return module, x


def test_dynamo_failure_falls_back_to_torchscript_in_one_line_and_computes_as_torch(
        attention, capsys: pytest.CaptureFixture[str]) -> None:
    module, x = attention
    mod, params = load_model(module, x)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "\x1b" not in err, err
    assert err.startswith("partition_lab: the PyTorch module MaskedAttention: the dynamo export "
                          "failed (cannot decompose aten.view (Cannot view a tensor"), err
    assert WHERE + " (" in err and ".reshape(*input_shape" in err, err
    assert err.rstrip().endswith("exported with the TorchScript exporter "
                                 "(torch.onnx.export(..., dynamo=False), opset 17) instead"), err
    assert recorded_exporter(mod["main"]).startswith("torch.onnx (TorchScript, opset 17")
    with torch.no_grad():
        want = module(x).numpy()
    got = run_module(bind_params(mod, params), {"x": x.numpy()})[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_the_fallback_names_nodes_by_module_path(attention) -> None:
    module, x = attention
    model = _torch_onnx.module_to_onnx(module, x)
    names = [node.name for node in model.graph.node]
    assert "qkv" in names and "proj" in names, names
    assert all(not name.startswith("/") or name.split("/")[1][:1].isupper() for name in names)
    assert [i.name for i in model.graph.input] == ["x"]


def test_a_warm_run_reads_the_exporter_the_cold_one_used(attention, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]
                                                         ) -> None:
    module, x = attention
    path = tmp_path / "attention.onnx"
    path.write_bytes(_torch_onnx.module_to_onnx(module, x).SerializeToString())
    monkeypatch.setenv("PARTITION_LAB_CACHE", str(tmp_path / "cache"))
    capsys.readouterr()
    plans = []
    for run in ("cold", "warm"):
        out = tmp_path / f"{run}.json"
        assert main(["partition", str(path), "-t", "neuron", "-o", str(out)]) == 0
        capsys.readouterr()
        plans.append(json.loads(out.read_text()))
    assert list((tmp_path / "cache" / "converted").glob("*/*.tvm")), "nothing was cached"
    assert plans[0]["exporter"].startswith("torch.onnx (TorchScript, opset 17"), plans[0]
    assert plans[1]["exporter"] == plans[0]["exporter"]
    for plan in plans:
        plan.pop("solve_seconds", None)
    assert plans[1] == plans[0]


def test_when_both_exporters_fail_one_line_names_the_construct_place_and_fallback(
        attention, monkeypatch: pytest.MonkeyPatch) -> None:
    module, x = attention

    def fails(*args: object, **kwargs: object) -> object:
        raise RuntimeError("Exporting the operator 'aten::made_up' to ONNX opset 17 is not "
                           "supported.\nPlease open a bug")

    monkeypatch.setattr(_torch_onnx, "torchscript_onnx", fails)
    with pytest.raises(ModelFormatError) as raised:
        load_model(module, x)
    said = str(raised.value)
    assert "\n" not in said and "\x1b" not in said, said
    assert said.startswith("the PyTorch module MaskedAttention cannot be exported to ONNX: the "
                           "dynamo export failed (cannot decompose aten.view"), said
    assert WHERE in said
    assert ("the fallback tried, the TorchScript exporter (dynamo=False, opset 17), failed too "
            "(Exporting the operator 'aten::made_up' to ONNX opset 17 is not supported.)") in said


def _llama(use_cache: bool) -> tuple[nn.Module, object]:
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2,
                                      vocab_size=128, use_cache=use_cache)
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config).eval(), torch.randint(0, 128, (1, 16))


def test_a_decoder_returning_its_cache_is_told_use_cache_false(capsys) -> None:
    module, ids = _llama(use_cache=True)  # transformers' default
    with pytest.raises(ModelFormatError) as raised:
        load_model(module, ids)
    said = str(raised.value)
    assert "\n" not in said and "DynamicCache" in said, said
    assert "the fallback tried, the TorchScript exporter" in said, said
    assert said.endswith("build the model with use_cache=False (config.use_cache = False, or "
                         "from_pretrained(..., use_cache=False))"), said
    assert "register a pytree" not in said  # torch's advice, which does not apply here


def test_the_use_cache_advice_holds(capsys) -> None:
    module, ids = _llama(use_cache=False)
    mod, params = load_model(module, ids)
    assert capsys.readouterr().err == ""  # the dynamo export, no fallback
    with torch.no_grad():
        want = module(ids).logits.numpy()
    got = run_module(bind_params(mod, params), {"input_ids": ids.numpy()})[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@dataclasses.dataclass
class Out:
    logits: object


class ReturnsDataclass(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        return Out(self.fc(x))


def test_a_dataclass_output_is_told_to_return_tensors() -> None:
    with pytest.raises(ModelFormatError) as raised:
        load_model(ReturnsDataclass(), torch.randn(1, 8))
    said = str(raised.value)
    assert "\n" not in said, said
    assert "the outputs hold a test_torch_onnx.Out, which torch.export cannot flatten: return " \
           "the tensors (a tuple of them, e.g. return_dict=False for a Hugging Face model)" \
           in said, said


def test_torchscript_scopes_become_module_paths() -> None:
    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = nn.Sequential(nn.Linear(4, 4), nn.ReLU())

        def forward(self, x):
            return self.inner(x) + x

    buffer = io.BytesIO()
    block = Block().eval()
    with _torch_onnx.quiet_torch():
        torch.onnx.export(block, (torch.randn(1, 4),), buffer, dynamo=False, opset_version=17)
    model = onnx.load_from_string(buffer.getvalue())
    _torch_onnx.name_nodes_by_scope(model, block)
    names = [node.name for node in model.graph.node]
    assert names == ["inner.0", "inner.1", "/Add"], names
