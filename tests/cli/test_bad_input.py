"""Hostile input: every case is a bad input or fault made here (no shipped binaries), run
through the CLI in-process, and must end with exit status 2, exactly one stderr line that says
what is wrong in the user's terms, and the working directory exactly as it was (no file
created, changed or left behind; the inputs included).

The classes: outputs that would replace an input or cannot be written (data
loss); invalid ONNX and model files (silent misloads); target files with mistakes or unsafe
message templates; drawings too large to lay out (unbounded work); plans from files that do
not fit their graph or their rules; messages in the CLI's terms (bad shapes, options). Most
cases fail before any TVM conversion. SIGINT runs in subprocesses at the end.
"""

from __future__ import annotations

import configparser
import gzip
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from partition_lab.cli import main
from repo_paths import REPO_ROOT

Builder = Callable[[Path], tuple[list[str], str]]
CASES: dict[str, Builder] = {}


def case(name: str) -> Callable[[Builder], Builder]:
    """Register a case: a function that makes its inputs in a directory and returns the
    arguments and a part of the one expected error line."""
    def register(builder: Builder) -> Builder:
        assert name not in CASES, name
        CASES[name] = builder
        return builder
    return register


# ---------------------------------------------------------------------------------- inputs
def onnx_model(ops: list[str] | None = None, *, opset: int | None = 13,
               shape: list[int | str] | None = None) -> onnx.ModelProto:
    """conv (8 channels) followed by unary ops, on a 1x3x8x8 input."""
    rng = np.random.default_rng(0)
    weight = numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype("float32"), "w")
    nodes = [helper.make_node("Conv", ["data", "w"], ["t0"], name="conv0", pads=[1, 1, 1, 1])]
    for i, op in enumerate(ops or ["Relu"]):
        nodes.append(helper.make_node(op, [f"t{i}"], [f"t{i + 1}"], name=f"{op.lower()}{i}"))
    last = nodes[-1].output[0]
    graph = helper.make_graph(
        nodes, "hostile",
        [helper.make_tensor_value_info("data", TensorProto.FLOAT, shape or [1, 3, 8, 8])],
        [helper.make_tensor_value_info(last, TensorProto.FLOAT, None)], initializer=[weight])
    opsets = [] if opset is None else [helper.make_opsetid("", opset)]
    model = helper.make_model(graph, opset_imports=opsets)
    if opset is None:
        del model.opset_import[:]
    return model


def save(model: onnx.ModelProto, path: Path) -> Path:
    path.write_bytes(model.SerializeToString())
    return path


def tiny_onnx(d: Path, name: str = "net.onnx") -> Path:
    return save(onnx_model(), d / name)


RELAY_TEXT = """#[version = "0.0.5"]
def @main(%data: Tensor[(1, 8), float32]) {
  %0 = nn.relu(%data);
  sign(%0)
}
"""


def target(d: Path, text: str, name: str = "npu.toml") -> str:
    (d / name).write_text(text)
    return str(d / name)


NPU = 'name = "npu"\ndefault_profile = "t4"\nsupported = ["nn.conv2d", "nn.relu"]\n'


def rule_target(d: Path, rule: str) -> str:
    return target(d, NPU + "[[rules]]\n" + rule)


# ------------------------------------------------------------------ 1, 2, 8: outputs
@case("relay-sibling-is-the-input")
def _(d: Path):
    (d / "net.relay").write_text(RELAY_TEXT)
    return ["partition", d / "net.relay", "-o", d / "net.json"], "it is the input"


@case("plan-is-the-model")
def _(d: Path):
    (d / "net-symbol.json").write_text("{}")
    return ["partition", d / "net-symbol.json", "-o", d / "net-symbol.json"], "it is the input"


@case("plan-is-the-target-file")
def _(d: Path):
    npu = target(d, json.dumps({"name": "npu", "default_profile": "t4",
                                "supported": ["nn.conv2d", "nn.relu"]}), "npu.json")
    return ["partition", tiny_onnx(d), "-t", npu, "-o", npu], "it is the input"


@case("plan-links-to-the-model")
def _(d: Path):
    (d / "plan.json").symlink_to(tiny_onnx(d))
    return ["partition", d / "net.onnx", "-o", d / "plan.json"], "it is the input"


@case("relay-sibling-links-to-the-model")
def _(d: Path):
    (d / "plan.relay").symlink_to(tiny_onnx(d))
    return ["partition", d / "net.onnx", "-o", d / "plan.json"], "it is the input"


@case("params-beside-symbol-are-an-input")
def _(d: Path):
    (d / "m-symbol.json").write_text("{}")
    (d / "m-0000.params").write_bytes(b"\0" * 8)
    (d / "plan.relay").symlink_to(d / "m-0000.params")
    return ["partition", d / "m-symbol.json", "-o", d / "plan.json"], "it is the input"


