"""The interactive HTML view (``viz -o plan.html``): one self-contained file, names
that cannot escape into markup, the data the side panel shows, no render budget, a layout that
stays fast at 5,000 ops; and, in headless Chromium (skipped where it is absent), a page that
loads without console errors, a search that finds an op, and a click that shows its reason.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest
from test_graphviz import DECONV_REASON, ToyCost, pose_like

from browser import chromium_driver, console_errors, missing, wait_ready
from partition_lab import OpGraphBuilder, PartitionLabError, TensorType, Verdict, render, synthetic
from partition_lab.cost_models.base import evaluate
from partition_lab.render import graphviz as render_graphviz
from partition_lab.render.html import html_page, plan_data, script_json, write_html
from partition_lab.render.layered import DUMMY, layered_layout
from repo_paths import REPO_ROOT

HOSTILE = [
    "</script><script>window.pwned = 1</script>",
    '<img src=x onerror="window.pwned = 2">',
    "<!-- <script>window.pwned = 3</script>",
    "quotes\" ' & &amp; \u2028 line \\ back",
]


def hostile_plan():
    """A chain whose names, graph name and reasons are HTML and script fragments."""
    b = OpGraphBuilder("</title><script>window.pwned = 4</script>")
    h = b.input("<in>", TensorType((1, 8), "float32"))
    for i, name in enumerate(HOSTILE * 2):
        h = b.op("nn.relu" if i % 2 else "tanh", [h], source_name=f"{name} #{i}")
    graph = b.build(outputs=[h])
    verdicts = [Verdict(True, "<b>in</b> the table") if n.op == "nn.relu" else
                Verdict(False, "tanh: </script><script>window.pwned = 5</script>", "<rule>")
                for n in graph]
    plan = synthetic.plan_on(graph, synthetic.one_accelerator(verdicts, "neuron"), "greedy",
                             [n.id for n in graph if verdicts[n.id].supported])
    return plan, evaluate(plan, ToyCost())


def alternating_plan(pairs: int):
    """relu (accepted) and tanh (rejected) alternating: every relu is a region of its own."""
    graph = synthetic.chain(["nn.relu", "tanh"] * pairs)
    verdicts = synthetic.verdicts_by_op(graph, unsupported=["tanh"], target="neuron")
    return synthetic.plan_on(graph, synthetic.one_accelerator(verdicts, "neuron"), "greedy",
                             [n.id for n in graph if n.op == "nn.relu"])


@pytest.fixture(scope="module")
def big():
    """The bench's 5,000-op plan (bench/html_view.py): a random layered DAG, a fifth of its
    ops rejected at random, greedy, with the roofline cost."""
    import sys

    sys.path.insert(0, str(REPO_ROOT / "bench"))
    from html_view import synthetic_plan

    return synthetic_plan(5000)


def embedded(page: str) -> dict:
    match = re.search(r'<script type="application/json" id="plan-data">(.*?)</script>', page,
                      re.S)
    assert match
    return json.loads(match.group(1))


# ---------------------------------------------------------------------------------- the file
def test_the_page_is_one_file_that_loads_nothing(tmp_path):
    plan, cost = pose_like()
    path = render.write(plan, tmp_path / "plan.html", cost)
    page = path.read_text("utf-8")
    assert [p.name for p in tmp_path.iterdir()] == ["plan.html"]
    # No URL but the SVG namespace; nothing fetched (src=, href= only a data: favicon).
    assert set(re.findall(r"https?://[^\s\"')]+", page)) == {"http://www.w3.org/2000/svg"}
    assert re.findall(r'\b(?:src|href)="([^"]*)"', page) == ["data:,"]
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]*)"', page).group(1)
    assert "default-src 'none'" in csp and "script-src 'sha256-" in csp
    assert page.count("<script") == 2 and page.count("</script>") == 2


def test_hostile_names_stay_inside_the_data(tmp_path):
    plan, cost = hostile_plan()
    page = html_page(plan, cost)
    data = embedded(page)
    assert page.count("<script") == 2 and page.count("</script>") == 2
    assert "<script>window" not in page.split('id="plan-data">')[0]  # the title is escaped
    assert "<title>&lt;/title&gt;&lt;script&gt;" in page
    assert [op["s"] for op in data["ops"]] == [n.source_name for n in plan.graph]
    assert data["pool"][data["ops"][0]["re"]] == plan.decisions[0].reason
    assert "\\u003c/script\\u003e" in script_json({"name": HOSTILE[0]})


def test_non_finite_numbers_become_null():
    assert json.loads(script_json({"t": float("inf"), "f": [float("nan"), 1.5]})) == \
        {"t": None, "f": [None, 1.5]}


def test_each_op_carries_what_the_panel_shows():
    plan, cost = pose_like()
    data = plan_data(plan, cost)
    nodes = plan.to_dict(cost.node_times)["nodes"]
    devices = [d["name"] for d in data["devices"]]
    pool = data["pool"]
    for op, node in zip(data["ops"], nodes, strict=True):
        assert (op["n"], op["o"], op["s"]) == (node["name"], node["op"], node["source_name"])
        assert devices[op["d"]] == node["device"] and op["r"] == node["region"]
        assert pool[op["re"]] == node["reason"] and pool[op["w"]] == node["why"]
        assert [pool[v] for v in op["v"]] == [node["support"][d] for d in devices]
        assert op["t"] == node["time_s"] and op["f"] == node["flops"]
        spec = plan.graph[node["id"]]
        assert [pool[t] for t in op["u"]] == [str(t) for t in spec.outputs]
    deconv = plan.graph.nodes_with_source_name("deconv0_fwd")[0].id
    assert pool[data["ops"][deconv]["re"]] == DECONV_REASON
    legend = {d["name"]: d for d in data["devices"]}
    assert legend["neuron@2020"]["ops"] == 16 and legend["neuron@2020"]["regions"] == 4
    assert legend["neuron@2020"]["line"] == render.TARGET_COLOURS["neuron"][0]


def test_small_plans_open_expanded_and_large_ones_collapsed():
    plan, cost = pose_like()
    assert plan_data(plan, cost)["expanded"] == [r.id for r in plan.regions]
    assert plan_data(plan, cost, collapse=True)["expanded"] == []
    assert plan_data(alternating_plan(100))["expanded"] == []


def test_html_has_no_render_budget_and_the_refusal_points_to_it(tmp_path):
    plan = alternating_plan(70)  # 70 accelerator regions: over the graphviz budget
    with pytest.raises(render_graphviz.RenderBudgetError,
                       match=re.escape(f"-o {tmp_path / 'alt.html'}")):
        render.write(plan, tmp_path / "alt.svg")
    render.write(plan, tmp_path / "alt.html")
    assert len(embedded((tmp_path / "alt.html").read_text("utf-8"))["regions"]) == 140
    assert ".html" in render.FORMATS
    with pytest.raises(PartitionLabError, match="side by side"):
        render.write_side_by_side([render.draw(plan)], tmp_path / "both.html")


def test_viz_writes_html_for_a_plan_graphviz_refuses(tmp_path, capsys):
    """End to end: a 70-region ONNX model, refused as .svg (pointing to .html), written as
    .html."""
    from test_bad_input import NPU, alternating_onnx, target

    from partition_lab.cli import main

    model, npu = alternating_onnx(tmp_path, 70), target(tmp_path, NPU)
    assert main(["viz", str(model), "-t", npu, "-o", str(tmp_path / "alt.svg")]) == 2
    assert f"-o {tmp_path / 'alt.html'}" in capsys.readouterr().err
    assert main(["viz", str(model), "-t", npu, "-o", str(tmp_path / "alt.html")]) == 0
    assert f"wrote {tmp_path / 'alt.html'}" in capsys.readouterr().out
    assert len(embedded((tmp_path / "alt.html").read_text("utf-8"))["ops"]) == 141


# ---------------------------------------------------------------------------------- layout
def test_layered_layout_places_every_node_once_with_edges_going_down():
    graph = synthetic.random_dag(300, seed=3)
    edges = list(graph.nx.edges)
    layout = layered_layout(list(range(len(graph))), edges)
    placed = [n for row in layout.ranks for n in row if n != DUMMY]
    assert sorted(placed) == list(range(len(graph)))
    rank = {n: r for r, row in enumerate(layout.ranks) for n in row if n != DUMMY}
    assert sorted((u, v) for u, v, _ in layout.edges) == sorted(edges)
    for u, v, path in layout.edges:
        assert rank[v] - rank[u] == len(path) + 1
        for step, position in enumerate(path, start=rank[u] + 1):
            assert layout.ranks[step][position] == DUMMY
    assert layered_layout(list(range(len(graph))), edges) == layout  # deterministic


def test_a_cycle_is_refused():
    with pytest.raises(ValueError, match="cycle"):
        layered_layout([0, 1], [(0, 1), (1, 0)])


def test_a_5000_op_plan_writes_fast_and_small(big, tmp_path):
    plan, cost = big
    start = time.perf_counter()
    write_html(plan, tmp_path / "big.html", cost)
    seconds = time.perf_counter() - start
    size = (tmp_path / "big.html").stat().st_size
    assert size < 10e6, f"{size / 1e6:.1f} MB"
    assert seconds < 20, f"{seconds:.1f} s"  # about 1.3 s here; slack for a loaded CI machine


# ---------------------------------------------------------------------------------- browser
# make test sets it: there the browser is installed (make setup), and its absence is a failure.
REQUIRE_BROWSER = os.environ.get("PARTITION_LAB_REQUIRE_BROWSER") == "1"


@pytest.fixture(scope="module")
def driver():
    """Headless Chromium, or a skip saying what is missing (a failure under make test)."""
    problem = missing()
    if problem is not None:
        if REQUIRE_BROWSER:
            pytest.fail(f"PARTITION_LAB_REQUIRE_BROWSER=1 but {problem}")
        pytest.skip(f"browser tests: {problem}")
    with chromium_driver() as browser:
        yield browser


def open_page(driver, path: Path, timeout: float = 30.0) -> float:
    driver.get_log("browser")  # drop what an earlier page logged
    start = time.perf_counter()
    driver.get(path.resolve().as_uri())
    wait_ready(driver, timeout)
    return time.perf_counter() - start


def search_and_enter(driver, text: str) -> None:
    from selenium.webdriver.common.keys import Keys

    box = driver.find_element("id", "search")
    box.clear()
    box.send_keys(text, Keys.ENTER)


def panel(driver) -> tuple[str, str]:
    """The side panel's heading and reason."""
    details = driver.find_element("id", "details")
    return (details.find_element("tag name", "h2").text,
            details.find_element("css selector", "[data-role=reason]").text)


