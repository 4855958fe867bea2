"""Messages in the reader's terms: CLI option spellings or Python names."""


from __future__ import annotations

import pytest

from partition_lab import zoo
from partition_lab.synthetic import chain

EXCLUSIONS = [  # (excl_node_names, exclude_ops) -> Python wording, command-line wording
    (["relu_9"], [], "^excl_node_names: no node named 'relu_9'",
     "^--exclude-node: no node named 'relu_9'"),
    ([], ["nn.relux"], r"^exclude_ops: 'nn.relux' \(did you mean nn.relu\?\) not in chain",
     r"^--exclude-op: 'nn.relux' \(did you mean nn.relu\?\) not in chain"),
]


@pytest.mark.parametrize("names, ops, python, command_line", EXCLUSIONS,
                         ids=["node", "op"])
def test_an_exclusion_error_names_the_option_as_its_reader_wrote_it(names, ops, python,
                                                                    command_line):
    from partition_lab._audience import command_line as for_the_command_line
    from partition_lab.errors import ExclusionError
    from partition_lab.relay.passes.annotate import support_table
    from partition_lab.targets import get_platform

    graph, platform = chain(["nn.conv2d", "nn.relu"]), get_platform("neuron")
    with pytest.raises(ExclusionError, match=python):
        support_table(graph, platform, names, ops)
    with for_the_command_line(), pytest.raises(ExclusionError, match=command_line):
        support_table(graph, platform, names, ops)


@pytest.mark.parametrize("cli, hint", [(False, "use frontend='mxnet'"),
                                       (True, "use --frontend mxnet")])
def test_a_zoo_model_without_a_frontend_names_the_other_in_the_readers_terms(
        monkeypatch, cli, hint):
    import dataclasses
    from contextlib import nullcontext

    from partition_lab._audience import command_line
    from partition_lab.errors import UnsupportedOperatorError

    real = zoo.entry("resnet50_v1")
    mxnet_only = dataclasses.replace(real, frontends=("mxnet",), frontend_note="no ONNX export")
    monkeypatch.setattr(zoo, "entry", lambda name: mxnet_only)
    with command_line() if cli else nullcontext(), \
            pytest.raises(UnsupportedOperatorError, match=f"{hint}$"):
        zoo.load("resnet50_v1", frontend="onnx")


def test_excluding_a_module_name_excludes_each_of_its_calls():
    # The PyTorch frontend names a module's later calls layer1.0.relu#2, #3 (ONNX wants unique
    # node names); the module's own name excludes every call, a suffixed name that call alone.
    from partition_lab.core.graph import OpGraphBuilder, TensorType
    from partition_lab.errors import ExclusionError
    from partition_lab.relay.passes.annotate import support_verdicts
    from partition_lab.targets import get_target

    b = OpGraphBuilder("calls")
    t = TensorType((1, 8, 4, 4), "float32")
    x = b.input("x", t)
    for source in ("layer1.0.conv1", "layer1.0.relu", "layer1.0.conv2", "layer1.0.relu#2",
                   "layer1.0.relu#3", "layer1.1.relu"):
        op = "nn.conv2d" if "conv" in source else "nn.relu"
        x = b.op(op, [x], outputs=[t], source_name=source)
    graph = b.build([x])
    target = get_target("neuron")

    def excluded(names):
        return [n.source_name for n, v in zip(graph, support_verdicts(graph, target, names),
                                              strict=True) if v.rule == "excluded-by-name"]

    assert excluded(["layer1.0.relu"]) == ["layer1.0.relu", "layer1.0.relu#2", "layer1.0.relu#3"]
    assert excluded(["layer1.0.relu#2"]) == ["layer1.0.relu#2"]
    assert excluded(["layer1.1.relu"]) == ["layer1.1.relu"]
    with pytest.raises(ExclusionError, match="no node named 'layer1.0.relu#9'"):
        excluded(["layer1.0.relu#9"])