@case("plan-is-a-directory")
def _(d: Path):
    (d / "plan.json").mkdir()
    return ["partition", tiny_onnx(d), "-o", d / "plan.json"], "it is a directory"


@case("relay-sibling-is-a-directory")
def _(d: Path):
    (d / "plan.relay").mkdir()
    return ["partition", tiny_onnx(d), "-o", d / "plan.json"], "it is a directory"


@case("plan-directory-missing")
def _(d: Path):
    return ["partition", tiny_onnx(d), "-o", d / "nowhere" / "plan.json"], "does not exist"


@case("drawing-is-a-directory")
def _(d: Path):
    (d / "net.svg").mkdir()
    return ["viz", tiny_onnx(d), "-o", d / "net.svg"], "it is a directory"


@case("drawing-directory-missing")
def _(d: Path):
    return ["viz", tiny_onnx(d), "-o", d / "no" / "net.svg"], "does not exist"


@case("drawing-unknown-suffix")
def _(d: Path):
    return ["viz", tiny_onnx(d), "-o", d / "net.jpg"], "unknown suffix '.jpg'"


@case("plan-unknown-suffix")
def _(d: Path):
    return ["partition", tiny_onnx(d), "-o", d / "plan.yaml"], "unknown suffix '.yaml'"


@case("drawing-is-the-target-file")
def _(d: Path):
    npu = target(d, NPU)
    (d / "net.svg").symlink_to(npu)  # a drawing that links to the target file
    return ["viz", tiny_onnx(d), "-t", npu, "-o", d / "net.svg"], "it is the input"


# ------------------------------------------------------------------ 3: model files
@case("onnx-cut-before-opset-import")
def _(d: Path):
    whole = onnx_model(["Squeeze"])
    cut = onnx.ModelProto()
    cut.CopyFrom(whole)
    del cut.opset_import[:]
    data = whole.SerializeToString()
    prefix = cut.SerializeToString()
    assert data.startswith(prefix) and len(data) > len(prefix)  # opset_import is written last
    (d / "net.onnx").write_bytes(prefix)
    return ["partition", d / "net.onnx"], "opset_import"


@case("onnx-without-opset")
def _(d: Path):
    return ["partition", save(onnx_model(opset=None), d / "net.onnx")], "opset_import"


@case("onnx-opset-99")
def _(d: Path):
    return ["partition", save(onnx_model(opset=99), d / "net.onnx")], "opset 99 is not one"


@case("onnx-opset-0")
def _(d: Path):
    return ["partition", save(onnx_model(opset=0), d / "net.onnx")], "not a valid ONNX model"


@case("onnx-two-nodes-one-output")
def _(d: Path):
    model = onnx_model(["Relu", "Neg"])
    model.graph.node[2].output[0] = "t1"
    return ["partition", save(model, d / "net.onnx")], "single static assignment"


@case("onnx-unknown-op")
def _(d: Path):
    return ["partition", save(onnx_model(["NoSuchOp"]), d / "net.onnx")], "NoSuchOp"


@case("onnx-dangling-input")
def _(d: Path):
    model = onnx_model(["Relu"])
    model.graph.node[1].input[0] = "nowhere"
    return ["partition", save(model, d / "net.onnx")], "nowhere"


@case("onnx-random-bytes")
def _(d: Path):
    (d / "net.onnx").write_bytes(bytes(range(256)) * 4)
    return ["partition", d / "net.onnx"], "not a readable ONNX model"


@case("onnx-empty-file")
def _(d: Path):
    (d / "net.onnx").write_bytes(b"")
    return ["partition", d / "net.onnx"], "holds no ONNX graph"


@case("onnx-is-a-directory")
def _(d: Path):
    (d / "net.onnx").mkdir()
    return ["partition", d / "net.onnx"], "is not a file"


@case("model-missing")
def _(d: Path):
    return ["partition", d / "absent.onnx"], "does not exist"


@case("model-path-empty")
def _(d: Path):
    return ["partition", ""], "the model file path is empty"


@case("model-unknown-suffix")
def _(d: Path):
    (d / "net.pb").write_bytes(b"x")
    return ["partition", d / "net.pb"], "cannot tell what kind of model"


@case("onnx-dynamic-dim-without-shape")
def _(d: Path):
    model = onnx_model(shape=["N", 3, 8, 8])
    return ["partition", save(model, d / "net.onnx")], "--input-shape data=1,3,224,224"


@case("input-shape-unknown-name")
def _(d: Path):
    return (["partition", tiny_onnx(d), "--input-shape", "image=1,3,8,8"],
            "--input-shape names ['image']")


@case("input-shape-wrong-rank")
def _(d: Path):
    return (["partition", tiny_onnx(d), "--input-shape", "data=1,3"],
            "--input-shape data = (1, 3) has rank 2")


@case("input-shape-absurd")
def _(d: Path):
    return (["partition", tiny_onnx(d), "--input-shape", "data=100000,3,160000,160000"],
            "more than the limit of 2**32")


