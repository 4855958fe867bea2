"""Text in a drawing is complete in every format: reasons wrap and are never cut, since a PNG or a
PDF has no tooltip to hold the rest; the legend does not send the reader to one."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest

from partition_lab import render, synthetic
from partition_lab.cost_models import get_cost_model
from partition_lab.cost_models.base import evaluate
from partition_lab.relay.passes.annotate import support_table
from partition_lab.render.view import HEADER_WIDTH, REASON_WIDTH
from partition_lab.strategies import get_strategy
from partition_lab.targets import get_platform

SVG = "{http://www.w3.org/2000/svg}"
NUMBER = re.compile(r"\d+(?:\.\d+)? (?:ms|us|s)\b")


@pytest.fixture(scope="module")
def cost_plan():
    """SimplePose-like on neuron@2020 with the cost strategy: BN+ReLU regions moved to the CPU
    with long reasons full of numbers ("... vs 0.303 ms on CPU")."""
    graph = synthetic.simple_pose_like()
    platform = get_platform("neuron@2020")
    model = get_cost_model(platform)
    plan = get_strategy("cost").run(graph, support_table(graph, platform), cost_model=model)
    moved = [d for d in plan.decisions if d.code == "region-excluded"]
    assert moved, "the fixture needs ops the cost strategy moved"
    return plan, evaluate(plan, model)


def visible_lines(svg: ET.Element) -> list[str]:
    """Every drawn text line (tooltips are attributes, not text)."""
    return [t.text.replace("\xa0", " ").strip() for t in svg.iter(f"{SVG}text") if t.text]


@pytest.mark.parametrize("collapse", [False, True])
def test_reasons_are_wrapped_never_cut(cost_plan, collapse: bool) -> None:
    plan, cost = cost_plan
    source = render.draw(plan, cost, collapse=collapse).source
    lines = visible_lines(ET.fromstring(render.render_source(source, "svg")))
    assert not [line for line in lines if line.endswith(("...", "\u2026"))]
    page = " ".join(" ".join(lines).split())
    for decision in plan.decisions:
        if decision.code != "region-excluded":
            continue
        # Every number of the reason is on the page: nothing was cut off at the end.
        for number in NUMBER.findall(decision.reason):
            assert number in page, (number, decision.reason)
        assert "vs " + NUMBER.findall(decision.reason)[-1] + " on CPU" in page
    # ... and wrapped: no drawn line is longer than the header's width.
    assert max(len(line) for line in lines) <= max(HEADER_WIDTH, REASON_WIDTH + 8)


def test_the_png_legend_points_to_no_tooltip(cost_plan, tmp_path) -> None:
    plan, cost = cost_plan
    source = render.draw(plan, cost).source
    lines = visible_lines(ET.fromstring(render.render_source(source, "svg")))
    assert not [line for line in lines if "tooltip" in line.lower()]
    path = render.write(plan, tmp_path / "plan.png", cost)
    assert path.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


def test_long_node_names_wrap_instead_of_being_cut() -> None:
    from partition_lab.core.graph import OpNode
    from partition_lab.render.view import _op_lines

    name = "resnetv1b_layer4_bottleneck2_batchnorm_cudnn_off_fwd_output_0"
    op = OpNode(0, "nn.batch_norm", name, name, (), ())
    lines = _op_lines(op)
    assert lines[0] == "nn.batch_norm" and "".join(lines[1:]) == name
    assert all(len(line) <= 40 for line in lines)
    assert lines[1] == "resnetv1b_layer4_bottleneck2_batchnorm_"  # at a boundary, not mid-word


@pytest.mark.parametrize("name, lines", [
    ("encoder.layer.11.attention.self_attention#24",
     ["encoder.layer.11.attention.self_", "attention#24"]),
    ("backbone.layer1/add", ["backbone.layer1/add"]),
    ("x" * 50, ["x" * 40, "x" * 10]),  # one part longer than a line: cut, still whole joined
])
def test_names_wrap_at_dots_slashes_and_underscores(name: str, lines: list[str]) -> None:
    from partition_lab.render.view import _chunks

    assert _chunks(name, 40) == lines
