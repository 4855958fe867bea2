"""The graphviz drawing of a plan: clusters per device, the legend, labelled cuts, reasons,
collapse, determinism, files.

Synthetic graphs (OpGraphBuilder, ``partition_lab.synthetic``) keep these tests independent of
TVM; ``test_cli.py`` draws a real zoo model end to end.
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
    synthetic,
)
from partition_lab.core.platform import HOST, Device, Platform, host_device
from partition_lab.core.support import Support, host_verdict
from partition_lab.cost_models.base import evaluate
from partition_lab.render import graphviz as render_graphviz
from partition_lab.render import view as render_view
from partition_lab.strategies import get_strategy
from partition_lab.targets import get_platform
from partition_lab.targets.base import TargetSpec
from repo_paths import REPO_ROOT, TESTS_DIR

SVG = "{http://www.w3.org/2000/svg}"
XLINK_TITLE = "{http://www.w3.org/1999/xlink}title"
DECONV_REASON = ("nn.conv2d_transpose: Deconvolution is not in neuron@2020's MXNet operator "
                 "list (added in neuron-cc 1.0.24045)")


class ToyCost:
    """Deterministic costs that differ per op kind, so times in labels are distinguishable."""

    name = "toy"

    def op_time(self, node, device):
        return (1e-4 if device == "cpu" else 1e-5) * (1 + node.id % 3)

    def transfer_time(self, nbytes, src, dst):
        return 5e-5 + nbytes / 1e9

    def region_overhead(self, device):
        return 2e-4 if device != "cpu" else 0.0


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
    plan = synthetic.plan_on(graph, synthetic.one_accelerator(verdicts, target), "greedy", on_accel)
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
    return synthetic.plan_on(graph, synthetic.one_accelerator(verdicts, "neuron"), "greedy", [n.id for n in graph if verdicts[n.id].supported])


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
        assert render_view._short_reason(decision.reason, plan.graph[decision.node].op)[:20] in visible
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
    assert "neuron@2020 region (BYOC, Compiler neuron_2020): 16 ops in 4 regions" in page
    assert "on the CPU (host, 3 ops)" in page


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
    flows = render_view._region_flows(render_view._PlanView(plan, cost))
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
    def both() -> str:
        three = three_device_plan()
        return (render.draw(*pose_like(), collapse=False).source
                + render.draw(three, evaluate(three, ToyCost()), collapse=True).source)

    first = both()
    assert both() == first
    script = ("import sys; sys.path[:0] = sys.argv[1:]; import test_graphviz as t; "
              "from partition_lab import render; "
              "three = t.three_device_plan(); "
              "print(render.draw(*t.pose_like(), collapse=False).source "
              "+ render.draw(three, t.evaluate(three, t.ToyCost()), collapse=True).source, "
              "end='')")
    outputs = set()
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        outputs.add(subprocess.run([sys.executable, "-c", script, str(Path(__file__).parent), str(TESTS_DIR)],
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

    monkeypatch.setattr(render_graphviz.os, "replace", lambda *a: broken(a))
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
    ("many", "3x its region excluded: slower on the accelerator"),  # 3 regions, none drawn
    # A label in a strategy's reason numbers a region of its search state, not the drawn one.
    ("drawn", "3x its region excluded: slower on the accelerator"),
    ("gone", "3x its region excluded: slower on the accelerator"),  # one region, not drawn
])
def test_island_lists_the_targets_reasons_before_the_strategys(labels, shown):
    plan, _ = pose_like()
    graph, verdicts = plan.graph, plan.verdicts
    deconv = graph.nodes_with_source_name("deconv0_fwd")[0].id
    kept = [n.id for n in graph if n.source_name in ("deconv_bn0_fwd", "deconv_relu0_fwd",
                                                     "deconv_add0")]
    label = {"many": None, "drawn": 2, "gone": 9}[labels]
    reasons = {n: f"region accel{10 + n if label is None else label} (3 ops) excluded: "
                  "slower on the accelerator" for n in kept}
    moved = synthetic.plan_on(graph, synthetic.one_accelerator(verdicts, plan.platform_name), "cost", [n.id for n in graph if verdicts[n.id].supported
                                     and n.id not in kept], reasons)
    assert ("accel2" in {r.label for r in moved.regions}) and \
        ("accel9" not in {r.label for r in moved.regions})
    island = next(r for r in moved.cpu_regions if deconv in r.nodes)
    svg = svg_of(moved, None, collapse=True)
    label = " ".join(texts({title(g): g for g in groups(svg, "node")}[f"r{island.id}"]))
    # the op the target rejected is listed before the 3 ops the strategy moved
    assert 0 < label.index("Deconvolution is not in") < label.index(shown)


# ---------------------------------------------------------------------------------- devices
NPU_COLOUR, DSP_COLOUR = "#b07cd8", "#3dbfb0"
CLUSTER_COLOUR = re.compile(r"subgraph cluster_(\w+) \{\n\t+color=\"(#[0-9a-fA-F]{6})\"")
THREE_OPS = ["nn.conv2d", "nn.relu", "nn.conv2d_transpose", "nn.relu", "nn.conv2d", "sign",
             "nn.relu", "nn.conv2d"]


def npu_dsp_cpu(npu_colour: str = NPU_COLOUR, dsp_colour: str = DSP_COLOUR,
                extra: tuple[Device, ...] = ()) -> Platform:
    """An NPU (preferred), a DSP-like vector unit and the host, each in its own memory."""
    npu = Device("npu", TargetSpec("npu", supports_all=True), role="byoc", memory="npu",
                 compiler="npu", preference=20, colour=npu_colour)
    dsp = Device("dsp", TargetSpec("dsp", supports_all=True), role="byoc", memory="dsp",
                 compiler="dsp", preference=10, colour=dsp_colour)
    return Platform("npu_dsp_cpu", (npu, dsp, host_device(), *extra))


def npu_verdict(op: str) -> Verdict:
    if op in ("nn.conv2d_transpose", "sign"):
        return Verdict(False, f"{op}: not in the NPU's op table (npu-sdk 2.1)", "npu-ops")
    return Verdict(True, f"{op} is in the NPU's op table", "npu-ops")


def three_device_plan(platform: Platform | None = None, strategy: str = "greedy",
                      reasons: dict[int, str] | None = None) -> PartitionPlan:
    """conv, relu on the NPU; the deconvolution on the DSP (the NPU rejects it); relu, conv back
    on the NPU; sign on the host (both reject it); relu, conv on the NPU."""
    platform = platform or npu_dsp_cpu()
    graph = synthetic.chain(THREE_OPS)
    table = {"npu": [npu_verdict(n.op) for n in graph],
             "dsp": [Verdict(n.op != "sign", f"{n.op}: DSP rule", "dsp-ops") for n in graph],
             HOST: [host_verdict() for _ in graph]}
    for device in platform.devices:  # further devices take nothing
        table.setdefault(device.name, [Verdict(False, "idle", "none") for _ in graph])
    plan = get_strategy(strategy).run(graph, Support(platform, table))
    if reasons:
        plan = PartitionPlan.from_devices(graph, plan.support, strategy,
                                          [d.device for d in plan.decisions], reasons)
    plan.validate()
    return plan


def cluster_colours(source: str) -> dict[str, str]:
    """Region label -> the line colour of its cluster in DOT source."""
    return dict(CLUSTER_COLOUR.findall(source))


def page_text(svg: ET.Element) -> str:
    return " ".join(t.text or "" for t in svg.iter(f"{SVG}text"))


def test_the_three_device_plan_uses_every_device():
    plan = three_device_plan()
    assert [d.device for d in plan.decisions] == [
        "npu", "npu", "dsp", "npu", "npu", "cpu", "npu", "npu"]
    # numbered per device, in plan order
    assert [r.label for r in plan.regions] == ["npu0", "dsp0", "npu1", "cpu0", "npu2"]


@pytest.mark.parametrize("collapse", [False, True])
def test_three_device_clusters_have_one_colour_per_device(collapse):
    plan = three_device_plan()
    colours = cluster_colours(render.draw(plan, evaluate(plan, ToyCost()),
                                          collapse=collapse).source)
    assert sorted(colours) == ["dsp0", "npu0", "npu1", "npu2"]  # the host island is no cluster
    assert {colours[r.label] for r in plan.regions_on("npu")} == {NPU_COLOUR}
    assert colours["dsp0"] == DSP_COLOUR


def test_the_legend_lists_each_device_with_its_colour_role_and_op_count():
    idle = Device("idle", TargetSpec("idle", supports_all=True), role="byoc", memory="npu",
                  compiler="idle", preference=5, colour="#ff0000")
    plan = three_device_plan(npu_dsp_cpu(extra=(idle,)))
    source = render.draw(plan, None).source
    header = source[source.index("header [label=<"):source.index("</TABLE>>")]
    assert header.count("&#9632;") == 2 and header.count("&#9633;") == 1  # npu, dsp; host
    assert (f'<FONT COLOR="{NPU_COLOUR}" POINT-SIZE="14">&#9632;</FONT>  npu region '
            "(BYOC, Compiler npu): 6 ops in 3 regions") in header
    assert (f'<FONT COLOR="{DSP_COLOUR}" POINT-SIZE="14">&#9632;</FONT>  dsp region '
            "(BYOC, Compiler dsp): 1 op in 1 region") in header
    assert "on the CPU (host, 1 op)" in header
    assert "idle" not in header  # a device the plan does not use is not listed
    assert "3 regions on npu, 1 region on dsp, 1 CPU island" in header


def test_devices_without_a_colour_or_with_a_taken_one_get_a_stable_hash_colour():
    plan = three_device_plan(npu_dsp_cpu(npu_colour="", dsp_colour=""))
    colours = cluster_colours(render.draw(plan).source)
    assert colours["npu0"] == render.target_colours("npu")[0]
    assert colours["dsp0"] == render.target_colours("dsp")[0]
    same = three_device_plan(npu_dsp_cpu(dsp_colour=NPU_COLOUR))
    colours = cluster_colours(render.draw(same).source)
    assert colours["npu0"] == NPU_COLOUR and colours["dsp0"] == render.target_colours("dsp")[0]
    assert render.device_colours(same.platform)["dsp"][1] != render.device_colours(
        same.platform)["npu"][1]


def test_ops_show_why_a_more_preferred_device_rejected_them():
    plan = three_device_plan()
    svg = svg_of(plan, None, collapse=False)
    nodes = {title(g): g for g in groups(svg, "node")}
    # the deconvolution runs on the DSP: the NPU's rule says why, under its name
    assert texts(nodes["n2"]) == ["nn.conv2d_transpose",
                                  "npu rejects it: not in the NPU's op table"]
    assert any("nn.conv2d_transpose: not in the NPU's op table (npu-sdk 2.1)" in tip
               for tip in tooltips(nodes["n2"]))  # the full verdict
    assert texts(nodes["n0"]) == ["nn.conv2d"]  # on the most preferred device: no reason
    sign = " ".join(texts(nodes["n5"]))  # on the host: both accelerators rejected it
    assert sign == "sign npu and dsp reject it: not in the NPU's op table"
    # the host op's reason names every device that rejected it
    assert any("npu: " in tip and "dsp: sign: DSP rule" in tip for tip in tooltips(nodes["n5"]))


def test_no_drawn_text_names_a_region_label_absent_from_the_plan():
    base = three_device_plan()
    reasons = {6: "region npu7 (2 ops: nn.relu, nn.conv2d) excluded: predicted 1 ms vs 0.5 ms",
               7: "nn.conv2d_7 moved from region npu1 to dsp9 and then cpu0: slower"}
    devices = [d.device for d in base.decisions]
    devices[6] = devices[7] = "cpu"
    plan = PartitionPlan.from_devices(base.graph, base.support, "cost", devices, reasons,
                                      notes=["region dsp5 was tried"])
    plan.validate()
    labels = {r.label for r in plan.regions}
    assert "npu7" not in labels and "dsp9" not in labels and "dsp5" not in labels
    assert {"npu1", "cpu0"} <= labels
    words = re.compile(r"(?<![\w@.])((?:npu|dsp|cpu|accel)\d+)(?![\w@])")
    for collapse in (False, True):
        svg = svg_of(plan, evaluate(plan, ToyCost()), collapse=collapse)
        drawn = page_text(svg) + " ".join(a.get(XLINK_TITLE) or "" for a in svg.iter(f"{SVG}a"))
        named = set(words.findall(drawn))
        assert named <= labels, named - labels
        assert "npu7" not in drawn and "its region excluded" in drawn
        # Reasons name no region (their labels are the strategy's search state); notes keep the
        # labels of drawn regions.
        assert "region npu1" not in drawn and "moved from its region" in drawn
        assert "region dsp5" not in drawn and "its region was tried" in drawn


def test_reasons_are_grouped_by_their_text():
    graph = synthetic.chain(["sign", "nn.conv2d", "nn.conv2d", "sign", "tanh", "tanh"])
    platform = npu_dsp_cpu()
    npu = [Verdict(False, f"{n.op}: rule A rejects shape {n.id}", "rule-a") if n.op != "tanh"
           else Verdict(False, "tanh: rule B", "rule-b") for n in graph]
    support = Support(platform, {"npu": npu, "dsp": [Verdict(False, "no", "dsp")] * 6,
                                 HOST: [host_verdict() for _ in graph]})
    plan = get_strategy("greedy").run(graph, support)
    assert [r.label for r in plan.regions] == ["cpu0"]
    ranked = render_view._region_reasons(render_view._PlanView(plan, None), plan.regions[0])
    assert ranked == [  # one rule with four texts: four lines, each op under its own words
        ("npu and dsp reject tanh: rule B", 2),
        ("npu and dsp reject nn.conv2d: rule A rejects shape 1", 1),
        ("npu and dsp reject nn.conv2d: rule A rejects shape 2", 1),
        ("npu and dsp reject sign: rule A rejects shape 0", 1),
        ("npu and dsp reject sign: rule A rejects shape 3", 1),
    ]


def test_copies_within_one_memory_are_not_cuts_and_each_domain_gets_one_label():
    graph = OpGraphBuilder("fanout")
    x = graph.input("x", TensorType((1, 64), "float32"))
    y = graph.op("nn.dense", [x])
    outs = [graph.op("nn.relu", [y]), graph.op("tanh", [y]), graph.op("sign", [y])]
    g = graph.build(outputs=outs)
    platform = get_platform("tensorcore")
    ok = Verdict(True, "ok", "r")
    table = {"tensorcore": [Verdict(n.op in ("nn.dense", "nn.relu"), f"{n.op}: no", "r",
                                    anchor=n.op == "nn.dense") for n in g],
             "cuda": [ok] * len(g), HOST: [host_verdict() for _ in g]}
    plan = PartitionPlan.from_devices(g, Support(platform, table), "by hand",
                                      ["tensorcore", "tensorcore", "cuda", "cpu"])
    plan.validate()
    source = render.draw(plan, None, collapse=False).source
    edges = {line.split(" [")[0].strip(): line for line in source.splitlines() if " -> " in line}
    assert CUT_COLOUR_ATTR not in edges["n0 -> n2"]  # tensorcore -> cuda: same GPU memory
    assert CUT_COLOUR_ATTR in edges["n0 -> n3"] and "label=" in edges["n0 -> n3"]  # to the host
    assert CUT_COLOUR_ATTR in edges["in0 -> n0"]
    colours = cluster_colours(source)
    assert colours["tensorcore0"] == render.TARGET_COLOURS["tensorcore"][0]
    assert colours["cuda0"] == platform.device("cuda").colour


CUT_COLOUR_ATTR = f'color="{render.CUT_COLOUR}"'


def tensorcore_graph():
    """NHWC float16 convs at batch 16: the stem (cin 3) misses the Tensor Core shapes, the
    next conv matches (16,16,16); then a dense of 10 units that misses them."""
    b = OpGraphBuilder("tc_small")

    def conv(x, cin, cout, name):
        attrs = {"channels": cout, "kernel_size": (3, 3), "strides": (1, 1),
                 "padding": (1, 1, 1, 1), "groups": 1, "data_layout": "NHWC",
                 "kernel_layout": "HWIO"}
        return b.op("nn.conv2d", [x], outputs=[TensorType((16, 8, 8, cout), "float16")],
                    weights=[TensorType((3, 3, cin, cout), "float16")], attrs=attrs,
                    flops=2.0 * 16 * 8 * 8 * cin * cout * 9, source_name=name)

    h = conv(b.input("data", TensorType((16, 8, 8, 3), "float16")), 3, 32, "stem")
    h = b.op("nn.relu", [conv(b.op("nn.relu", [h]), 32, 32, "body")])
    flat = b.op("reshape", [h], outputs=[TensorType((16, 2048), "float16")])
    dense = b.op("nn.dense", [flat], outputs=[TensorType((16, 10), "float16")],
                 weights=[TensorType((10, 2048), "float16")], flops=2.0 * 16 * 2048 * 10,
                 source_name="head")
    return b.build(outputs=[dense])


def plan_on(platform_name: str, graph) -> PartitionPlan:
    platform = get_platform(platform_name)
    support = Support(platform, {d.name: d.target.check_graph(graph) if not d.is_host else
                                 [host_verdict() for _ in graph] for d in platform.devices})
    plan = get_strategy("greedy").run(graph, support)
    plan.validate()
    return plan


def test_a_tensorcore_plan_draws_tensor_core_and_cuda_core_clusters():
    plan = plan_on("tensorcore", tensorcore_graph())
    assert set(plan.ops_per_device().values()) != {0} and plan.ops_per_device()["cpu"] == 0
    assert {r.device for r in plan.regions} == {"tensorcore", "cuda"}
    source = render.draw(plan, None, collapse=False).source
    colours = cluster_colours(source)
    assert sorted(colours) == sorted(r.label for r in plan.regions)
    assert {colours[r.label] for r in plan.regions_on("tensorcore")} == {
        render.TARGET_COLOURS["tensorcore"][0]}
    assert {colours[r.label] for r in plan.regions_on("cuda")} == {
        plan.platform.device("cuda").colour}
    svg = ET.fromstring(render.render_source(source, "svg"))
    stem = {title(g): texts(g) for g in groups(svg, "node")}[
        f"n{plan.graph.nodes_with_source_name('stem')[0].id}"]
    assert stem[:2] == ["nn.conv2d", "stem"] and "tensorcore rejects it: cin 3 is not a" in stem
    page = page_text(svg)
    assert "tensorcore region (BYOC, Compiler tensorcore)" in page
    assert "cuda region (main target, inline)" in page and "on the CPU (host, 0 ops)" in page
    collapsed = page_text(svg_of(plan, None, collapse=True))  # one-op regions: no "1x"
    assert "tensorcore rejects nn.dense: units 10 is not a multiple of 8, 16 or 32" in collapsed
    assert "tensorcore rejects nn.conv2d: cin 3 is not a multiple of 16" in collapsed


def test_a_cpu_plan_draws_host_islands_only():
    plan = plan_on("cpu", tensorcore_graph())
    svg = svg_of(plan, None, collapse=False)
    assert groups(svg, "cluster") == []
    page = page_text(svg)
    assert "on the CPU (host, 6 ops)" in page and "&#9632;" not in render.draw(plan).source
    assert "rejects" not in page  # nothing is more preferred than the host


def test_neuron_story_keeps_its_clusters_and_colours():
    plan, cost = pose_like("neuron@2020")
    assert plan.platform.names == ["neuron@2020", "cpu"]
    source = render.draw(plan, cost, collapse=True).source
    colours = cluster_colours(source)
    assert sorted(colours) == sorted(r.label for r in plan.accelerator_regions)
    assert set(colours.values()) == {render.TARGET_COLOURS["neuron"][0]}
    assert f'fillcolor="{render.TARGET_COLOURS["neuron"][1]}"' in source


@pytest.mark.parametrize("reason, op, gist", [
    ("nn.conv2d: (batch, cin, cout) = (8, 16, 16) matches none of (16,16,16) (fails on batch "
     "8); (8,16,32) (fails on cout 16); (32,16,8) (fails on batch 8) (Tensor Core needs (batch, "
     "cin, cout) multiples of (16,16,16), (8,16,32) or (32,16,8)); winograd would apply",
     "nn.conv2d", "(batch, cin, cout) = (8, 16, 16) matches none of (16,16,16); (8,16,32); "
     "(32,16,8)"),
    ("region accel6 (4 ops: nn.batch_norm, nn.relu) excluded: predicted 1.18 ms", "",
     "region accel6 excluded: predicted 1.18 ms"),
    (DECONV_REASON, "nn.conv2d_transpose",
     "Deconvolution is not in neuron@2020's MXNet operator list"),
    ("sign is not supported (yet)", "sign", "is not supported"),
])
def test_short_reasons_keep_tuples_and_drop_remarks(reason, op, gist):
    assert render_view._short_reason(reason, op) == gist


EXAMPLE_PLATFORM = REPO_ROOT / "examples" / "platforms" / "npu_dsp_cpu.toml"


def test_the_example_npu_dsp_cpu_platform_draws_each_device_in_its_colour():
    graph = synthetic.resnet_v1((1, 1, 1, 1), image=64, classes=10)
    plan = plan_on(str(EXAMPLE_PLATFORM), graph)
    platform = plan.platform
    used = {r.device for r in plan.regions}
    assert used == {"npu", "dsp", "cpu"}
    source = render.draw(plan, None, collapse=False).source
    colours = cluster_colours(source)
    assert sorted(colours) == sorted(r.label for r in plan.accelerator_regions)
    for region in plan.accelerator_regions:
        assert colours[region.label] == platform.device(region.device).colour
    assert len({platform.device(d).colour for d in ("npu", "dsp")}) == 2
    header = source[source.index("header [label=<"):source.index("</TABLE>>")]
    counts = plan.ops_per_device()
    assert f"npu region (BYOC, Compiler npu): {counts['npu']} ops" in header
    assert f"dsp region (BYOC, Compiler dsp): {counts['dsp']} ops" in header
    assert f"on the CPU (host, {counts['cpu']} op" in header
    # the DSP shares the NPU's memory: no edge between their regions is a copy
    checked = 0
    for tensor in graph.tensors:
        for consumer in tensor.consumers:
            if tensor.producer is not None and {plan.device_of(tensor.producer),
                                                plan.device_of(consumer)} == {"npu", "dsp"}:
                edge = next(line for line in source.splitlines()
                            if line.strip().startswith(f"n{tensor.producer} -> n{consumer} "))
                assert CUT_COLOUR_ATTR not in edge
                checked += 1
    # dsp0 -> npu0 (the pool feeds a block and its shortcut: two edges) -> dsp1 -> npu1
    assert checked == 4, checked
    stem = graph.nodes[0]
    assert plan.device_of(stem.id) == "cpu" and stem.op == "nn.conv2d"
    svg = ET.fromstring(render.render_source(source, "svg"))
    shown = " ".join(texts({title(g): g for g in groups(svg, "node")}[f"n{stem.id}"]))
    assert "npu and dsp reject it: cin 3 is not a multiple of 8" in shown


def test_the_package_docstring_example_runs() -> None:
    import doctest

    result = doctest.testmod(render)
    assert result.attempted > 0 and result.failed == 0


def test_a_collapsed_island_shows_each_text_of_one_rule_with_its_count():
    # one shape rule rejects the stem conv for its channels, two convs and a dense for batch 1
    graph = synthetic.chain(["nn.conv2d", "nn.conv2d", "nn.dense", "nn.conv2d"])
    batch = "batch 1 is not a multiple of 8"
    words = ["cin 3 is not a multiple of 16", batch, batch, batch]
    npu = [Verdict(False, f"{n.op}: {words[n.id]}", "shape") for n in graph]
    support = Support(npu_dsp_cpu(), {"npu": npu, "dsp": [Verdict(False, "no", "dsp")] * 4,
                                      HOST: [host_verdict() for _ in graph]})
    plan = get_strategy("greedy").run(graph, support)
    drawn = page_text(svg_of(plan, None, collapse=True))
    assert "e.g." not in drawn
    assert "2x npu and dsp reject nn.conv2d: batch 1 is not a multiple of 8" in drawn
    assert "1x npu and dsp reject nn.conv2d: cin 3 is not a multiple of 16" in drawn
    assert "1x npu and dsp reject nn.dense: batch 1 is not a multiple of 8" in drawn