@case("input-shape-declared-absurd")
def _(d: Path):
    model = onnx_model(shape=[1000000, 3, 100000, 8])
    return ["partition", save(model, d / "net.onnx")], "more than the limit of 2**32"


@case("input-shape-does-not-fit-the-weights")
def _(d: Path):
    return (["partition", tiny_onnx(d), "--input-shape", "data=1,5,8,8"],
            "TVM cannot convert 'net.onnx': dimension 1 conflicts: 5 does not match 3; check "
            "--input-shape")


@case("onnx-reshape-to-a-wrong-size")
def _(d: Path):
    shape = numpy_helper.from_array(np.array([7, -1, 5], "int64"), "s")
    model = onnx_model(["Relu"])
    model.graph.initializer.append(shape)
    model.graph.node.append(helper.make_node("Reshape", ["t1", "s"], ["r"], name="reshape0"))
    model.graph.output[0].name = "r"
    return ["partition", save(model, d / "net.onnx")], "TVM cannot convert 'net.onnx'"


@case("input-shape-malformed")
def _(d: Path):
    return ["partition", tiny_onnx(d), "--input-shape", "data=1,3,x"], "bad --input-shape"


@case("input-shape-negative")
def _(d: Path):
    return ["partition", tiny_onnx(d), "--input-shape", "data=1,-3,8,8"], "bad --input-shape"


@case("relay-text-garbage")
def _(d: Path):
    (d / "net.relay").write_text("def @main( this is not relay")
    return ["partition", d / "net.relay"], "is not valid Relay text"


@case("relay-text-binary")
def _(d: Path):
    (d / "net.relay").write_bytes(b"\xff\xfe\x00garbage")
    return ["partition", d / "net.relay"], "is not text"


@case("relay-text-without-main")
def _(d: Path):
    (d / "net.relay").write_text(RELAY_TEXT.replace("@main", "@other"))
    return ["partition", d / "net.relay"], "defines no @main"


@case("relay-text-input-shape-unknown")
def _(d: Path):
    (d / "net.relay").write_text(RELAY_TEXT)
    return (["partition", d / "net.relay", "--input-shape", "x=1,8"],
            "--input-shape names ['x']")


@case("relay-text-data-dependent-shape")
def _(d: Path):
    (d / "net.relay").write_text(RELAY_TEXT.replace("sign(%0)", "argwhere(%0)"))
    return ["partition", d / "net.relay"], "the output of argwhere has a dynamic shape (?, 2)"


@case("mxnet-without-params")
def _(d: Path):
    symbol = {"nodes": [{"op": "null", "name": "data", "inputs": []},
                        {"op": "relu", "name": "relu0", "inputs": [[0, 0, 0]]}],
              "arg_nodes": [0], "heads": [[1, 0, 0]]}
    (d / "m-symbol.json").write_text(json.dumps(symbol))
    return (["partition", d / "m-symbol.json", "--input-shape", "data=1,8"],
            "put it beside the symbol file as m-0000.params")


@case("mxnet-symbol-not-json")
def _(d: Path):
    (d / "m-symbol.json").write_text("{not json")
    (d / "m-0000.params").write_bytes(b"")
    return ["partition", d / "m-symbol.json", "--input-shape", "data=1,8"], "m-symbol.json"


# ------------------------------------------------------------------ 4, 7: target files
BAD_TEMPLATES = {
    "huge-width": ('{op:>900000000}', "only an alignment and a width up to 80"),
    "attribute-walk": ('{op.__class__.__mro__}', "{'op.__class__.__mro__'} in the message"),
    "index": ('{op[0]}', "in the message"),
    "conversion": ('{op!r}', "with the format '!r:'"),
    "unknown-field": ('{weights}', "{'weights'} in the message"),
    "positional": ('{0}', "{'0'} in the message"),
    "unbalanced": ('{op', "bad message template"),
    "nested-width": ('{op:>{value}}', "only an alignment and a width"),
    "fill-and-width": ('{op:*^81}', "width up to 80"),
    "too-long": ('x' * 600, "keep it under 500"),
}
for _name, (_template, _needle) in BAD_TEMPLATES.items():
    def _builder(d: Path, template: str = _template, needle: str = _needle):
        rule = (f'kind = "attr_in"\nops = ["nn.conv2d"]\nattr = "groups"\nvalues = [1]\n'
                f"message = {json.dumps(template)}\n")
        return ["partition", tiny_onnx(d), "-t", rule_target(d, rule)], needle
    case(f"target-message-{_name}")(_builder)


@case("target-dtype-message-attr-field")
def _(d: Path):
    rule = 'kind = "dtype_in"\ndtypes = ["float16"]\nmessage = "{attr}"\n'
    return ["partition", tiny_onnx(d), "-t", rule_target(d, rule)], "{'attr'} in the message"


