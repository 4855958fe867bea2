"""``tvm:<backend>`` targets: reasons naming the pattern and its check, composites as units, the
partitioned module in the form ``partition_for_*`` leaves, and bad input in one line."""

from __future__ import annotations

import dataclasses
from collections import Counter

import models
import onnx
import pytest
from tvm import relax

import partition_lab
from partition_lab.cli import main
from partition_lab.errors import UnknownTargetError
from partition_lab.relax.byoc import backends, target
from partition_lab.relax.byoc.matching import tagged_module
from partition_lab.targets import get_platform, registry


def _partition(model: str, backend: str, **kw):
    mod, params = partition_lab.load_model(models.MODELS[model]())
    target = backend if backend.endswith((".toml", ".json")) else f"tvm:{backend}"
    return partition_lab.partition(mod, target, params=params, strategy="greedy", **kw)


def _reasons(result, backend: str) -> dict[str, str]:
    verdicts = result.plan.support.of(backend)
    return {n.name: verdicts[n.id].reason for n in result.graph}


def test_a_rejecting_check_is_named_with_its_condition_and_the_values_it_read() -> None:
    result = _partition("depthwise", "cutlass")
    reasons = _reasons(result, "cutlass")
    conv = reasons["pointwise"]
    assert conv.startswith("pattern cutlass.conv2d matches relax.nn.conv2d here but its check "
                           "_check_conv2d (cutlass.py:")
    assert "data_layout != 'NHWC'" in conv and "data_layout='NCHW'" in conv
    assert "data.ty.dtype=float32" in conv
    assert reasons["sigmoid"] == "no cutlass pattern has relax.sigmoid (none of its 79 patterns)"
    assert all(result.plan.device_of(n) == "cuda" for n in range(len(result.graph)))


def test_a_composite_of_several_ops_is_one_unit() -> None:
    result = _partition("attention", "cublas")
    [unit] = [u for u in result.plan.support.units if u.name == "matmul_transposed"]
    assert [result.graph[n].op for n in unit.nodes] == ["transpose", "nn.batch_matmul"]
    verdicts = result.plan.support.of("cublas")
    assert len({verdicts[n].reason for n in unit.nodes}) == 1
    assert verdicts[unit.output].reason.startswith(
        "pattern cublas.matmul_transposed takes it (2 ops: transpose, nn.batch_matmul); its "
        "check _check_matmul (cublas.py:")


@pytest.mark.parametrize("model", ["convnet", "attention", "resblock"])
def test_the_composites_are_the_ones_partition_for_tensorrt_makes(model) -> None:
    result = _partition(model, "tensorrt")
    ours = _composite_names(result.mod)
    theirs = _composite_names(backends.partition_for(backends.backend("tensorrt"))(
        tagged_module(result.ir)))
    assert ours == theirs and sum(ours.values()) > 0
    codegen = [f for _, f in result.mod.functions_items()
               if f.attrs is not None and "Codegen" in f.attrs.keys()]
    assert codegen and {str(f.attrs["Codegen"]) for f in codegen} == {"tensorrt"}


def _composite_names(mod) -> Counter[str]:
    """``Composite`` functions by name, over every function of ``mod`` (local ones included)."""
    found: Counter[str] = Counter()

    def visit(expr):
        if isinstance(expr, relax.Function) and expr.attrs is not None \
                and "Composite" in expr.attrs.keys():
            found[str(expr.attrs["Composite"])] += 1

    for _, func in mod.functions_items():
        if isinstance(func, relax.Function):
            relax.analysis.post_order_visit(func, visit)
    return found


# ------------------------------------------------------------------------------ bad input
def test_an_unknown_backend_gets_a_did_you_mean() -> None:
    with pytest.raises(UnknownTargetError, match="did you mean 'tensorrt'") as caught:
        get_platform("tvm:tensort")
    assert "tvm:cutlass" in str(caught.value) and "\n" not in str(caught.value)


def test_without_the_relax_stack_a_tvm_target_is_one_line(monkeypatch) -> None:
    monkeypatch.delitem(registry._FAMILIES, "tvm")
    with pytest.raises(UnknownTargetError, match="need apache-tvm >= 0.20"):
        get_platform("tvm:tensorrt")


def test_a_backend_module_that_fails_to_import_is_every_ops_reason(monkeypatch) -> None:
    broken = dataclasses.replace(backends.BACKENDS["tensorrt"],
                                 module="tvm.relax.backend.contrib.no_such_backend")
    monkeypatch.setitem(backends.BACKENDS, "tensorrt", broken)
    result = _partition("mlp", "tensorrt")
    reasons = set(_reasons(result, "tensorrt").values())
    [reason] = reasons
    assert reason.startswith("tvm:tensorrt: importing tvm.relax.backend.contrib.no_such_backend "
                             "failed (ModuleNotFoundError: ") and "\n" not in reason
    assert {result.plan.device_of(n) for n in range(len(result.graph))} == {"cuda"}


def test_a_check_that_raises_is_its_ops_reason(monkeypatch) -> None:
    real = backends.load_patterns

    def boom(context):
        raise RuntimeError("boom\nsecond line")

    def patched(spec):
        patterns, problem = real(spec)
        return [relax.transform.FusionPattern(p.name, p.pattern, p.annotation_patterns, boom)
                if p.name == "tensorrt.nn.conv2d" else p for p in patterns], problem

    monkeypatch.setattr(target, "load_patterns", patched)
    result = _partition("convnet", "tensorrt")
    reasons = _reasons(result, "tensorrt")
    convs = [n for n in result.graph if n.op == "nn.conv2d"]
    assert len(convs) == 2
    for node in convs:
        name = node.name
        assert reasons[name].startswith("tvm:tensorrt: the check boom (test_byoc_target.py:")
        assert reasons[name].endswith("of pattern tensorrt.nn.conv2d raised RuntimeError: boom")
        assert result.plan.device_of(node.id) == "cuda"
    assert reasons["relu1"].startswith("pattern tensorrt.nn.relu takes it")