def visible(driver, attribute: str, exclude: int | None = None) -> int | None:
    """The ``attribute`` value (``data-op``, ``data-region``) of a box whose centre is inside
    the drawing area, other than ``exclude``."""
    return driver.execute_script("""
        const [attribute, exclude] = arguments;
        const area = document.getElementById('canvas').getBoundingClientRect();
        for (const g of document.querySelectorAll('[' + attribute + ']')) {
          const b = g.firstChild.getBoundingClientRect();
          const x = b.x + b.width / 2, y = b.y + b.height / 2;
          if (Number(g.getAttribute(attribute)) !== exclude && x > area.left + 20 &&
              x < area.right - 20 && y > area.top + 20 && y < area.bottom - 20) {
            return Number(g.getAttribute(attribute));
          }
        }
        return null;""", attribute, exclude)


def visible_op(driver, exclude: int) -> int | None:
    return visible(driver, "data-op", exclude)


def click_op(driver, node: int) -> None:
    # The box's rectangle, not its group: selenium clicks an element's centre.
    driver.find_element("css selector", f'[data-op="{node}"] > rect').click()


def test_search_finds_an_op_and_a_click_shows_its_reason(driver, tmp_path):
    plan, cost = pose_like()
    path = render.write(plan, tmp_path / "pose.html", cost)
    open_page(driver, path)
    assert console_errors(driver) == []
    deconv = plan.graph.nodes_with_source_name("deconv1_fwd")[0]
    search_and_enter(driver, "DECONV1_f")  # case-insensitive, part of the module path
    assert driver.find_element("id", "count").text == "1 / 1"
    assert panel(driver) == (deconv.name, plan.decisions[deconv.id].reason)
    other = visible_op(driver, exclude=deconv.id)
    click_op(driver, other)
    assert panel(driver) == (plan.graph[other].name, plan.decisions[other].reason)
    details = driver.find_element("id", "details").text
    assert plan.device_of(other) in details and str(plan.graph[other].outputs[0]) in details
    assert console_errors(driver) == []