@case("target-nested-any-of-message")
def _(d: Path):
    rule = ('kind = "any_of"\n[[rules.rules]]\nkind = "attr_in"\nattr = "groups"\n'
            'values = [1]\nmessage = "{op.__dict__}"\n')
    return ["partition", tiny_onnx(d), "-t", rule_target(d, rule)], "rules[0].rules[0].message"


@case("target-misspelled-supported-op")
def _(d: Path):
    npu = target(d, 'name = "npu"\ndefault_profile = "t4"\nsupported = ["nn.conv2dd"]\n')
    return ["partition", tiny_onnx(d), "-t", npu], "did you mean 'nn.conv2d'?"


@case("target-misspelled-unsupported-op")
def _(d: Path):
    npu = target(d, 'name = "npu"\nbase = "neuron"\nunsupported = {"nn.relux" = "no"}\n')
    return ["partition", tiny_onnx(d), "-t", npu], "did you mean 'nn.relu'?"


@case("target-misspelled-anchor")
def _(d: Path):
    npu = target(d, NPU + 'anchors = ["nn.conv2D"]\n')
    return ["partition", tiny_onnx(d), "-t", npu], "'nn.conv2D' is not a Relay op"


@case("target-onnx-op-name")
def _(d: Path):
    npu = target(d, 'name = "npu"\ndefault_profile = "t4"\nsupported = ["Conv"]\n')
    return ["partition", tiny_onnx(d), "-t", npu], "'Conv' is not a Relay op"


@case("target-misspelled-rule-op")
def _(d: Path):
    rule = 'kind = "max_size"\nops = ["nn.dens"]\ndims = ["batch"]\nmax = 8\n'
    return ["partition", tiny_onnx(d), "-t", rule_target(d, rule)], "did you mean 'nn.dense'?"


@case("target-misspelled-nested-rule-op")
def _(d: Path):
    rule = ('kind = "any_of"\n[[rules.rules]]\nkind = "max_size"\nops = ["nn.conv2dx"]\n'
            'dims = ["batch"]\nmax = 8\n')
    return ["partition", tiny_onnx(d), "-t", rule_target(d, rule)], "rules[0].rules[0].ops"


@case("target-misspelled-attribute")
def _(d: Path):
    rule = 'kind = "attr_in"\nops = ["nn.conv2d"]\nattr = "group"\nvalues = [1]\n'
    return ["partition", tiny_onnx(d), "-t", rule_target(d, rule)], "did you mean 'groups'?"


@case("target-attribute-of-an-op-without-attributes")
def _(d: Path):
    rule = 'kind = "attr_in"\nops = ["nn.relu"]\nattr = "axis"\nvalues = [1]\n'
    return (["partition", tiny_onnx(d), "-t", rule_target(d, rule)],
            "nn.relu has no attribute 'axis'")


@case("target-attribute-no-op-has")
def _(d: Path):
    rule = 'kind = "attr_in"\nattr = "no_such_attribute"\nvalues = [1]\n'
    return ["partition", tiny_onnx(d), "-t", rule_target(d, rule)], "no attribute 'no_such_attribute'"


for _reserved in ("cpu", "CPU", "host", "llvm"):
    def _reserved_builder(d: Path, name: str = _reserved):
        npu = target(d, f'name = "{name}"\nsupported = ["nn.conv2d"]\n')
        return ["partition", tiny_onnx(d), "-t", npu], "is the host's name"
    case(f"target-reserved-name-{_reserved}")(_reserved_builder)


@case("target-without-profile")
def _(d: Path):
    npu = target(d, 'name = "npu"\nsupported = ["nn.conv2d", "nn.relu"]\n')
    return ["partition", tiny_onnx(d), "-t", npu], "pass --profile with one of"


@case("target-misspelled-key")
def _(d: Path):
    npu = target(d, 'name = "npu"\nsuported = ["nn.conv2d"]\n')
    return ["partition", tiny_onnx(d), "-t", npu], "unknown key 'suported'"


@case("target-toml-syntax")
def _(d: Path):
    return ["partition", tiny_onnx(d), "-t", target(d, 'name = "npu\n')], "not valid TOML"


@case("target-json-syntax")
def _(d: Path):
    return (["partition", tiny_onnx(d), "-t", target(d, '{"name": ', "npu.json")],
            "not valid JSON")


@case("target-binary")
def _(d: Path):
    (d / "npu.toml").write_bytes(b"\xff\xfe\x00\x01")
    return ["partition", tiny_onnx(d), "-t", d / "npu.toml"], "cannot read the target file"


@case("target-file-missing")
def _(d: Path):
    return ["partition", tiny_onnx(d), "-t", d / "absent.toml"], "no such target file"


@case("target-unknown-rule-kind")
def _(d: Path):
    return (["partition", tiny_onnx(d), "-t", rule_target(d, 'kind = "maybe"\n')],
            "'maybe' is not a rule kind")


@case("target-supported-wrong-type")
def _(d: Path):
    npu = target(d, 'name = "npu"\nsupported = 5\n')
    return ["partition", tiny_onnx(d), "-t", npu], "expected a list of op names"


