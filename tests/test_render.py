"""The graphviz drawing of a plan: clusters, labelled cuts, reasons, collapse, determinism, files.

Synthetic graphs (OpGraphBuilder) keep these tests independent of TVM; ``test_cli.py`` draws a
real zoo model end to end.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from partition_lab import (
    OpGraphBuilder,
    PartitionLabError,
    PartitionPlan,
    TensorType,
    Verdict,
    render,
)
from partition_lab.cost_models.base import evaluate

SVG = "{http://www.w3.org/2000/svg}"
XLINK_TITLE = "{http://www.w3.org/1999/xlink}title"
DECONV_REASON = ("nn.conv2d_transpose: Deconvolution is not in neuron@2020's MXNet operator "
                 "list (added in neuron-cc 1.0.24045)")


class ToyCost:
    """Deterministic costs that differ per op kind, so times in labels are distinguishable."""

    name = "toy"

    def op_time(self, node, kind):
        return (1e-4 if kind == "cpu" else 1e-5) * (1 + node.id % 3)

    def transfer_time(self, nbytes, src, dst):
        return 5e-5 + nbytes / 1e9

    def region_overhead(self, kind):
        return 2e-4 if kind == "accel" else 0.0


def pose_like(target: str = "neuron@2020", blocks: int = 2, *, name: str = "pose_like"):
    """conv blocks, two unsupported deconvolutions (each followed by BN+ReLU), two outputs.

    The first deconvolution's output feeds two consumers on the accelerator (one copy, one
    label), and the last tensor is both consumed on the CPU and a graph output.
    """
    b = OpGraphBuilder(name)
    feat = TensorType((1, 64, 56, 56), "float32")
    x = b.input("data", TensorType((1, 3, 224, 224), "float32"))
    h = b.op("nn.conv2d", [x], outputs=[feat], source_name="conv0_fwd")
    for i in range(blocks):
        c = b.op("nn.conv2d", [h], source_name=f"stage{i}_conv0_fwd")
        r = b.op("nn.relu", [b.op("nn.batch_norm", [c], source_name=f"stage{i}_bn0_fwd")],
                 source_name=f"stage{i}_relu0_fwd")
        h = b.op("add", [r, h], source_name=f"stage{i}_add")
    for i in range(2):
        d = b.op("nn.conv2d_transpose", [h], source_name=f"deconv{i}_fwd")
        n = b.op("nn.batch_norm", [d], source_name=f"deconv_bn{i}_fwd")
        h = b.op("add", [b.op("nn.relu", [n], source_name=f"deconv_relu{i}_fwd"), d],
                 source_name=f"deconv_add{i}")
    tail = b.op("image.resize2d", [h], source_name='resize "0" <x>\\y')
    graph = b.build(outputs=[b.op("nn.conv2d", [tail], source_name="final_conv"), h])
    verdicts = [verdict_for(node.op) for node in graph]
    on_accel = [node.id for node in graph if verdicts[node.id].supported]
    plan = PartitionPlan.from_assignment(graph, target, "greedy", on_accel, verdicts)
    plan.validate()
    return plan, evaluate(plan, ToyCost())


def verdict_for(op: str) -> Verdict:
    if op == "nn.conv2d_transpose":
        return Verdict(False, DECONV_REASON, "op-table")
    if op == "image.resize2d":
        return Verdict(False, "image.resize2d: not in the op table", "op-table")
    return Verdict(True, "in the op table", "op-table")


def chain(n_blocks: int) -> PartitionPlan:
    """A chain of conv/relu/add blocks with a CPU op every tenth block: ~3 ops per block."""
    b = OpGraphBuilder("chain")
    h = b.op("nn.conv2d", [b.input("data", TensorType((1, 8, 8, 8), "float32"))])
    for i in range(n_blocks):
        c = b.op("nn.relu", [b.op("nn.conv2d", [h])])
        if i % 10 == 9:
            c = b.op("image.resize2d", [c])
        h = b.op("add", [c, h])
    graph = b.build()
    verdicts = [verdict_for(node.op) for node in graph]
    return PartitionPlan.from_assignment(
        graph, "neuron", "greedy", [n.id for n in graph if verdicts[n.id].supported], verdicts)


def svg_of(plan, cost, **kwargs) -> ET.Element:
    source = render.draw(plan, cost, **kwargs).source
    return ET.fromstring(render.render_source(source, "svg"))


def groups(svg: ET.Element, cls: str) -> list[ET.Element]:
    return [g for g in svg.iter(f"{SVG}g") if g.get("class") == cls]


def title(group: ET.Element) -> str:
    return group.find(f"{SVG}title").text


def texts(group: ET.Element) -> list[str]:
    return [t.text or "" for t in group.iter(f"{SVG}text")]


def tooltips(group: ET.Element) -> list[str]:
    return [a.get(XLINK_TITLE) for a in group.iter(f"{SVG}a") if a.get(XLINK_TITLE)]


# ---------------------------------------------------------------------------------- expanded
def test_expanded_svg_has_one_cluster_per_accelerator_region():
    plan, cost = pose_like()
    svg = svg_of(plan, cost, collapse=False)
    clusters = sorted(title(g) for g in groups(svg, "cluster"))
    assert clusters == sorted(f"cluster_{r.label}" for r in plan.accelerator_regions)
    assert len(clusters) == 4  # the blocks, two BN+ReLU+add after the deconvs, final conv


def test_every_cut_is_labelled_once_with_shape_bytes_and_time():
    plan, cost = pose_like()
    svg = svg_of(plan, cost, collapse=False)
    labelled = [texts(g) for g in groups(svg, "edge") if texts(g)]
    assert len(labelled) == len(cost.cuts)
    expected = sorted([str(TensorType(c.shape, c.dtype)),
                       f"{render.format_bytes(c.nbytes)}, {render.format_time(c.time)}"]
                      for c in cost.cuts)
    assert sorted(labelled) == expected


def test_a_tensor_used_twice_on_the_accelerator_gets_one_label():
    plan, cost = pose_like()
    deconv = plan.graph.nodes_with_source_name("deconv0_fwd")[0]
    svg = svg_of(plan, cost, collapse=False)
    out_edges = [g for g in groups(svg, "edge") if title(g).startswith(f"n{deconv.id}->")]
    assert len(out_edges) == 2  # to its batch_norm and to its add, both on the accelerator
    assert sum(1 for g in out_edges if texts(g)) == 1


def test_cpu_ops_show_their_reason_and_the_full_text_in_the_tooltip():
    plan, cost = pose_like()
    svg = svg_of(plan, cost, collapse=False)
    nodes = {title(g): g for g in groups(svg, "node")}
    for decision in plan.decisions:
        if decision.device != "cpu":
            continue
        node = nodes[f"n{decision.node}"]
        assert any(decision.reason in tip for tip in tooltips(node))
        visible = " ".join(texts(node))
        assert render._short_reason(decision.reason, plan.graph[decision.node].op)[:20] in visible
    deconv_text = " ".join(texts(nodes[f"n{plan.graph.nodes_with_source_name('deconv0_fwd')[0].id}"]))
    assert "Deconvolution is not in" in deconv_text and "Tensor" not in deconv_text


def test_nodes_show_op_and_source_name_and_summary_shows_the_total():
    plan, cost = pose_like()
    svg = svg_of(plan, cost, collapse=False)
    conv = {title(g): texts(g) for g in groups(svg, "node")}["n0"]
    assert conv == ["nn.conv2d", "conv0_fwd"]
    page = " ".join(t.text or "" for t in svg.iter(f"{SVG}text"))
    assert "strategy greedy" in page and "neuron@2020" in page
    assert f"predicted {render.format_time(cost.total)}" in page
    assert "copy between devices" in page and "neuron@2020 region" in page  # the legend


def test_without_cost_cut_labels_have_no_time():
    plan, _ = pose_like()
    svg = svg_of(plan, None, collapse=False)
    labelled = [texts(g) for g in groups(svg, "edge") if texts(g)]
    assert len(labelled) == len(plan.crossing_tensors())
    assert all(not lines[1].endswith("s") for lines in labelled)  # "803 kB", no ", 1.2 ms"
    assert "predicted" not in render.draw(plan).source


def test_awkward_names_are_escaped():
    plan, cost = pose_like()
    svg = svg_of(plan, cost, collapse=False)  # would fail to parse or render if unescaped
    resize = plan.graph.nodes_with_source_name('resize "0" <x>\\y')[0]
    node = {title(g): g for g in groups(svg, "node")}[f"n{resize.id}"]
    assert 'resize "0" <x>\\y' in texts(node)


# ---------------------------------------------------------------------------------- collapsed
def test_collapsed_has_one_node_per_region_and_aggregated_bytes():
    plan, cost = pose_like()
    svg = svg_of(plan, cost, collapse=True)
    nodes = {title(g) for g in groups(svg, "node")}
    assert {f"r{r.id}" for r in plan.regions} <= nodes
    assert not any(n.startswith("n") for n in nodes)
    assert len(groups(svg, "cluster")) == len(plan.accelerator_regions)
    # Out of accel0 flows one tensor to the first deconvolution's CPU island.
    first_cpu = plan.region_of(plan.graph.nodes_with_source_name("deconv0_fwd")[0].id)
    edge = {title(g): texts(g) for g in groups(svg, "edge")}[f"r0->r{first_cpu.id}"]
    cut = next(c for c in cost.cuts if c.dst == "cpu" and c.consumers == first_cpu.nodes)
    assert edge == ["float32[1,64,56,56]",
                    f"{render.format_bytes(56 * 56 * 64 * 4)}, copy {render.format_time(cut.time)}"]


def test_collapsed_copy_times_add_up_to_the_predicted_transfer():
    plan, cost = pose_like()
    flows = render._region_flows(render._PlanView(plan, cost))
    assert sum(f.cut_time or 0.0 for f in flows.values()) == pytest.approx(cost.transfer)


def test_cpu_island_summary_names_its_ops_and_reasons():
    plan, cost = pose_like()
    svg = svg_of(plan, cost, collapse=True)
    deconv = plan.graph.nodes_with_source_name("deconv0_fwd")[0]
    island = {title(g): g for g in groups(svg, "node")}[f"r{plan.region_of(deconv.id).id}"]
    visible = " ".join(texts(island))
    assert "nn.conv2d_transpose deconv0_fwd" in visible
    assert "nn.conv2d_transpose: Deconvolution is not in" in visible
    assert any(DECONV_REASON in tip for tip in tooltips(island))


def test_collapsed_large_regions_show_an_op_histogram():
    plan = chain(60)
    big = max(plan.accelerator_regions, key=lambda r: len(r.nodes))
    label = " ".join(texts({title(g): g for g in groups(svg_of(plan, None), "node")}[f"r{big.id}"]))
    assert f"{len(big.nodes)} ops" in label and "x nn.conv2d" in label


def test_large_graphs_collapse_by_default():
    small, big = chain(10), chain(60)
    assert len(small.graph) <= render.COLLAPSE_ABOVE < len(big.graph)
    op_node = re.compile(r"^\t+n1 \[", re.MULTILINE)
    assert not op_node.search(render.draw(big).source)
    assert re.search(r"^\t\tr0 \[", render.draw(big).source, re.MULTILINE)
    assert op_node.search(render.draw(small).source)
    assert op_node.search(render.draw(big, collapse=False).source)


# ---------------------------------------------------------------------------------- determinism
def test_dot_is_identical_across_runs_and_hash_seeds():
    first = render.draw(*pose_like(), collapse=False).source
    assert render.draw(*pose_like(), collapse=False).source == first
    script = ("import sys; sys.path.insert(0, sys.argv[1]); import test_render as t; "
              "from partition_lab import render; "
              "print(render.draw(*t.pose_like(), collapse=False).source, end='')")
    outputs = set()
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        outputs.add(subprocess.run([sys.executable, "-c", script, str(Path(__file__).parent)],
                                   env=env, check=True, capture_output=True, text=True).stdout)
    assert outputs == {first}


# ---------------------------------------------------------------------------------- colours
def test_target_colours_built_in_and_hashed():
    assert render.target_colours("neuron@2020") == render.target_colours("neuron")
    assert render.target_colours("tensorcore") != render.target_colours("neuron")
    user = render.target_colours("my_npu")
    assert user == render.target_colours("my_npu")
    assert user != render.target_colours("other_npu")
    assert all(c.startswith("#") and len(c) == 7 for c in user)


# ---------------------------------------------------------------------------------- files
@pytest.mark.parametrize("suffix, magic", [(".svg", b"<?xml"), (".png", b"\x89PNG"),
                                           (".pdf", b"%PDF"), (".dot", b"digraph")])
def test_write_picks_the_format_from_the_suffix(tmp_path, suffix, magic):
    plan, cost = pose_like()
    path = render.write(plan, tmp_path / f"plan{suffix}", cost)
    assert path.read_bytes().startswith(magic)
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"plan{suffix}"]


def test_write_rejects_an_unknown_suffix_and_writes_nothing(tmp_path):
    plan, cost = pose_like()
    with pytest.raises(PartitionLabError, match="unknown suffix '.jpg'"):
        render.write(plan, tmp_path / "plan.jpg", cost)
    with pytest.raises(PartitionLabError, match="does not exist"):
        render.write(plan, tmp_path / "missing" / "plan.svg", cost)
    assert list(tmp_path.iterdir()) == []


def test_a_failing_render_leaves_neither_file_nor_temporary(tmp_path, monkeypatch):
    plan, cost = pose_like()
    target = tmp_path / "plan.svg"
    target.write_text("old")

    def broken(data):
        raise OSError("disk full")

    monkeypatch.setattr(render.os, "replace", lambda *a: broken(a))
    with pytest.raises(OSError, match="disk full"):
        render.write(plan, target, cost)
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plan.svg"]


def test_dot_errors_become_one_line_errors():
    with pytest.raises(PartitionLabError, match="graphviz dot failed to render svg") as info:
        render.render_source("digraph { a -> }", "svg")
    assert "\n" not in str(info.value)


def test_formatting_helpers():
    assert render.format_time(0.0321) == "32.1 ms"
    assert render.format_time(2.5e-5) == "25 us"
    assert render.format_time(1.5) == "1.50 s"
    assert render.format_bytes(802816) == "803 kB"
    assert render.format_bytes(512) == "512 B"


def test_side_by_side_keeps_both_drawings_in_order(tmp_path):
    plan, cost = pose_like()
    before = render.draw(plan, cost, collapse=True, title="before")
    after = render.draw(plan, None, collapse=False, title="after")
    path = render.write_side_by_side([before, after], tmp_path / "both.svg")
    svg = ET.parse(path).getroot()
    assert len(groups(svg, "cluster")) == 2 * len(plan.accelerator_regions)
    headers = sorted((float(t.get("x")), t.text) for t in svg.iter(f"{SVG}text")
                     if t.text in ("before", "after"))
    assert [text for _, text in headers] == ["before", "after"]  # left to right
    assert "sortv" not in before.source  # the caller's drawing is not modified
    assert sorted(p.name for p in tmp_path.iterdir()) == ["both.svg"]


def test_written_files_get_the_usual_permissions(tmp_path):
    plan, cost = pose_like()
    path = render.write(plan, tmp_path / "plan.dot", cost)
    mask = os.umask(0)
    os.umask(mask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~mask


@pytest.mark.parametrize("labels, shown", [
    ("many", "3x its region excluded: slower on the accelerator"),  # one reason, 3 regions
    ("one", "3x region accel2 excluded: slower on the accelerator"),  # names the region
])
def test_island_lists_the_targets_reasons_before_the_strategys(labels, shown):
    plan, _ = pose_like()
    graph, verdicts = plan.graph, plan.verdicts
    deconv = graph.nodes_with_source_name("deconv0_fwd")[0].id
    kept = [n.id for n in graph if n.source_name in ("deconv_bn0_fwd", "deconv_relu0_fwd",
                                                     "deconv_add0")]
    reasons = {n: f"region accel{10 + n if labels == 'many' else 2} (3 ops) excluded: "
                  "slower on the accelerator" for n in kept}
    moved = PartitionPlan.from_assignment(
        graph, plan.target, "cost", [n.id for n in graph if verdicts[n.id].supported
                                     and n.id not in kept], verdicts, reasons)
    island = next(r for r in moved.cpu_regions if deconv in r.nodes)
    svg = svg_of(moved, None, collapse=True)
    label = " ".join(texts({title(g): g for g in groups(svg, "node")}[f"r{island.id}"]))
    # the op the target rejected is listed before the 3 ops the strategy moved
    assert 0 < label.index("Deconvolution is not in") < label.index(shown)
