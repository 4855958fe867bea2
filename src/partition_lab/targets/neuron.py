"""The ``neuron`` targets: an Inferentia-1 accelerator defined by neuron-cc's MXNet operator list.

``neuron`` is the latest list (neuron-cc 1.6.13.0 and later), ``neuron@2020`` the January 2020
compiler (1.0.6801.0) of the field report, before Deconvolution was added, and
``neuron@<release>`` any other release (``neuron@1.2.0.0``). The data, with sources, is in
``data/neuron_mxnet.toml``: for each Relay op, the MXNet ops that produce it and the release that
listed each one. ``image.resize2d`` is decided by its method and attributes (a nearest-neighbour
resize by one integer factor is MXNet ``UpSampling``; bilinear is ``_contrib_BilinearResize2D``,
which no release lists). There are no anchors: any supported op may form a region. fp32 is accepted
(neuron-cc casts it); INT8 and 64-bit tensors are not (release-notes known issues).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..core.pattern_library import PATTERN_NAMES
from ..core.platform import Platform
from ..errors import TargetSpecError, UnknownTargetError
from .base import TargetSpec
from .devices import accelerator_platform
from .rules import ResizeAsUpsampling, Rule, rule_from_dict
from .schema import packaged_data

DATA_FILE = "neuron_mxnet.toml"
#: Releases the target list names (``neuron@2020``); any ``neuron@<release>`` works.
LISTED_VERSIONS = ("2020",)
_VERSION = re.compile(r"^\d+(\.\d+){0,3}$")


def build(version: str = "latest", **options: Any) -> TargetSpec:
    """The neuron target for a neuron-cc release, a date alias (``2020``) or ``latest``.

    Raises UnknownTargetError for a version that is not a neuron-cc release number or alias,
    TargetSpecError for an unknown option.
    """
    if options:
        raise TargetSpecError(f"neuron has no option {', '.join(sorted(options))}; its only "
                              "option is version (a neuron-cc release or alias)")
    data = packaged_data(DATA_FILE)
    release = resolve_version(str(version))
    name = "neuron" if version == "latest" else f"neuron@{version}"
    listed_as_of = _latest_listed(data, release)
    provenance = f"neuron-cc {release}, MXNet ops"
    supported, unsupported = _op_tables(data, name, provenance, release)
    source = data["source"]
    return TargetSpec(
        name,
        description=f"AWS Inferentia-1 through neuron-cc {release}: the Relay ops that TVM's "
                    f"MXNet/ONNX frontends make from neuron-cc's MXNet operator list "
                    f"(as of {listed_as_of['version']}, {listed_as_of['date']})",
        version=release,
        provenance=provenance,
        supported=supported,
        unsupported=unsupported,
        rules=_rules(data, release),
        default_profile="inferentia1",
        options={"version": str(version)},
        factory=build,
        patterns=PATTERN_NAMES,
        sources=[f"{source['repository']}@{source['commit']} {source['path']}",
                 source["url"]],
    )


def platform(spec: TargetSpec) -> Platform:
    """One NeuronCore (BYOC, ``Compiler=neuron`` or ``neuron_<release>``) + the host CPU."""
    return accelerator_platform(spec)


def releases() -> list[str]:
    """Known neuron-cc releases with an MXNet op list, oldest first."""
    return [r["version"] for r in packaged_data(DATA_FILE)["releases"]]


def resolve_version(version: str) -> str:
    """The release number for ``version`` (an alias such as ``2020`` or ``latest``, or a number).

    A number between two listed releases is fine (it gets the older one's list); one before the
    first release, or not a number, raises UnknownTargetError listing what exists.
    """
    data = packaged_data(DATA_FILE)
    aliases: Mapping[str, str] = data["aliases"]
    if version in aliases:
        return aliases[version]
    first = releases()[0]
    if not _VERSION.match(version) or _key(version) < _key(first):
        raise UnknownTargetError(
            f"unknown neuron version {version!r}; use neuron@<alias> with "
            f"{', '.join(aliases)} or neuron@<neuron-cc release>, e.g. {', '.join(releases())}")
    return version


def _key(version: str) -> tuple[int, ...]:
    parts = tuple(int(p) for p in version.split("."))
    return parts + (0,) * (4 - len(parts))


def _latest_listed(data: Mapping[str, Any], release: str) -> Mapping[str, str]:
    return [r for r in data["releases"] if _key(r["version"]) <= _key(release)][-1]


def _op_tables(data: Mapping[str, Any], name: str, provenance: str,
               release: str) -> tuple[dict[str, str], dict[str, str]]:
    """Supported and unsupported Relay ops of ``release``, each with its reason."""
    supported: dict[str, str] = {}
    unsupported: dict[str, str] = {}
    notes = data["notes"]
    for op, producers in data["ops"].items():
        available = [mx for mx, since in producers.items() if _key(since) <= _key(release)]
        note = f"; {notes[op]}" if op in notes else ""
        if available:
            since = min((producers[mx] for mx in available), key=_key)
            supported[op] = (f"{op} is in {name}'s operator list (from MXNet "
                             f"{', '.join(available)}; since neuron-cc {since}){note}")
        else:
            unsupported[op] = (f"{op} is not in {name}'s operator list ({provenance}): "
                               f"{_added_later(producers)}{note}")
    for op, entry in data["unsupported"].items():
        note = f" ({entry['note']})" if "note" in entry else ""
        unsupported[op] = (f"{op} is not in {name}'s operator list ({provenance}); it comes from "
                           f"{entry['from']}, which no neuron-cc release lists{note}")
    return supported, unsupported


def _added_later(producers: Mapping[str, str]) -> str:
    """'Deconvolution was added in neuron-cc 1.2.0.0' (grouped by release)."""
    by_release: dict[str, list[str]] = {}
    for mx, since in sorted(producers.items(), key=lambda item: _key(item[1])):
        by_release.setdefault(since, []).append(mx)
    return "; ".join(f"{' and '.join(ops)} {'was' if len(ops) == 1 else 'were'} added in "
                     f"neuron-cc {since}" for since, ops in by_release.items())


def _rules(data: Mapping[str, Any], release: str) -> list[Rule]:
    """The attribute/dtype rules that hold for ``release`` (a rule's ``before`` bounds it)."""
    rules = []
    for i, raw in enumerate(data["rules"]):
        entry = dict(raw)
        before = entry.pop("before", None)
        if before is not None and _key(release) >= _key(before):
            continue
        rules.append(rule_from_dict(entry, f"{DATA_FILE}: rules[{i}]"))
    # image.resize2d is listed only as MXNet UpSampling (nearest, one integer scale): the method
    # and attributes decide, not the op name.
    rules.append(ResizeAsUpsampling("neuron-resize", frozenset({"image.resize2d"}), "UpSampling",
                                    "neuron-cc", {"linear": "_contrib_BilinearResize2D"}))
    return rules