@case("target-runs-no-op")
def _(d: Path):
    return ["partition", tiny_onnx(d), "-t", target(d, 'name = "npu"\n')], "supported is empty"


@case("target-base-is-a-file")
def _(d: Path):
    npu = target(d, 'name = "npu"\nbase = "other.toml"\n')
    return ["partition", tiny_onnx(d), "-t", npu], "must name a built-in or registered target"


@case("target-unknown-base")
def _(d: Path):
    npu = target(d, 'name = "npu"\nbase = "no_such_base"\n')
    return ["partition", tiny_onnx(d), "-t", npu], "no_such_base"


@case("target-name-missing")
def _(d: Path):
    npu = target(d, 'supported = ["nn.conv2d"]\n')
    return ["partition", tiny_onnx(d), "-t", npu], "name is missing"


@case("target-bad-dimension")
def _(d: Path):
    rule = 'kind = "multiple_of"\nops = ["nn.conv2d"]\ndims = ["depth"]\nmultiples = [8]\n'
    return ["partition", tiny_onnx(d), "-t", rule_target(d, rule)], "'depth' is not a dimension"


# ------------------------------------------------------------------ usage, in the CLI's terms
@case("unknown-target")
def _(d: Path):
    return ["partition", tiny_onnx(d), "-t", "no_such_target"], "no_such_target"


@case("unknown-strategy")
def _(d: Path):
    return ["partition", tiny_onnx(d), "-s", "no_such_strategy"], "no_such_strategy"


@case("bad-option")
def _(d: Path):
    return ["partition", tiny_onnx(d), "--option", "novalue"], "bad --option 'novalue'"


@case("unknown-flag")
def _(d: Path):
    return ["partition", tiny_onnx(d), "--no-such-flag"], "--no-such-flag"


@case("unknown-zoo-model")
def _(d: Path):
    return ["partition", "zoo:no_such_model"], "no_such_model"


@case("bad-zoo-name")
def _(d: Path):
    return ["partition", "zoo:resnet50_v1:tiny"], "expected zoo:NAME, tv:NAME or hf:NAME, optionally followed by :small"


@case("input-shape-on-zoo")
def _(d: Path):
    return (["partition", "zoo:resnet50_v1:small", "--input-shape", "data=1,3,8,8"],
            "resnet50_v1:small has fixed input shapes (data=1,3,64,64): it is built with MXNet")


@case("unknown-hardware-profile")
def _(d: Path):
    return ["partition", tiny_onnx(d), "--profile", "no_such_profile"], "no_such_profile"


@case("compare-unknown-strategy")
def _(d: Path):
    return ["compare", tiny_onnx(d), "--strategies", "greedy,nope"], "nope"


@case("compare-strategies-empty")
def _(d: Path):
    return ["compare", tiny_onnx(d), "--strategies", ""], "bad --strategies '': expected"


@case("compare-strategies-trailing-comma")
def _(d: Path):
    return ["compare", tiny_onnx(d), "--strategies", "greedy,"], "bad --strategies 'greedy,'"


@case("profile-strategies-empty")
def _(d: Path):
    return (["profile", tiny_onnx(d), "--platform", "neuron", "--strategies", " ",
             "--cache", d / "cache.json"], "bad --strategies ' ': expected")


@case("profile-cache-is-the-bundle")
def _(d: Path):
    with gzip.open(d / "net.json.gz", "wt") as handle:
        handle.write("{}")
    return ["profile", d / "net.json.gz", "--cache", d / "net.json.gz"], "it is the input"


@case("exclude-node-matches-nothing")
def _(d: Path):
    return (["partition", tiny_onnx(d), "--exclude-node", "no_such_node", "-o", d / "p.json"],
            "--exclude-node: no node named 'no_such_node'")


@case("exclude-op-matches-nothing")
def _(d: Path):
    return (["partition", tiny_onnx(d), "--exclude-op", "nn.softmax", "-o", d / "p.json"],
            "--exclude-op: 'nn.softmax' not in net; its ops are nn.conv2d, nn.relu")


# ------------------------------------------------------------------ 4: drawings too large
def alternating_onnx(d: Path, pairs: int) -> Path:
    """conv, then ``pairs`` x (Relu, Sign): each Relu is a region of its own on 'npu'."""
    return save(onnx_model(["Relu", "Sign"] * pairs), d / "alt.onnx")


@case("drawing-over-the-render-budget")
def _(d: Path):
    npu = target(d, NPU)
    return (["viz", alternating_onnx(d, 70), "-t", npu, "-o", d / "alt.svg"],
            "the plan has 70 accelerator regions")


@case("drawing-over-the-render-budget-expanded")
def _(d: Path):
    npu = target(d, NPU)
    return (["viz", alternating_onnx(d, 70), "-t", npu, "--expand", "-o", d / "alt.png"],
            "(-o " + str(d / "alt.dot") + ")")