# ---------------------------------------------------------------------------- command line
def test_the_command_line_takes_a_tvm_target(tmp_path, capsys) -> None:
    path = tmp_path / "depthwise.onnx"
    onnx.save(models.depthwise(), path)
    code = main(["partition", str(path), "-t", "tvm:cudnn", "-o", str(tmp_path / "plan.json")])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "depthwise on tvm:cudnn (greedy)" in out and "on cudnn" in out
    code = main(["partition", str(path), "-t", "tvm:cudnnn"])
    out, err = capsys.readouterr()
    assert code == 2 and "did you mean 'cudnn'" in err and len(err.strip().splitlines()) == 1


def test_a_pattern_that_names_the_op_but_does_not_fit_is_shown() -> None:
    """NNAPI's conv2d pattern is a conv with its bias add; a conv read by a BatchNorm is not."""
    result = _partition("resblock", "nnapi")
    convs = [n for n in result.graph if n.op == "nn.conv2d"]
    reasons = _reasons(result, "nnapi")
    assert convs and all(
        reasons[c.name] == "no nnapi pattern matches this relax.nn.conv2d: 1 of its 31 patterns "
        "have relax.nn.conv2d (nnapi.conv2d is add(nn.conv2d(*, *), *)), and this call and its "
        "neighbours do not fit any of them" for c in convs)


# ---------------------------------------------------------------------------- options
def test_feature_level_is_partition_for_nnapis() -> None:
    from partition_lab.relax.byoc.oracle import offloaded_by_backend

    default = _partition("branches", "nnapi")
    low = _partition("branches", "nnapi", feature_level=1)
    assert len(low.target.tvm_patterns) < len(default.target.tvm_patterns)
    ours = {n for n in range(len(low.graph)) if low.plan.device_of(n) == "nnapi"}
    assert ours == offloaded_by_backend(low.ir, "nnapi", feature_level=1)
    assert ours < {n for n in range(len(default.graph)) if default.plan.device_of(n) == "nnapi"}
    assert "feature_level=1" in low.target.description


def test_bind_constants_is_partition_for_cublass() -> None:
    import tvm

    bound = _partition("mlp", "cublas", bind_constants=True)
    theirs = backends.partition_for(backends.backend("cublas"), bind_constants=True)(
        bound.prepared_mod)
    tvm.ir.assert_structural_equal(bound.mod, theirs)
    passed = _partition("mlp", "cublas")
    params = {str(gv.name_hint): len(f.params) for gv, f in bound.mod.functions_items()}
    assert params != {str(gv.name_hint): len(f.params) for gv, f in passed.mod.functions_items()}


def test_options_are_checked_in_one_line() -> None:
    from partition_lab.errors import TargetSpecError

    assert get_platform("tvm:cutlass", use_flash_mqa=False).device("cutlass").target.options \
        == {"use_flash_mqa": False}
    with pytest.raises(TargetSpecError, match=r"tvm:nnapi takes feature_level; got 'feature'"):
        get_platform("tvm:nnapi", feature=7)
    with pytest.raises(TargetSpecError, match="tvm:coreml takes no options"):
        get_platform("tvm:coreml", feature_level=7)
    with pytest.raises(TargetSpecError, match="option feature_level takes a int, not 'high'"):
        get_platform("tvm:nnapi", feature_level="high")


def test_targets_lists_the_pattern_table_and_options(capsys) -> None:
    assert main(["targets", "tvm:cublas"]) == 0
    out = capsys.readouterr().out
    assert "patterns, in table order" in out and "10:" in out
    assert "    cublas.matmul_bias_relu: nn.relu(add(matmul(*, *), *))" in out
    assert "option bind_constants=False (bool)" in out


def test_the_command_line_passes_a_backend_option(tmp_path, capsys) -> None:
    path = tmp_path / "branches.onnx"
    onnx.save(models.branches(), path)
    code = main(["partition", str(path), "-t", "tvm:nnapi", "--option", "feature_level=1",
                 "-o", str(tmp_path / "plan.json")])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "ops: 3 on nnapi, 4 on cpu" in out  # 5 on nnapi at the default level
    assert "no nnapi pattern has relax.mean (none of its 9 patterns)" in out


def test_a_platform_file_names_a_tvm_target(tmp_path) -> None:
    import tvm

    file = tmp_path / "cudnn_and_host.toml"
    file.write_text('name = "cudnn_and_host"\n\n[[devices]]\nname = "dnn"\nrole = "byoc"\n'
                    'memory = "gpu"\ntarget = "tvm:cudnn"\nprofile = "t4"\n\n[[devices]]\n'
                    'name = "cpu"\nrole = "host"\n')
    result = _partition("convnet", str(file))
    on = {n for n in range(len(result.graph)) if result.plan.device_of(n) == "dnn"}
    from partition_lab.relax.byoc.oracle import offloaded_by_backend

    assert on and on == offloaded_by_backend(result.ir, "cudnn")
    theirs = backends.partition_for(backends.backend("cudnn"))(result.prepared_mod)
    tvm.ir.assert_structural_equal(result.mod, theirs)  # the backend's form, on a device "dnn"
