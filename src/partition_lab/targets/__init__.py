"""Targets as data: which ops an accelerator runs, under which conditions, and why.

>>> from partition_lab.targets import get_target, available_targets
>>> available_targets()
['cpu', 'neuron', 'neuron@2020', 'tensorcore']
>>> get_target("neuron@2020").supports_op("nn.conv2d_transpose")
False

A :class:`TargetSpec` is an op table plus :mod:`rules <partition_lab.targets.rules>`; its
``check(node)`` returns a :class:`~partition_lab.core.plan.Verdict` with a reason. Built-in targets:
``tensorcore`` (options precision, padding, winograd), ``neuron`` / ``neuron@2020`` /
``neuron@<release>``, ``cpu``. User targets come from a TOML/JSON file
(:mod:`partition_lab.targets.user`) or from Python (:func:`register_target`,
:meth:`TargetSpec.extend`, or a :class:`Rule` subclass).
"""

from __future__ import annotations

from ..core.plan import Verdict
from ..errors import TargetSpecError, UnknownTargetError
from .base import PREPARE_STEPS, TargetSpec
from .registry import available_targets, get_target, register_target, unregister_target
from .rules import AnyOf, AttrIn, DtypeIn, MaxSize, MultipleOf, Rule, predicate_rule
from .user import load_target_file

__all__ = [
    "PREPARE_STEPS", "AnyOf", "AttrIn", "DtypeIn", "MaxSize", "MultipleOf", "Rule", "TargetSpec",
    "TargetSpecError", "UnknownTargetError", "Verdict", "available_targets", "get_target",
    "load_target_file", "predicate_rule", "register_target", "unregister_target",
]