# ------------------------------------------------------------------ 6: plans from files
@pytest.fixture(scope="module")
def bundle_data(tmp_path_factory) -> dict:
    """A bundle of the tiny model's greedy plan on neuron, as decoded JSON."""
    from partition_lab import load_model, partition
    from partition_lab.executors.graph_io import Bundle, bindings_from_relay, write_bundle

    folder = tmp_path_factory.mktemp("bundle")
    model = save(onnx_model(["Relu", "Sign", "Relu"]), folder / "net.onnx")  # Sign: on the CPU
    mod, params = load_model(model)
    result = partition(mod, "neuron", params=params)
    bundle = Bundle(result.graph, bindings_from_relay(result.relay), {"greedy": result.plan},
                    {"model": "net"}, result.plan.platform)
    path = write_bundle(folder / "net.json.gz", bundle)
    with gzip.open(path, "rt") as handle:
        return json.load(handle)


def tampered(edit: Callable[[dict], object]) -> Callable[..., object]:
    def builder(d: Path, data: dict):
        data = json.loads(json.dumps(data))
        edit(data)
        with gzip.open(d / "net.json.gz", "wt") as handle:
            json.dump(data, handle)
        return ["profile", d / "net.json.gz", "--cache", d / "cache.json"]
    return builder


def _plan(data: dict) -> dict:
    return data["plans"]["greedy"]


def _move_sign_to_neuron(data: dict) -> None:
    """Move the op neuron rejects onto neuron, with its stored verdict flipped to match."""
    plan = _plan(data)
    node = next(n for n in plan["nodes"] if not n["support"]["neuron"]["supported"])
    node["support"]["neuron"]["supported"] = True
    node["device"] = plan["regions"][node["region"]]["device"] = "neuron"


PLAN_CASES: dict[str, tuple[Callable[[dict], object], str]] = {
    "plan-regions-reordered": (lambda d: _plan(d)["regions"].reverse(), "is at position 0"),
    "plan-node-on-unknown-device": (
        lambda d: _plan(d)["nodes"][0].update(device="dsp"), "'dsp' is not a device"),
    "plan-node-op-changed": (
        lambda d: _plan(d)["nodes"][0].update(op="nn.dense"), "the plan is for another graph"),
    "plan-node-missing-key": (lambda d: _plan(d)["nodes"][0].pop("region"), "region is missing"),
    "plan-node-region-out-of-range": (
        lambda d: _plan(d)["nodes"][0].update(region=99), "region 99 does not exist"),
    "plan-region-node-out-of-range": (
        lambda d: _plan(d)["regions"][0].update(nodes=[0, 1000]), "must be node ids"),
    "plan-wrong-schema": (lambda d: _plan(d).update(schema="partition_lab.plan/9"),
                          "plan schema 'partition_lab.plan/9'"),
    "plan-nodes-not-a-list": (lambda d: _plan(d).update(nodes={}), "nodes must be a list"),
    "plan-choice-measured-inf": (lambda d: _plan(d).update(choice={"chosen": "greedy", "candidates": [
        {"plan": "greedy", "measured_s": [float("inf")]}]}), "finite non-negative seconds; drop the choice or choose again"),
    "plan-verdict-extra-key": (
        lambda d: _plan(d)["nodes"][0]["support"]["neuron"].update(evil=1), "got keys"),
    "plan-supported-flipped": (_move_sign_to_neuron, None),  # checked below
    "bundle-graph-missing": (lambda d: d.pop("graph"), "is malformed (KeyError: key 'graph')"),
    "bundle-node-count": (lambda d: d["bindings"].pop(), "bindings for"),
}
BUNDLE_FLAG_CASES = {  # flags for a model given with a bundle (here left as it was exported)
    "bundle-with-option": (["--option", "precision=fp32"], "--option applies to a model"),
    "bundle-with-input-shape": (["--input-shape", "data=1,3,8,8"],
                                "--input-shape applies to a model, not a bundle"),
}


# ---------------------------------------------------------------------------------- the suite
def snapshot(root: Path) -> dict[str, tuple]:
    """Every entry under ``root``: kind, bytes (or link target) and mode."""
    state = {}
    for path in sorted(root.rglob("*")):
        info = path.lstat()
        if path.is_symlink():
            content: object = os.readlink(path)
        elif path.is_file():
            content = path.read_bytes()
        else:
            content = "dir"
        state[str(path.relative_to(root))] = (content, info.st_mode, info.st_mtime_ns)
    return state


def assert_clean_failure(argv: list, needle: str, root: Path, capsys) -> str:
    before = snapshot(root)
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert code == 2, (code, err)
    assert len(lines) == 1, err
    assert lines[0].startswith("partition-lab: error: ") and "Traceback" not in err
    assert needle in lines[0], lines[0]
    assert snapshot(root) == before, "a file was created, changed or removed"
    return lines[0]


