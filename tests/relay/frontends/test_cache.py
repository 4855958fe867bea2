"""The converted-model cache. A second load of the same file skips the
conversion; any change of the file (or a file it reads), the shapes, the options or the
versions converts again; an entry that is cut short or garbled is rebuilt, never trusted."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
import tvm
from onnx import TensorProto, helper, numpy_helper

import partition_lab
from partition_lab import load_model
from partition_lab.cli import main
from partition_lab.relay import frontends
from partition_lab.relay.frontends import _cache


@pytest.fixture(autouse=True)
def cache_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh cache folder per test (the zoo's files are not needed here)."""
    root = tmp_path / "cache"
    monkeypatch.setenv("PARTITION_LAB_CACHE", str(root))
    return root


@pytest.fixture
def conversions(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The files converted (not taken from the cache), in order."""
    converted: list[Path] = []
    real = frontends._load_file

    def counting(path: Path, *args: object, **kwargs: object) -> object:
        converted.append(path)
        return real(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(frontends, "_load_file", counting)
    return converted


def conv_onnx(path: Path, seed: int = 0, batch: int | str = 1,
              external: bool = False) -> Path:
    """A Conv (``my_conv``) + Relu model; ``external`` keeps its weight in ``weights.bin``."""
    weight = numpy_helper.from_array(
        np.random.default_rng(seed).standard_normal((4, 3, 3, 3)).astype("float32"), "conv_w")
    graph = helper.make_graph(
        [helper.make_node("Conv", ["data", "conv_w"], ["c"], name="my_conv", pads=[1] * 4),
         helper.make_node("Relu", ["c"], ["out"], name="my_relu")],
        "conv_relu",
        [helper.make_tensor_value_info("data", TensorProto.FLOAT, [batch, 3, 8, 8])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)], [weight])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    if external:
        onnx.save(model, path, save_as_external_data=True, location="weights.bin",
                  size_threshold=0)
    else:
        onnx.save(model, path)
    return path


def entries(root: Path) -> list[Path]:
    return sorted((root / "converted").glob("*/*.tvm"))


def test_second_load_skips_the_conversion_and_gives_the_same_module(
        tmp_path: Path, cache_root: Path, conversions: list[Path]) -> None:
    path = conv_onnx(tmp_path / "m.onnx")
    first_mod, first_params = load_model(path, cache=True)
    second_mod, second_params = load_model(path, cache=True)
    assert conversions == [path]  # converted once
    assert tvm.ir.structural_equal(first_mod, second_mod, map_free_vars=True)
    assert first_params.keys() == second_params.keys()
    for name, array in first_params.items():
        np.testing.assert_array_equal(array.numpy(), second_params[name].numpy())
    assert frontends.source_name(second_mod["main"].body) == "my_relu"  # spans kept
    [entry] = entries(cache_root)
    assert [p.name for p in entry.parent.iterdir()] == [entry.name]  # no staging file left
    plan = partition_lab.partition(second_mod, "tensorcore", params=second_params).plan
    assert "my_conv" in {node.name for node in plan.graph}


def test_without_cache_nothing_is_written(tmp_path: Path, cache_root: Path,
                                          conversions: list[Path]) -> None:
    path = conv_onnx(tmp_path / "m.onnx")
    load_model(path)
    load_model(path)
    assert len(conversions) == 2 and not cache_root.exists()


def test_a_changed_file_converts_again(tmp_path: Path, cache_root: Path,
                                       conversions: list[Path]) -> None:
    path = conv_onnx(tmp_path / "m.onnx", seed=0)
    _, before = load_model(path, cache=True)
    conv_onnx(path, seed=1)  # same name, same size, other weights
    _, after = load_model(path, cache=True)
    assert len(conversions) == 2 and len(entries(cache_root)) == 2
    assert not np.array_equal(before["conv_w"].numpy(), after["conv_w"].numpy())


def test_changed_external_data_converts_again(tmp_path: Path, conversions: list[Path]) -> None:
    path = conv_onnx(tmp_path / "m.onnx", seed=0, external=True)
    load_model(path, cache=True)
    load_model(path, cache=True)
    assert len(conversions) == 1
    data = (tmp_path / "weights.bin").read_bytes()
    (tmp_path / "weights.bin").write_bytes(data[::-1])  # the .onnx file is unchanged
    _, params = load_model(path, cache=True)
    assert len(conversions) == 2
    assert params["conv_w"].numpy().tobytes() == data[::-1]


def test_shapes_and_options_are_part_of_the_key(tmp_path: Path,
                                                conversions: list[Path]) -> None:
    path = conv_onnx(tmp_path / "m.onnx", batch="N")
    one, _ = load_model(path, {"data": (1, 3, 8, 8)}, cache=True)
    two, _ = load_model(path, {"data": (2, 3, 8, 8)}, cache=True)
    assert len(conversions) == 2
    assert [int(d) for d in two["main"].params[0].checked_type.shape] == [2, 3, 8, 8]
    load_model(path, {"data": [1, 3, 8, 8]}, cache=True)  # the same shape, as a list: a hit
    assert len(conversions) == 2
    load_model(path, {"data": (1, 3, 8, 8)}, check_onnx=False, cache=True)
    assert len(conversions) == 3
    assert [int(d) for d in one["main"].params[0].checked_type.shape] == [1, 3, 8, 8]


@pytest.mark.parametrize("package", ["partition_lab", "tvm"])
def test_a_new_version_converts_again(package: str, tmp_path: Path, conversions: list[Path],
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    path = conv_onnx(tmp_path / "m.onnx")
    load_model(path, cache=True)
    if package == "partition_lab":
        monkeypatch.setattr(partition_lab._version, "__version__", "99.0.0")
    else:
        monkeypatch.setattr(tvm, "__version__", "0.99.dev0")
    load_model(path, cache=True)
    assert len(conversions) == 2


def _truncate(entry: Path) -> None:
    entry.write_bytes(entry.read_bytes()[: entry.stat().st_size // 2])


def _garble_weights(entry: Path) -> None:
    data = bytearray(entry.read_bytes())
    data[-20:-4] = bytes(16)  # inside the last weight: the lengths still add up
    entry.write_bytes(bytes(data))


def _garble_header(entry: Path) -> None:
    data = entry.read_bytes()
    entry.write_bytes(data[:40] + b"{not json" + data[49:])


def _empty(entry: Path) -> None:
    entry.write_bytes(b"")


@pytest.mark.parametrize("damage", [_truncate, _garble_weights, _garble_header, _empty])
def test_a_damaged_entry_is_rebuilt_not_trusted(damage, tmp_path: Path, cache_root: Path,
                                                conversions: list[Path]) -> None:
    path = conv_onnx(tmp_path / "m.onnx")
    _, want = load_model(path, cache=True)
    [entry] = entries(cache_root)
    damage(entry)
    _, got = load_model(path, cache=True)
    assert len(conversions) == 2  # converted again, not read from the damaged entry
    np.testing.assert_array_equal(got["conv_w"].numpy(), want["conv_w"].numpy())
    load_model(path, cache=True)  # the rebuilt entry is intact and used
    assert len(conversions) == 2
    stored = _cache.read_entry(entry, tmp_path)
    assert stored is not None, "the rebuilt entry does not read back"
    np.testing.assert_array_equal(stored[1]["conv_w"].numpy(), want["conv_w"].numpy())


def test_an_unwritable_cache_only_costs_time(tmp_path: Path, cache_root: Path,
                                             conversions: list[Path]) -> None:
    cache_root.mkdir()
    (cache_root / "converted").write_text("a file where the folder goes")
    path = conv_onnx(tmp_path / "m.onnx")
    load_model(path, cache=True)
    load_model(path, cache=True)
    assert len(conversions) == 2


def test_cli_times_the_stages_with_debug_and_reuses_the_conversion(
        tmp_path: Path, cache_root: Path, capsys: pytest.CaptureFixture[str],
        conversions: list[Path]) -> None:
    path = conv_onnx(tmp_path / "m.onnx")
    argv = ["viz", str(path), "-t", "tensorcore", "-o", str(tmp_path / "m.svg"), "--debug"]
    assert main(argv) == 0
    first = capsys.readouterr().err
    assert main(argv) == 0
    second = capsys.readouterr().err
    assert len(conversions) == 1
    for stage in ("load", "convert", "prepare", "partition", "render"):
        assert f" {stage} " in first.split("stages:")[1], first
    assert " convert " not in second.split("stages:")[1]  # taken from the cache
    assert main(argv[:-1] + ["--no-model-cache"]) == 0
    assert len(conversions) == 2
    assert "stages:" not in capsys.readouterr().err  # only with --debug


@pytest.mark.parametrize("swap", ["fifo", "link-out"])
def test_external_data_that_became_a_pipe_or_a_link_out_is_never_read_from_the_cache(
        swap: str, tmp_path: Path) -> None:
    """A cached conversion re-hashes the external data it read; a pipe there would block the
    hash forever and a link leading out of the folder would be read: either makes the entry
    stale, and the loader's own check says what is wrong in one line."""
    import os

    from partition_lab.errors import PartitionLabError

    folder = tmp_path / "model"
    folder.mkdir()
    path = conv_onnx(folder / "m.onnx", seed=0, external=True)
    load_model(path, cache=True)
    data = folder / "weights.bin"
    outside = tmp_path / "elsewhere.bin"
    outside.write_bytes(data.read_bytes())
    data.unlink()
    if swap == "fifo":
        os.mkfifo(data)
    else:
        data.symlink_to(outside)
    with pytest.raises(PartitionLabError, match="named pipe|outside the model's folder"):
        load_model(path, cache=True)


def opset99_onnx(tmp_path: Path) -> Path:
    """A valid model saved with opset 99, which onnx.checker rejects (converted anyway)."""
    model = onnx.load(conv_onnx(tmp_path / "ok.onnx"))
    model.opset_import[0].version = 99
    path = tmp_path / "opset99.onnx"
    onnx.save(model, path)
    return path


def test_what_the_conversion_warned_is_said_again_from_the_cache(tmp_path: Path,
                                                                 conversions: list[Path]) -> None:
    """An ONNX that onnx.checker rejects, converted anyway: the warning comes on the second
    load too, from the cache, without converting again."""
    path = opset99_onnx(tmp_path)
    for _ in range(2):
        with pytest.warns(UserWarning, match="opset 99"):
            load_model(path, cache=True, check_onnx=False)
    assert len(conversions) == 1


# ------------------------------------------------------------------ the prepared-module cache
def conv_bn_onnx(path: Path, variance: float = 9.8e7) -> Path:
    """Conv (``my_conv``) -> BatchNormalization (``my_bn``, one moving variance past float16's
    range: a numeric hazard on tensorcore) -> Relu."""
    rng = np.random.default_rng(0)
    var = np.ones(4, "float32")
    var[1] = variance
    inits = [numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype("float32"),
                                     "conv_w")]
    inits += [numpy_helper.from_array(v, n) for n, v in (
        ("bn_scale", np.ones(4, "float32")), ("bn_bias", np.zeros(4, "float32")),
        ("bn_mean", np.zeros(4, "float32")), ("bn_var", var))]
    graph = helper.make_graph(
        [helper.make_node("Conv", ["data", "conv_w"], ["c"], name="my_conv", pads=[1] * 4),
         helper.make_node("BatchNormalization", ["c", "bn_scale", "bn_bias", "bn_mean",
                                                 "bn_var"], ["b"], name="my_bn"),
         helper.make_node("Relu", ["b"], ["out"], name="my_relu")],
        "conv_bn_relu",
        [helper.make_tensor_value_info("data", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    return path


@pytest.fixture
def preparations(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, ...]]:
    """The preparations run (not taken from the cache): their steps, in order."""
    from partition_lab.relay import adapter

    run: list[tuple[str, ...]] = []
    real = adapter.prepare

    def counting(mod: tvm.IRModule, steps, *args: object) -> tvm.IRModule:
        run.append(tuple(steps))
        return real(mod, steps, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(adapter, "prepare", counting)
    return run


def partition_file(path: Path, target: str = "tensorcore",
                   **options: object) -> partition_lab.PartitionResult:
    mod, params = load_model(path, cache=True)
    return partition_lab.partition(mod, target, params=params, **options)


def prepared_entries(root: Path) -> list[Path]:
    return sorted((root / "prepared").glob("*/*.tvm"))


def test_a_second_partition_takes_the_prepared_module_from_the_cache(
        tmp_path: Path, cache_root: Path, preparations: list[tuple[str, ...]]) -> None:
    path = conv_bn_onnx(tmp_path / "m.onnx")
    first = partition_file(path)
    second = partition_file(path)
    assert len(preparations) == 1  # prepared once
    [entry] = prepared_entries(cache_root)
    assert [p.name for p in entry.parent.iterdir()] == [entry.name]  # no staging file left
    assert tvm.ir.structural_equal(first.prepared_mod, second.prepared_mod, map_free_vars=True)
    assert second.to_json() == first.to_json()  # the same plan, names and hazards included
    [hazard] = second.plan.hazards
    assert (hazard.name, hazard.op, hazard.dtype) == ("my_bn", "nn.batch_norm", "float16")
    # The constants are one copy each, as prepared: float16 weights, no float32 twin.
    constants = _constants(second.prepared_mod)
    assert sum(c.nbytes for c in constants) == \
        sum(c.nbytes for c in _constants(first.prepared_mod))
    assert {str(c.dtype) for c in constants if c.size > 4} == {"float16"}


def _constants(mod: tvm.IRModule) -> list[np.ndarray]:
    found: dict[int, np.ndarray] = {}

    def visit(expr: object) -> None:
        if isinstance(expr, tvm.relay.Constant):
            found[expr.handle.value] = expr.data.numpy()

    tvm.relay.analysis.post_order_visit(mod["main"], visit)
    return list(found.values())


def test_a_6000_op_chain_is_stored_without_python_recursion(tmp_path: Path) -> None:
    """Lifting the constants visits the module without Python recursion: a recursive
    ExprMutator ends in RecursionError on a chain of 5,000 ops or more when it stores the
    prepared module."""
    from tvm import relay

    x = relay.var("x", shape=(1, 4), dtype="float32")
    one = relay.const(np.ones((1, 4), "float32"))  # one object, used twice: lifted once
    expr = relay.add(x, one)
    for _ in range(6_000):
        expr = relay.nn.relu(expr)
    body = relay.Tuple([relay.add(expr, one), relay.nn.relu(x)])  # a branch with no constant
    mod = relay.transform.InferType()(tvm.IRModule.from_expr(body))
    entry = tmp_path / "entry.tvm"
    _cache.write_prepared(entry, mod, [])
    back, hazards = _cache._read(entry, _cache._decode_prepared)
    assert hazards == [] and tvm.ir.structural_equal(back, mod, map_free_vars=True)
    main_fn, arrays = _cache._lift_constants(mod)
    assert list(arrays) == [main_fn.params[-1].name_hint] and len(main_fn.params) == 2


def test_platform_and_options_are_part_of_the_prepared_key(
        tmp_path: Path, cache_root: Path, preparations: list[tuple[str, ...]]) -> None:
    path = conv_bn_onnx(tmp_path / "m.onnx")
    for _ in range(2):
        for target, options in (("tensorcore", {}), ("neuron", {}),
                                ("tensorcore", {"keep_fp32_on_overflow": True})):
            result = partition_file(path, target, **options)
            assert [h.kept_fp32 for h in result.plan.hazards] == \
                ([True] if options else [False] if target == "tensorcore" else [])
    assert len(preparations) == 3 and len(prepared_entries(cache_root)) == 3


def test_a_rewritten_module_or_other_weights_are_prepared_again(
        tmp_path: Path, cache_root: Path, preparations: list[tuple[str, ...]]) -> None:
    path = conv_bn_onnx(tmp_path / "m.onnx")
    mod, params = load_model(path, cache=True)
    partition_lab.partition(mod, "tensorcore", params=params)
    rewritten = tvm.relay.transform.SimplifyExpr()(mod)  # a pass: a new main
    partition_lab.partition(rewritten, "tensorcore", params=params)
    other = {**params, "conv_w": tvm.nd.array(params["conv_w"].numpy() * 2)}
    result = partition_lab.partition(mod, "tensorcore", params=other)
    assert len(preparations) == 3 and len(prepared_entries(cache_root)) == 1
    want = np.sort(other["conv_w"].numpy().astype("float16"), axis=None)
    assert any(c.size == want.size and np.array_equal(np.sort(c, axis=None), want)
               for c in _constants(result.prepared_mod))  # the other weights, in NHWC
    partition_lab.partition(mod, "tensorcore")  # the weights left unbound: no entry either
    assert len(preparations) == 4


@pytest.mark.parametrize("damage", [_truncate, _garble_weights, _garble_header, _empty])
def test_a_damaged_prepared_entry_is_rebuilt_not_trusted(
        damage, tmp_path: Path, cache_root: Path,
        preparations: list[tuple[str, ...]]) -> None:
    path = conv_bn_onnx(tmp_path / "m.onnx")
    want = partition_file(path)
    [entry] = prepared_entries(cache_root)
    damage(entry)
    got = partition_file(path)
    assert len(preparations) == 2  # prepared again, not read from the damaged entry
    assert got.to_json() == want.to_json()
    partition_file(path)
    assert len(preparations) == 2  # the rebuilt entry is intact and used


# ------------------------------------------- the command line: the converted module left unread
@pytest.fixture
def module_reads(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The converted entries whose module and weights were decoded (read back whole)."""
    read: list[Path] = []
    real = _cache._decode

    def counting(data: bytes, folder: Path, *args: object, **kwargs: object) -> object:
        read.append(folder)
        return real(data, folder, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(_cache, "_decode", counting)
    return read


def partition_cli(path: Path, out: Path, target: str = "tensorcore") -> str:
    assert main(["partition", str(path), "-t", target, "-o", str(out)]) == 0
    return out.read_text()


def test_a_prepared_hit_on_the_command_line_never_reads_the_converted_module(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, conversions: list[Path],
        preparations: list[tuple[str, ...]], module_reads: list[Path]) -> None:
    path = conv_bn_onnx(tmp_path / "m.onnx")
    first = partition_cli(path, tmp_path / "first.json")
    assert (len(conversions), len(preparations), module_reads) == (1, 1, [])

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the converted module was read")

    with monkeypatch.context() as patch:  # (a failed read would convert again: counted)
        patch.setattr(_cache, "_decode", refuse)
        second = partition_cli(path, tmp_path / "second.json")
    assert second == first  # the same plan JSON, hazards and names included
    assert (len(conversions), len(preparations)) == (1, 1)


def test_a_prepared_miss_on_the_command_line_reads_the_converted_module(
        tmp_path: Path, conversions: list[Path], preparations: list[tuple[str, ...]],
        module_reads: list[Path]) -> None:
    path = conv_bn_onnx(tmp_path / "m.onnx")
    partition_cli(path, tmp_path / "tc.json")
    got = partition_cli(path, tmp_path / "neuron.json", "neuron")  # another target: a miss
    assert (len(conversions), len(preparations), len(module_reads)) == (1, 2, 1)
    assert got == partition_cli(path, tmp_path / "again.json", "neuron")
    assert (len(conversions), len(preparations), len(module_reads)) == (1, 2, 1)
    mod, params = load_model(path, cache=True)  # the API: the module itself, as before
    assert isinstance(mod, tvm.IRModule) and set(params) >= {"conv_w"}
    fresh, fresh_params = load_model(path)  # not through the cache
    assert partition_lab.partition(mod, "neuron", params=params).to_json() == \
        partition_lab.partition(fresh, "neuron", params=fresh_params).to_json()


@pytest.mark.parametrize("damage", [_garble_weights, _truncate, _garble_header, _empty])
def test_a_damaged_converted_entry_behind_a_prepared_miss_is_rebuilt(
        damage, tmp_path: Path, cache_root: Path, conversions: list[Path],
        preparations: list[tuple[str, ...]]) -> None:
    path = conv_bn_onnx(tmp_path / "m.onnx")
    want = partition_cli(path, tmp_path / "want.json", "neuron")
    for entry in prepared_entries(cache_root):
        entry.unlink()
    [entry] = entries(cache_root)
    damage(entry)
    assert partition_cli(path, tmp_path / "got.json", "neuron") == want
    assert len(conversions) == 2  # converted again, not read from the damaged entry
    stored = _cache.read_entry(entry, tmp_path)  # rebuilt: it reads back, with the weights
    assert stored is not None, "the rebuilt entry does not read back"
    conv_w = next(i for i in onnx.load(str(path)).graph.initializer if i.name == "conv_w")
    np.testing.assert_array_equal(stored[1]["conv_w"].numpy(), numpy_helper.to_array(conv_w))
    assert partition_cli(path, tmp_path / "again.json", "neuron") == want
    assert (len(conversions), len(preparations)) == (2, 2)


def test_changed_external_data_is_not_hidden_by_a_prepared_entry(
        tmp_path: Path, conversions: list[Path]) -> None:
    path = conv_onnx(tmp_path / "m.onnx", seed=0, external=True)
    partition_cli(path, tmp_path / "a.json")
    other = conv_onnx(tmp_path / "other.onnx", seed=1, external=True)  # rewrites weights.bin
    assert other.parent == path.parent
    partition_cli(path, tmp_path / "b.json")
    assert len(conversions) == 2  # m converted again: its weights changed


def test_the_conversion_warning_is_said_again_on_a_prepared_hit(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], conversions: list[Path]) -> None:
    path = opset99_onnx(tmp_path)
    for _ in range(2):
        with pytest.warns(UserWarning, match="opset 99"):
            assert main(["partition", str(path), "-t", "tensorcore", "--no-onnx-check"]) == 0
    assert len(conversions) == 1


def test_a_tv_model_on_the_command_line_is_partitioned_without_reading_its_module(
        tmp_path: Path, module_reads: list[Path], preparations: list[tuple[str, ...]]) -> None:
    """``partition-lab partition tv:NAME`` twice: the zoo's ONNX file, the second time from
    the prepared entry alone, the same plan JSON (the zoo's label its name)."""
    argv = ["partition", "tv:mobilenet_v2:small", "-t", "tensorcore", "-o"]
    assert main([*argv, str(tmp_path / "first.json")]) == 0
    assert main([*argv, str(tmp_path / "second.json")]) == 0
    assert (module_reads, len(preparations)) == ([], 1)
    first = (tmp_path / "first.json").read_text()
    assert (tmp_path / "second.json").read_text() == first and "mobilenet_v2" in first


# ----------------------------------------------------- a warm run returns what a cold computes
def scalar_onnx(path: Path) -> Path:
    """``data * 0.5 + 1`` (``my_mul``, ``my_add``): two 0-d constants (ONNX float initializers
    this small are frozen into the module; so is a Constant node)."""
    scale = numpy_helper.from_array(np.array(0.5, "float32"), "scale")
    one = helper.make_node("Constant", [], ["one"], name="my_one",
                           value=numpy_helper.from_array(np.array(1.0, "float32")))
    graph = helper.make_graph(
        [one, helper.make_node("Mul", ["data", "scale"], ["m"], name="my_mul"),
         helper.make_node("Add", ["m", "one"], ["out"], name="my_add")],
        "scalars", [helper.make_tensor_value_info("data", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)], [scale])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    return path


def scalar_weight_module() -> tuple[tvm.IRModule, dict[str, tvm.nd.NDArray]]:
    """``data * scale``, ``scale`` a 0-d weight (a .pt2's scalar buffer is one; an ONNX file's
    small initializers are frozen into the module instead)."""
    data = tvm.relay.var("data", shape=(1, 4))
    scale = tvm.relay.var("scale", shape=(), dtype="float32")
    mod = tvm.IRModule.from_expr(tvm.relay.Function(  # typed whole, as a frontend's module is
        [data, scale], data * scale, tvm.relay.TensorType((1, 4), "float32")))
    return tvm.relay.transform.InferType()(mod), {"scale": tvm.nd.array(np.array(0.5, "f4"))}


def load_scalar_weight(path: Path, converted: list[Path]) -> tuple[tvm.IRModule, dict]:
    """:func:`scalar_weight_module` through the converted cache, keyed by ``path``'s content."""

    def convert() -> tuple[tvm.IRModule, dict[str, tvm.nd.NDArray]]:
        converted.append(path)
        return scalar_weight_module()

    return _cache.cached_load(path, "relay", None, {}, convert)  # type: ignore[return-value]


def _relay_text(path: Path) -> str:
    return path.with_suffix(".relay").read_text()


def test_a_0d_weight_comes_back_0d(tmp_path: Path) -> None:
    """np.ascontiguousarray makes a 0-d array 1-d: a 0-d weight read back as shape [1]."""
    path = tmp_path / "key.relay"
    path.write_text("any content: the entry's key")
    converted: list[Path] = []
    cold_mod, cold = load_scalar_weight(path, converted)
    warm_mod, warm = load_scalar_weight(path, converted)
    assert converted == [path]  # the second from the entry
    assert cold["scale"].shape == warm["scale"].shape == ()
    assert tvm.ir.structural_equal(warm_mod, cold_mod, map_free_vars=True)


def test_0d_constants_come_back_0d_and_named(
        tmp_path: Path, preparations: list[tuple[str, ...]]) -> None:
    """The prepared entry lifts constants out as raw bytes: otherwise a warm run's scalar
    constants would be [1], priced otherwise than the cold run's [] (hf:bert_base's 24 of 191
    nodes), and would lose their spans (the Relay text written beside the plan would differ)."""
    path = scalar_onnx(tmp_path / "m.onnx")
    cold = partition_cli(path, tmp_path / "cold.json", "neuron")
    warm = partition_cli(path, tmp_path / "warm.json", "neuron")  # the prepared entry
    fresh = main(["partition", str(path), "-t", "neuron", "--no-model-cache",
                  "-o", str(tmp_path / "fresh.json")])
    assert len(preparations) == 2  # the cold one and --no-model-cache's
    assert fresh == 0 and warm == cold == (tmp_path / "fresh.json").read_text()
    assert [w["shape"] for n in json.loads(warm)["nodes"] for w in n["weights"]] == [[], []]
    assert _relay_text(tmp_path / "warm.json") == _relay_text(tmp_path / "cold.json") == \
        _relay_text(tmp_path / "fresh.json")
    assert "span=my_one" in _relay_text(tmp_path / "warm.json")


def _old_raw(array: tvm.nd.NDArray) -> np.ndarray:
    return np.ascontiguousarray(array.numpy())  # the bug to catch: 0-d stored as [1]


def test_an_entry_that_would_change_the_plan_fails_the_tests(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With PARTITION_LAB_VERIFY_CACHE=1 (the suite's), an entry that does not read back as it
    was computed raises as it is written: a cache bug is a test failure, not a silent rebuild."""
    monkeypatch.setattr(_cache, "_raw", _old_raw)
    path = scalar_onnx(tmp_path / "m.onnx")
    with pytest.raises(_cache.CacheMismatchError, match="takes \\[\\] float32"):
        partition_file(path, "neuron")  # the prepared entry
    with pytest.raises(_cache.CacheMismatchError, match="holds scale as \\[1\\] float32"):
        load_scalar_weight(path, [])  # the converted entry


def test_a_user_is_warned_of_such_an_entry_and_gets_the_cold_result(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without PARTITION_LAB_VERIFY_CACHE, such an entry is refused when read, with a warning,
    and the model converted or prepared again: the plan is the cold run's."""
    monkeypatch.delenv(_cache.VERIFY_ENV)
    path = scalar_onnx(tmp_path / "m.onnx")
    mod, params = load_model(path)  # no cache
    want = partition_lab.partition(mod, "neuron", params=params).to_json()
    monkeypatch.setattr(_cache, "_raw", _old_raw)
    assert partition_file(path, "neuron").to_json() == want  # computed (a bad entry written)
    with pytest.warns(_cache.CacheMismatchWarning, match="please report this bug"):
        assert partition_file(path, "neuron").to_json() == want  # read, refused, computed
    converted: list[Path] = []
    load_scalar_weight(path, converted)
    with pytest.warns(_cache.CacheMismatchWarning, match="holds scale as \\[1\\]"):
        _, params = load_scalar_weight(path, converted)
    assert converted == [path, path] and params["scale"].shape == ()
