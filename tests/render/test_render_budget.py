"""The render budget: a drawing over it is refused before dot runs; dot's timeout."""


from __future__ import annotations

import pytest

from partition_lab import PartitionPlan, Verdict, synthetic
from partition_lab.render import graphviz as render_graphviz
from partition_lab.synthetic import random_dag


def _alternating_plan(n: int) -> PartitionPlan:
    graph = random_dag(n, seed=0)
    verdicts = [Verdict(i % 2 == 0, "alternating", "r") for i in range(n)]
    return synthetic.plan_on(graph, synthetic.one_accelerator(verdicts, "acc"), "greedy", [i for i in range(n) if i % 2 == 0])


def test_a_drawing_over_the_budget_is_refused_before_dot_runs(tmp_path, monkeypatch):
    plan = _alternating_plan(400)
    assert len(plan.accelerator_regions) > render_graphviz.MAX_CLUSTERS
    monkeypatch.setattr(render_graphviz.subprocess, "run", lambda *a, **k: pytest.fail("ran"))
    with pytest.raises(render_graphviz.RenderBudgetError, match="accelerator regions"):
        render_graphviz.write(plan, tmp_path / "p.svg")
    assert list(tmp_path.iterdir()) == []


def test_every_graphviz_call_has_a_timeout(monkeypatch):
    monkeypatch.setattr(render_graphviz, "TIMEOUT_S", 0.2)
    with pytest.raises(render_graphviz.RenderBudgetError, match="did not finish within"):
        render_graphviz._run_graphviz(["sleep", "5"], b"", "dot")