def test_the_suite_has_at_least_80_cases():
    assert len(CASES) + len(PLAN_CASES) + len(BUNDLE_FLAG_CASES) >= 80


@pytest.mark.parametrize("name", sorted(CASES))
def test_hostile_cli_input(name, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # a default output name would land here, and be seen
    argv, needle = CASES[name](tmp_path)
    assert_clean_failure(argv, needle, tmp_path, capsys)


@pytest.mark.parametrize("name", sorted(PLAN_CASES))
def test_hostile_plan_file(name, bundle_data, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    edit, needle = PLAN_CASES[name]
    argv = tampered(edit)(tmp_path, bundle_data)
    line = assert_clean_failure(argv, needle or "", tmp_path, capsys)
    if name == "plan-supported-flipped":
        assert "the plan says neuron supports node" in line and "rejects it" in line


@pytest.mark.parametrize("name", sorted(BUNDLE_FLAG_CASES))
def test_hostile_bundle_flags(name, bundle_data, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    flags, needle = BUNDLE_FLAG_CASES[name]
    argv = tampered(lambda data: None)(tmp_path, bundle_data) + flags
    assert_clean_failure(argv, needle, tmp_path, capsys)


# ---------------------------------------------------------------------------------- 5: SIGINT
def _chain_relay(path: Path, n: int) -> Path:
    lines = ['#[version = "0.0.5"]', "def @main(%x: Tensor[(1, 4), float32]) {"]
    lines += [f"  %{i} = nn.relu({'%x' if i == 0 else f'%{i - 1}'});" for i in range(n)]
    path.write_text("\n".join([*lines, f"  %{n - 1}", "}", ""]))
    return path


def _interrupt_while_loading(tmp_path: Path, *, ignore_sigint: bool) -> tuple[int, str]:
    """Run partition on a long chain with an old plan in place, Ctrl-C it while it loads."""
    model = _chain_relay(tmp_path / "chain.relay", 6000)
    (tmp_path / "plan.json").write_text("old plan\n")
    (tmp_path / "plan.relay").write_text("old relay\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.Popen(
        [sys.executable, "-m", "partition_lab.cli", "partition", str(model), "--progress",
         "-o", str(tmp_path / "plan.json")], env=env, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
        # what a shell does to a background job: SIGINT ignored from the start
        preexec_fn=(lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if ignore_sigint else None)
    assert proc.stderr is not None
    first = proc.stderr.readline()  # "loading ..." once the command is under way
    assert "loading" in first, first
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    return proc.returncode, err


@pytest.mark.parametrize("ignore_sigint", [False, True], ids=["plain", "started-ignoring"])
def test_sigint_stops_with_130_and_keeps_the_old_output(tmp_path, ignore_sigint):
    code, err = _interrupt_while_loading(tmp_path, ignore_sigint=ignore_sigint)
    # 130, or killed by SIGINT (which a shell also reports as 130)
    assert code in (130, -signal.SIGINT), (code, err)
    assert "Traceback" not in err and err.strip().splitlines()[-1] == "partition-lab: interrupted"
    assert (tmp_path / "plan.json").read_text() == "old plan\n"
    assert (tmp_path / "plan.relay").read_text() == "old relay\n"
    leftovers = sorted(p.name for p in tmp_path.iterdir())
    assert leftovers == ["chain.relay", "plan.json", "plan.relay"]


def test_an_interrupt_a_library_swallowed_still_stops_the_command(tmp_path, monkeypatch,
                                                                   capsys):
    """A KeyboardInterrupt caught inside a library (TVM turns it into its own error) must not
    let the command go on to replace its output."""
    from partition_lab.cli import commands

    real = commands.run_partition_job

    def swallowing(job, args):
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(1)  # the handler runs here
        except KeyboardInterrupt:
            pass  # what an `except BaseException` in a library does
        return real(job, args)

    monkeypatch.setattr(commands, "run_partition_job", swallowing)
    model = tiny_onnx(tmp_path)
    (tmp_path / "plan.json").write_text("old\n")
    code = main(["partition", str(model), "-o", str(tmp_path / "plan.json")])
    assert code == 130
    assert capsys.readouterr().err.strip() == "partition-lab: interrupted"
    assert (tmp_path / "plan.json").read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["net.onnx", "plan.json"]


def console_script() -> str:
    """What pip writes as the ``partition-lab`` script for setup.cfg's entry point."""
    config = configparser.ConfigParser()
    config.read(REPO_ROOT / "setup.cfg")
    scripts = dict(line.split("=", 1) for line in
                   config["options.entry_points"]["console_scripts"].strip().splitlines())
    module, func = scripts["partition-lab "].strip().split(":")
    return f"import sys\nfrom {module} import {func}\nsys.exit({func}())\n"


STALLED_IMPORT = """\
import sys, time

class Stall:
    # Holds the import of {module!r} until SIGINT comes, as a slow import would. Short sleeps
    # in a loop, not one long one: a signal that arrives after the mark but before the sleep
    # has begun runs its handler only when the sleep returns (Python checks for signals
    # between bytecodes, and a C call's sleep starts without a check), so one time.sleep(60)
    # would hold the interrupt back for a minute now and then.
    def find_spec(self, name, path=None, target=None):
        if name == {module!r}:
            sys.meta_path.remove(self)
            open({mark!r}, "w").close()
            try:
                for _ in range(6000):
                    time.sleep(0.01)
            except KeyboardInterrupt:
                if not {swallow!r}:
                    raise
        return None

sys.meta_path.insert(0, Stall())
"""


@pytest.mark.parametrize("module, swallow", [
    ("partition_lab", False), ("networkx", False), ("networkx", True)],
    ids=["package", "dependency", "dependency-swallows-it"])
def test_sigint_while_the_package_imports_exits_130_without_a_traceback(tmp_path, module,
                                                                        swallow):
    """Ctrl-C before the CLI's main() runs: the console script itself must catch it, and
    must not run the command when an import swallowed the interrupt."""
    mark = tmp_path / "importing"
    code = STALLED_IMPORT.format(module=module, mark=str(mark), swallow=swallow)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.Popen([sys.executable, "-c", code + console_script(), "zoo"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not mark.exists():  # the import of `module` has begun and waits
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.01)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert (proc.returncode, out, err) == (130, "", "partition-lab: interrupted\n")


# ---------------------------------------------------------------------------------- messages
@pytest.mark.parametrize("cli, hint", [(False, "input_shapes={'data': (1, 8)}"),
                                       (True, "--input-shape data=1,8")],
                         ids=["python", "command-line"])
def test_a_dynamic_input_is_named_with_a_static_example(cli, hint):
    """The API takes Relay modules with a dynamic input, which the CLI's loaders refuse
    earlier: the hint is in the reader's terms, with an example of the input's rank."""
    from contextlib import nullcontext

    import tvm

    from partition_lab import graph_from_relay
    from partition_lab._audience import command_line
    from partition_lab.errors import InputShapeError

    mod = tvm.relay.fromtext(RELAY_TEXT.replace("(1, 8)", "(?, 8)"))
    with command_line() if cli else nullcontext(), pytest.raises(InputShapeError) as error:
        graph_from_relay(mod)
    assert str(error.value) == ("input 'data' has a dynamic shape (?, 8); give it a static one "
                                f"when loading the model, e.g. {hint}")


# ---------------------------------------------------------------------------------- successes
def test_no_onnx_check_converts_an_invalid_model_anyway(tmp_path, capsys):
    model = save(onnx_model(opset=99), tmp_path / "net.onnx")
    with pytest.warns(UserWarning, match="opset 99"):
        code = main(["partition", str(model), "--no-onnx-check"])
    assert code == 0, capsys.readouterr().err


def test_a_long_relay_text_chain_loads(tmp_path, capsys):
    """3,000 calls nest deeper than Python's recursion limit (1,000)."""
    model = _chain_relay(tmp_path / "chain.relay", 3000)
    assert main(["partition", str(model)]) == 0
    assert "3000 on neuron" in capsys.readouterr().out


def test_a_drawing_over_the_budget_can_be_written_as_dot(tmp_path, capsys):
    npu = target(tmp_path, NPU)
    code = main(["viz", str(alternating_onnx(tmp_path, 70)), "-t", npu,
                 "-o", str(tmp_path / "alt.dot")])
    assert code == 0, capsys.readouterr().err
    assert (tmp_path / "alt.dot").read_text().count("subgraph cluster_") == 70


def test_partition_writes_both_files_with_usual_permissions(tmp_path, capsys):
    model = tiny_onnx(tmp_path)
    assert main(["partition", str(model), "-o", str(tmp_path / "plan.json")]) == 0
    for name in ("plan.json", "plan.relay"):
        mode = (tmp_path / name).stat().st_mode & 0o777
        assert mode == 0o666 & ~_umask(), oct(mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["net.onnx", "plan.json", "plan.relay"]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@pytest.fixture(autouse=True)
def _no_stray_files_in_the_repo():
    """No case may write into the repository (where a relative default output would go)."""
    root = REPO_ROOT
    # What the test run itself creates there, from other workers too: the zoo cache (conftest),
    # pytest's and hypothesis' caches. A fresh clone has none of them when the suite starts.
    infrastructure = {".cache", ".pytest_cache", ".hypothesis", "__pycache__"}
    before = {p.name for p in root.iterdir()} - infrastructure
    yield
    assert {p.name for p in root.iterdir()} - infrastructure == before


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_a_read_only_output_directory_fails_before_the_model_loads(tmp_path, capsys):
    model = tiny_onnx(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    out.chmod(0o555)
    try:
        assert_clean_failure(["partition", model, "-o", out / "plan.json"], "is not writable",
                             tmp_path, capsys)
    finally:
        out.chmod(0o755)
