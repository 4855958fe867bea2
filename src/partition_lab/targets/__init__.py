"""Targets and platforms as data: which ops each device runs, under which conditions, and why.

>>> from partition_lab.targets import available_targets, get_platform, get_target
>>> available_targets()
['cpu', 'neuron', 'neuron@2020', 'tensorcore']
>>> get_target("neuron@2020").supports_op("nn.conv2d_transpose")
False
>>> get_platform("tensorcore").names
['tensorcore', 'cuda', 'cpu']

A *target* is one device's op rules: a :class:`TargetSpec` (an op table plus
:mod:`rules <partition_lab.targets.rules>`) whose ``check(node)`` returns a
:class:`~partition_lab.core.support.Verdict` with a reason. A *platform* is devices, each with a
target (:class:`~partition_lab.core.platform.Platform`). Built-in platforms are one module each
(:mod:`.tensorcore`, :mod:`.neuron`, :mod:`.cpu`) and one line in :data:`.registry.BUILTIN`.
User targets come from a TOML/JSON file (:mod:`partition_lab.targets.user`) or from Python
(:func:`register_target`, :meth:`TargetSpec.extend`, or a :class:`Rule` subclass); platforms
with several devices from a platform file (:func:`load_platform_file`).
"""

from __future__ import annotations

from ..core.platform import compiler_name
from ..errors import TargetSpecError, UnknownTargetError
from .base import TargetSpec
from .devices import accelerator_platform
from .platform_files import get_platform, load_platform_file
from .registry import (
    available_targets,
    get_target,
    load_target_file,
    register_target,
    unregister_target,
)
from .rules import AnyOf, AttrIn, DtypeIn, MaxSize, MultipleOf, Rule, predicate_rule

__all__ = [
    "AnyOf", "AttrIn", "DtypeIn", "MaxSize", "MultipleOf", "Rule", "TargetSpec",
    "TargetSpecError", "UnknownTargetError", "accelerator_platform", "available_targets",
    "compiler_name", "get_platform", "get_target", "load_platform_file", "load_target_file",
    "predicate_rule", "register_target", "unregister_target",
]
