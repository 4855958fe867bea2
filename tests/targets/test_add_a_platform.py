"""Adding a built-in platform is one module plus one registry line: the README's module, as written.

The module is taken from the README's "Adding a target" section, written to a temporary folder,
imported, and given its one line in ``targets.registry.BUILTIN``; then it is found by name and
partitions a graph like any built-in.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

from partition_lab import synthetic
from partition_lab.core.support import Support
from partition_lab.cost_models import evaluate, get_cost_model
from partition_lab.errors import TargetSpecError, UnknownTargetError
from partition_lab.strategies import get_strategy
from partition_lab.targets import available_targets, get_platform, get_target, registry
from repo_paths import REPO_ROOT

README = REPO_ROOT / "README.md"


def readme_module_source() -> str:
    section = README.read_text(encoding="utf-8").split("### Adding a target", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, "the README's 'Adding a target' section has no Python block"
    return match.group(1)


@pytest.fixture
def my_npu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    path = tmp_path / "my_npu.py"
    path.write_text(readme_module_source(), encoding="utf-8")
    spec = importlib.util.spec_from_file_location("my_npu", path)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "my_npu", module)
    spec.loader.exec_module(module)
    monkeypatch.setitem(registry.BUILTIN, "my_npu", module)  # the one registry line
    return module


def test_the_new_module_is_found_by_name(my_npu: ModuleType) -> None:
    assert "my_npu" in available_targets()
    platform = get_platform("my_npu")
    assert platform.names == ["my_npu", "cpu"]
    npu = platform.device("my_npu")
    assert (npu.compiler, npu.memory, npu.colour, npu.profile) == \
        ("my_npu", "npu", "#e8a33d", "inferentia1")
    assert get_target("my_npu").anchors == {"nn.conv2d"}
    with pytest.raises(TargetSpecError, match="takes no options"):
        get_platform("my_npu", precision="fp16")


def test_the_new_platform_partitions_and_is_priced(my_npu: ModuleType) -> None:
    platform = get_platform("my_npu")
    graph = synthetic.chain(["nn.conv2d", "nn.batch_norm", "nn.relu", "tanh", "nn.conv2d",
                             "nn.relu"])
    npu = platform.device("my_npu")
    support = Support.with_host(platform, {"my_npu": npu.target.check_graph(graph)})
    plan = get_strategy("greedy").run(graph, support)
    plan.validate()
    assert [plan.device_of(n) for n in range(len(graph))] == \
        ["my_npu", "my_npu", "my_npu", "cpu", "my_npu", "my_npu"]
    assert "tanh is not in my_npu's operator list" in plan.decisions[3].reason
    cost = evaluate(plan, get_cost_model(platform))  # the module's default profile prices it
    # input in, out to the tanh on the host, back, output out: four copies over the host link
    assert cost.total > 0 and [(c.src, c.dst) for c in cost.cuts] == \
        [("cpu", "my_npu"), ("my_npu", "cpu"), ("cpu", "my_npu"), ("my_npu", "cpu")]


def test_without_its_registry_line_the_name_is_unknown() -> None:
    assert "my_npu" not in available_targets()
    with pytest.raises(UnknownTargetError, match="unknown target 'my_npu'"):
        get_platform("my_npu")
