"""Plan checks on load: a flipped verdict or another graph's plan is refused."""


from __future__ import annotations

import pytest

from partition_lab import PartitionPlan, Verdict, synthetic
from partition_lab.errors import PlanError
from partition_lab.synthetic import chain


def test_a_plan_with_a_flipped_verdict_fails_against_the_rules():
    from partition_lab.relay.passes.annotate import support_table
    from partition_lab.strategies import get_strategy
    from partition_lab.targets import accelerator_platform
    from partition_lab.targets.base import TargetSpec

    graph = chain(["nn.conv2d", "tanh", "nn.conv2d"])
    platform = accelerator_platform(TargetSpec("acc", supported={"nn.conv2d": ""}))
    plan = get_strategy("greedy").run(graph, support_table(graph, platform))
    data = plan.to_dict()
    node = data["nodes"][1]
    node["support"]["acc"]["supported"] = True
    node["device"] = data["regions"][node["region"]]["device"] = "acc"
    PartitionPlan.from_dict(graph, data)  # without rules, only the invariants are checked
    with pytest.raises(PlanError, match="the plan says acc supports node .* acc rejects it"):
        PartitionPlan.from_dict(graph, data, platform=platform)


def test_a_plan_for_another_graph_is_refused():
    graph = chain(["nn.conv2d", "nn.relu"])
    verdicts = [Verdict(True, "ok", "r")] * 2
    data = synthetic.plan_on(graph, synthetic.one_accelerator(verdicts, "acc"), "greedy", [0, 1]).to_dict()
    with pytest.raises(PlanError, match="another graph"):
        PartitionPlan.from_dict(chain(["nn.conv2d", "tanh"]), data)


