"""The same ONNX file through Relax and through Relay: per ONNX node, the same devices and the
same reasons, but for the differences ``route_differences.json`` lists (and ``docs/evidence/routes.md``
explains). The Relay side is ``relay_plans.json`` (``relay_plans.py``, Relay venv); a new
difference, or a listed one that is gone, fails here (see ``bench/routes.py`` for the report)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import models
import pytest
from helpers import load
from route_diff import (
    PLATFORMS,
    compare_model,
    known_differences,
    node_records,
    unexplained,
    unseen,
)

import partition_lab

HERE = Path(__file__).resolve().parent
RELAY_PLANS = json.loads((HERE / "relay_plans.json").read_text())
KNOWN = known_differences()


@cache
def differences(name: str) -> tuple[dict, ...]:
    """Every difference of the model's Relax and Relay greedy plans, on every platform."""
    model = models.MODELS[name]()
    nodes = [(n.name, n.op_type) for n in model.graph.node]
    relax = {platform: node_records(partition_lab.partition(load(name), platform,
                                                            strategy="greedy").to_dict())
             for platform in PLATFORMS}
    relay = RELAY_PLANS[name]
    named = {n for plans in (relax, relay) for plan in plans.values() for n in plan}
    found: list[dict] = []
    for platform in PLATFORMS:
        row = compare_model(name, platform, nodes, relay[platform], relax[platform],
                            named=named)
        assert row["nodes"] == len(named), (platform, row)
        found += row["differences"]
    return tuple(found)


def test_the_relay_plans_cover_every_model():
    assert sorted(RELAY_PLANS) == sorted(models.MODELS)
    assert all(sorted(plans) == sorted(PLATFORMS) for plans in RELAY_PLANS.values())


@pytest.mark.parametrize("name", sorted(models.MODELS))
def test_plans_agree_per_onnx_node(name):
    """Each ONNX node's ops: same devices, same reason code, deciding device and rule, on
    every platform, or a difference route_differences.json lists."""
    new = unexplained(differences(name), KNOWN)
    assert not new, "Relay and Relax plans differ (fix it, or list and explain it in " \
        "tests/relax/route_differences.json and docs/evidence/routes.md):\n" + \
        "\n".join(f"{d['platform']} {d['node']} ({d['onnx_op']}, {d['class']}): {d['detail']}"
                  for d in new)


@pytest.mark.parametrize("name", sorted(models.MODELS))
def test_every_onnx_node_with_ops_is_named_on_both_sides(name):
    """No node loses its name to an importer or a pass on either side (the class 'missing')."""
    assert not [d for d in differences(name) if d["class"] == "missing"]


def test_every_listed_difference_of_the_test_models_is_still_seen():
    found = [d for name in models.MODELS for d in differences(name)]
    gone = unseen(KNOWN, found, models.MODELS)
    assert not gone, f"no longer seen: remove {gone} from route_differences.json and the docs"