def test_hostile_names_are_shown_as_text_and_run_nothing(driver, tmp_path):
    plan, cost = hostile_plan()
    path = write_html(plan, tmp_path / "hostile.html", cost)
    open_page(driver, path)
    assert console_errors(driver) == []
    assert driver.execute_script("return window.pwned === undefined && "
                                 "document.querySelectorAll('script, img').length") == 2
    assert driver.title == f"{plan.graph.name} on neuron, strategy greedy"
    search_and_enter(driver, "onerror")
    name, reason = panel(driver)
    assert name == plan.graph[1].name and reason == plan.decisions[1].reason
    search_and_enter(driver, "<!--")
    assert panel(driver)[0] == plan.graph[2].name
    assert driver.execute_script("return window.pwned === undefined")


def test_a_5000_op_plan_opens_in_seconds_and_regions_expand_on_click(driver, big, tmp_path):
    plan, cost = big
    path = write_html(plan, tmp_path / "big.html", cost)
    seconds = open_page(driver, path, timeout=60)
    assert seconds < 15, f"{seconds:.1f} s"  # about 1.3 s here
    assert console_errors(driver) == []
    assert driver.find_elements("css selector", "[data-op]") == []  # regions collapsed
    target = 4321
    search_and_enter(driver, f"_{target}")
    assert panel(driver) == (plan.graph[target].name, plan.decisions[target].reason)
    frames = driver.find_elements("css selector", "[data-frame]")
    assert [int(f.get_attribute("data-frame")) for f in frames] == [plan.decisions[target].region]
    other = visible_op(driver, exclude=target)
    if other is not None:  # a region of one op has no other op to click
        click_op(driver, other)
        assert panel(driver) == (plan.graph[other].name, plan.decisions[other].reason)
    driver.find_element("id", "collapse-all").click()
    assert driver.find_elements("css selector", "[data-frame]") == []
    # A collapsed region expands on click, and its header collapses it again.
    region = visible(driver, "data-region")
    driver.find_element("css selector", f'[data-region="{region}"] > rect').click()
    assert [int(f.get_attribute("data-frame"))
            for f in driver.find_elements("css selector", "[data-frame]")] == [region]
    assert driver.find_element("css selector", "#details h2").text == plan.regions[region].label
    driver.find_element("css selector", f'[data-region-head="{region}"] > rect').click()
    assert driver.find_elements("css selector", "[data-frame]") == []
    assert console_errors(driver) == []


def test_drag_pans_and_the_wheel_zooms(driver, tmp_path):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.actions.wheel_input import ScrollOrigin

    plan = alternating_plan(40)
    open_page(driver, write_html(plan, tmp_path / "alt.html"))

    def transform():
        text = driver.find_element("id", "viewport").get_attribute("transform")
        return [float(x) for x in re.findall(r"-?[\d.]+", text)]

    tx, ty, scale = transform()
    canvas = driver.find_element("id", "canvas")
    ActionChains(driver).scroll_from_origin(ScrollOrigin.from_element(canvas), 0, -300).perform()
    assert transform()[2] > scale
    tx, ty, scale = transform()
    # Start the drag on empty space near the left edge, where no box is.
    ActionChains(driver).move_to_element_with_offset(canvas, -canvas.size["width"] // 2 + 5, 0) \
        .click_and_hold().move_by_offset(120, 60).release().perform()
    after = transform()
    assert after[0] == pytest.approx(tx + 120, abs=2) and after[1] == pytest.approx(ty + 60, abs=2)
    assert console_errors(driver) == []
