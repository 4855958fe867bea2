"""Saved PyTorch programs (``.pt2``) and what ``torch.export`` cannot trace.

- A transformers model's ``.pt2`` loads in a process that never imported transformers (its
  output classes are registered by importing the module the file names, from an allow-list
  only); a type outside the list, or of a package that is not installed, is one line.
- ``--input-shape`` on a ``.pt2`` re-exports a program with dynamic dimensions at that shape
  (oracle: PyTorch running the module at that shape) and refuses a static one in one line.
- A module ``torch.export`` cannot trace (a branch on tensor values, a detector's
  post-processing) fails in one short line naming the construct and the place in the code.

Models are tiny and random (a BertModel of width 32 from a config; nothing is downloaded).
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from partition_lab._optional import MissingDependencyError
from partition_lab.api import bind_params
from partition_lab.cli import main
from partition_lab.errors import InputShapeError, ModelFormatError, PartitionLabError
from partition_lab.relay.frontends import load_model, source_name
from partition_lab.relay.frontends._spans import calls_in_order
from partition_lab.relay.runtime import run_module

try:  # hides Triton from torch first: importing it after TVM crashes the process
    from partition_lab.relay.frontends._torch import require_torch

    torch = require_torch("the .pt2 tests")
except PartitionLabError as missing:
    pytest.skip(str(missing), allow_module_level=True)
nn = torch.nn

#: What a CLI error may be at most: one line a person reads, not torch's report.
MAX_ERROR = 500


class SmallNet(nn.Module):
    """Convolution, global mean and a classifier: batch-agnostic in PyTorch."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        return self.fc(torch.relu(self.conv(x)).mean((2, 3)))


class Branchy(nn.Module):
    """A branch on a tensor's value: torch.export refuses it (it traces one static graph)."""

    def forward(self, x):
        if x.sum() > 0:
            return x * 2
        return x - 1


def one_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert len(err) <= MAX_ERROR, len(err)
    return err.strip()


# ------------------------------------------------------------------ transformers .pt2 files
@pytest.fixture(scope="module")
def bert_pt2(tmp_path_factory) -> Path:
    """A BertModel (1 layer, width 32) saved with torch.export.save: it returns a
    transformers BaseModelOutputWithPoolingAndCrossAttentions."""
    transformers = pytest.importorskip("transformers")
    config = transformers.BertConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                     intermediate_size=64, vocab_size=100,
                                     max_position_embeddings=32)
    torch.manual_seed(0)
    model = transformers.BertModel(config).eval()
    path = tmp_path_factory.mktemp("bert") / "bert.pt2"
    with torch.no_grad():
        torch.export.save(torch.export.export(model, (torch.zeros(1, 8, dtype=torch.long),)),
                          str(path))
    return path


def renamed_output_type(source: Path, target: Path, old: str, new: str) -> Path:
    """A copy of a .pt2 whose saved specs name the output type ``new`` instead of ``old``."""
    with zipfile.ZipFile(source) as zin, zipfile.ZipFile(target, "w") as zout:
        for item in zin.infolist():
            data = zin.read(item.filename)
            if item.filename.endswith(".json"):
                data = data.replace(old.encode(), new.encode())
            zout.writestr(item, data)
    return target


@pytest.mark.slow
def test_a_transformers_pt2_loads_where_transformers_was_never_imported(bert_pt2) -> None:
    """Without the import, torch.export.load alone fails ("not registered"); the loader
    imports transformers.modeling_outputs, which the file names, and loads it."""
    script = (
        "import sys\n"
        "from partition_lab import load_model\n"
        "assert 'transformers' not in sys.modules\n"
        "mod, params = load_model(sys.argv[1])\n"
        "assert 'transformers.modeling_outputs' in sys.modules\n"
        "inputs = [p for p in mod['main'].params if p.name_hint not in params]\n"
        "print([(p.name_hint, [int(d) for d in p.checked_type.shape]) for p in inputs])\n"
    )
    done = subprocess.run([sys.executable, "-c", script, str(bert_pt2)], capture_output=True,
                          text=True, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[('input_ids', [1, 8])]"
    assert "not registered" not in done.stderr  # torch's warning is not passed on


def test_an_output_type_outside_the_allow_list_is_never_imported(bert_pt2, tmp_path, capsys,
                                                                  monkeypatch) -> None:
    """The file names the module; importing it would run its code, so only well-known
    packages' modules are imported."""
    package = tmp_path / "site" / "evil_outputs"
    package.mkdir(parents=True)
    marker = tmp_path / "imported"
    (package / "__init__.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    evil = renamed_output_type(bert_pt2, tmp_path / "evil.pt2", "transformers.modeling_outputs.",
                               "evil_outputs.modeling_outputs.")
    with pytest.raises(ModelFormatError, match="evil_outputs.modeling_outputs.BaseModelOutput"):
        load_model(evil)
    assert main(["partition", str(evil)]) == 2
    err = one_line(capsys)
    assert "import evil_outputs before load_model" in err and "transformers" in err
    assert not marker.exists() and "evil_outputs" not in sys.modules


def test_an_output_type_of_a_missing_package_says_what_to_install(bert_pt2, tmp_path, capsys,
                                                                  monkeypatch) -> None:
    # A type name this process has not registered (transformers is imported here already).
    renamed = renamed_output_type(bert_pt2, tmp_path / "renamed.pt2",
                                  "BaseModelOutputWithPooling", "RenamedOutputWithPooling")
    monkeypatch.setitem(sys.modules, "transformers", None)  # import transformers -> ImportError
    with pytest.raises(MissingDependencyError, match="pip install transformers"):
        load_model(renamed)
    assert main(["viz", str(renamed), "-o", str(tmp_path / "m.svg")]) == 2
    err = one_line(capsys)
    assert "transformers.modeling_outputs.RenamedOutputWithPoolingAndCrossAttentions" in err
    assert not (tmp_path / "m.svg").exists()


def test_a_broken_pt2_names_torchs_logged_cause_not_the_hidden_warnings(bert_pt2, tmp_path,
                                                                        capsys) -> None:
    cut = tmp_path / "cut.pt2"
    with zipfile.ZipFile(bert_pt2) as zin, zipfile.ZipFile(cut, "w") as zout:
        for item in zin.infolist():
            if not item.filename.endswith("model.json"):
                zout.writestr(item, zin.read(item.filename))
    assert main(["partition", str(cut)]) == 2
    err = one_line(capsys)
    assert "not a program saved with torch.export.save" in err
    assert "warnings above" not in err


# ------------------------------------------------------------------------- --input-shape
@pytest.fixture(scope="module")
def small_net_pt2(tmp_path_factory) -> tuple[nn.Module, Path, Path]:
    """SmallNet saved twice at batch 2: with static shapes, and with a dynamic batch (1..16)."""
    torch.manual_seed(0)
    module = SmallNet().eval()
    folder = tmp_path_factory.mktemp("small_net")
    x = torch.randn(2, 3, 16, 16)
    batch = torch.export.Dim("batch", min=1, max=16)
    static, dynamic = folder / "static.pt2", folder / "dynamic.pt2"
    with torch.no_grad():
        torch.export.save(torch.export.export(module, (x,)), str(static))
        torch.export.save(torch.export.export(module, (x,), dynamic_shapes=({0: batch},)),
                          str(dynamic))
    return module, static, dynamic


def input_shape(mod) -> tuple[int, ...]:  # noqa: ANN001
    return tuple(int(d) for d in mod["main"].params[0].checked_type.shape)


def test_a_dynamic_batch_pt2_is_exported_again_at_the_given_shape(small_net_pt2) -> None:
    module, _, dynamic = small_net_pt2
    mod, params = load_model(dynamic, {"x": (5, 3, 16, 16)})
    assert input_shape(mod) == (5, 3, 16, 16)
    names = [source_name(call) for call in calls_in_order(mod["main"])]
    assert "conv" in names and "fc" in names  # module paths survive the second export
    x = np.random.default_rng(0).standard_normal((5, 3, 16, 16)).astype("float32")
    got = run_module(bind_params(mod, params), {"x": x}, opt_level=0)[0]
    with torch.no_grad():
        expected = module(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
    # Without a shape, the shape it was exported at.
    assert input_shape(load_model(dynamic)[0]) == (2, 3, 16, 16)


@pytest.mark.parametrize("shape, message", [
    ((4, 3, 16, 16), r"exported with static shapes \(input 'x': \(2, 3, 16, 16\)\), so its "
                     r"dimension 0 cannot be 4: export it again with dynamic_shapes="),
    ((2, 3, 16, 16), None),  # its own shape
])
def test_a_static_pt2_keeps_its_shapes(small_net_pt2, shape, message) -> None:
    _, static, _ = small_net_pt2
    if message is None:
        assert input_shape(load_model(static, {"x": shape})[0]) == shape
        return
    with pytest.raises(InputShapeError, match=message):
        load_model(static, {"x": shape})


@pytest.mark.parametrize("shape, message", [
    ((32, 3, 16, 16), r"allows input 'x' dimension 0 \(\w+\) sizes 1 to 16 .*not 32"),
    ((4, 3, 8, 16), r"exported with dimension 2 static .* cannot be 8"),
    ((4, 3, 16), r"has rank 3 but 'dynamic.pt2''s input 'x' has rank 4"),
])
def test_a_dynamic_pt2_keeps_its_static_dims_and_ranges(small_net_pt2, shape, message) -> None:
    _, _, dynamic = small_net_pt2
    with pytest.raises(InputShapeError, match=message):
        load_model(dynamic, {"x": shape})


def test_an_unbounded_dim_takes_any_size(tmp_path) -> None:
    """``Dim("batch")`` without a maximum: torch's range ends at ``int_oo``."""
    path = tmp_path / "unbounded.pt2"
    with torch.no_grad():
        torch.export.save(torch.export.export(SmallNet().eval(), (torch.randn(2, 3, 16, 16),),
                                              dynamic_shapes=({0: torch.export.Dim("batch")},)),
                          str(path))
    assert input_shape(load_model(path, {"x": (100, 3, 16, 16)})[0]) == (100, 3, 16, 16)


def test_cli_input_shape_on_a_static_pt2_is_one_line(small_net_pt2, capsys) -> None:
    _, static, _ = small_net_pt2
    assert main(["partition", str(static), "--input-shape", "x=8,3,16,16"]) == 2
    err = one_line(capsys)
    assert "static shapes" in err and "dynamic_shapes=" in err and "nn.Module" in err


# ------------------------------------------------------------------ what torch.export refuses
def test_a_branch_on_tensor_values_is_one_short_line_naming_the_code() -> None:
    with pytest.raises(ModelFormatError) as caught:
        load_model(Branchy(), torch.randn(2, 3))
    message = str(caught.value)
    assert "\n" not in message and len(message) <= MAX_ERROR
    assert "depends on tensor values" in message
    assert f"{Path(__file__).name}:" in message and "in forward (if x.sum() > 0:)" in message


@pytest.mark.slow
def test_a_detectors_post_processing_is_one_short_line_naming_the_nms() -> None:
    """torch's own message is 12 lines (plus the graph traced so far); the first line alone
    held a symbolic expression."""
    detection = pytest.importorskip("torchvision.models.detection")
    model = detection.ssdlite320_mobilenet_v3_large(weights=None, weights_backbone=None,
                                                    num_classes=3)
    with pytest.raises(ModelFormatError) as caught:
        load_model(model, torch.randn(1, 3, 320, 320))
    message = str(caught.value)
    assert "\n" not in message and len(message) <= MAX_ERROR
    assert message.startswith("torch.export cannot export the PyTorch module SSD: a shape or "
                              "branch that depends on tensor values at torchvision/ops/boxes.py")
    assert "head outputs" in message
