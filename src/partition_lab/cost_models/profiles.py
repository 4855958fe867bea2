"""Hardware profiles: the numbers behind the roofline cost model, kept as TOML data files.

A profile file (``profiles/<name>.toml``, schema ``partition_lab.profile/1``) describes one device.
Every number is a table ``{ value = ..., unit = "...", source = "..." }`` so that a reader can
check where it came from (a datasheet, a field-report measurement, a measurement on this
machine, or a stated assumption)::

    schema = "partition_lab.profile/1"
    name = "t4"
    kind = "accel"                      # or "cpu"
    title = "NVIDIA T4 (Turing), TVM CUDA backend"

    [figures]
    matrix_flops      = { value = 65e12, unit = "FLOP/s", source = "..." }
    vector_flops      = { value = 8.1e12, unit = "FLOP/s", source = "..." }
    memory_bandwidth  = { value = 320e9, unit = "B/s", source = "..." }
    matrix_efficiency = { value = 0.55, unit = "1", source = "..." }
    vector_efficiency = { value = 0.6, unit = "1", source = "..." }
    data_efficiency   = { value = 0.6, unit = "1", source = "..." }
    op_overhead       = { value = 5e-6, unit = "s", source = "..." }
    region_overhead   = { value = 2e-5, unit = "s", source = "..." }

    [host_link]                          # accelerators only: the copy path to the host
    name = "PCIe Gen3 x16"
    bandwidth = { value = 12e9, unit = "B/s", source = "..." }   # per direction
    latency   = { value = 1e-5, unit = "s", source = "..." }

Optional figures: ``float_bytes`` (the device computes float32 tensors in a 2-byte type, so
on-device traffic halves), and ``[achieved_matrix_flops]`` with one figure per dtype that replaces
``matrix_flops * matrix_efficiency`` for that dtype (a CPU without native fp16 math).
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from .._io import check_regular_file
from ..errors import ProfileError

SCHEMA = "partition_lab.profile/1"
_REQUIRED = ("matrix_flops", "vector_flops", "memory_bandwidth", "matrix_efficiency",
             "vector_efficiency", "data_efficiency", "op_overhead", "region_overhead")
_OPTIONAL = ("float_bytes",)
_RATIOS = ("matrix_efficiency", "vector_efficiency", "data_efficiency")

# The sane range of each kind of figure, so that a typo or a hostile file (a bandwidth of 5e-324 is
# finite and positive) cannot make a roofline price NaN or infinity: a device slower than a
# megaflop or a megabyte per second, a fixed cost over ten seconds, an efficiency under 0.1%, is
# a mistake in the file, not hardware.
_FLOPS = (1e6, 1e18, "FLOP/s")
_BYTES_PER_S = (1e6, 1e16, "B/s")
_SECONDS = (0.0, 10.0, "s")
_RANGES: dict[str, tuple[float, float, str]] = {
    "matrix_flops": _FLOPS, "vector_flops": _FLOPS, "memory_bandwidth": _BYTES_PER_S,
    "matrix_efficiency": (1e-3, 1.0, ""), "vector_efficiency": (1e-3, 1.0, ""),
    "data_efficiency": (1e-3, 1.0, ""), "op_overhead": _SECONDS, "region_overhead": _SECONDS,
    "float_bytes": (0.125, 8.0, "bytes"), "achieved_matrix_flops": _FLOPS,
    "bandwidth": _BYTES_PER_S, "latency": _SECONDS,
}


@dataclass(frozen=True)
class Figure:
    """One number of a profile, with its unit and where it came from."""

    value: float
    unit: str
    source: str


@dataclass(frozen=True)
class LinkProfile:
    """A copy path between host and device: ``latency + bytes / bandwidth`` per direction."""

    name: str
    bandwidth: float
    latency: float
    figures: Mapping[str, Figure] = field(default_factory=dict)

    def transfer_time(self, nbytes: float) -> float:
        return self.latency + nbytes / self.bandwidth


#: No copy at all (a "device" that is the host itself).
NO_LINK = LinkProfile("none (same memory)", math.inf, 0.0)


@dataclass(frozen=True)
class HardwareProfile:
    """One device's roofline numbers (see the module docstring for the file format)."""

    name: str
    kind: str
    title: str
    figures: Mapping[str, Figure]
    achieved_matrix_flops: Mapping[str, Figure] = field(default_factory=dict)
    host_link: LinkProfile | None = None
    path: str = ""

    def value(self, key: str) -> float:
        return self.figures[key].value

    @property
    def matrix_flops(self) -> float:
        return self.value("matrix_flops")

    @property
    def vector_flops(self) -> float:
        return self.value("vector_flops")

    @property
    def memory_bandwidth(self) -> float:
        return self.value("memory_bandwidth")

    @property
    def op_overhead(self) -> float:
        return self.value("op_overhead")

    @property
    def region_overhead(self) -> float:
        return self.value("region_overhead")

    @property
    def float_bytes(self) -> float | None:
        figure = self.figures.get("float_bytes")
        return figure.value if figure else None

    def efficiency(self, op_class: str) -> float:
        return self.value(f"{op_class}_efficiency")


def available_profiles() -> list[str]:
    """Names of the profiles shipped with the package (``profiles/*.toml``)."""
    folder = resources.files(__package__) / "profiles"
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".toml"))


def load_profile(name_or_path: str | Path) -> HardwareProfile:
    """Load a shipped profile by name (``"t4"``) or any profile file by path.

    Raises
    ------
    ProfileError
        If no such profile exists (the message lists the shipped ones) or the file is malformed
        (the message names the key).

    >>> load_profile("t4").kind
    'accel'
    """
    if not isinstance(name_or_path, (str, Path)):
        raise ProfileError(f"a hardware profile is a name or a path, got "
                           f"{type(name_or_path).__name__}; available: "
                           f"{', '.join(available_profiles())}")
    text, where = _read(name_or_path)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ProfileError(f"{where}: not valid TOML: {err}") from None
    except RecursionError:  # the parser recurses once per nested array or inline table
        raise ProfileError(f"{where}: arrays or tables nest too deeply; a profile is flat "
                           "tables of figures (see the shipped profiles)") from None
    return _parse(data, where)


def _read(name_or_path: str | Path) -> tuple[str, str]:
    path = Path(name_or_path)
    looks_like_path = isinstance(name_or_path, Path) or path.suffix == ".toml" or "/" in str(
        name_or_path)
    if looks_like_path:
        check_regular_file(path, "profile file", ProfileError)  # a FIFO would block forever
        if not path.is_file():
            raise ProfileError(f"profile file {path} does not exist")
        try:
            return path.read_text(encoding="utf-8"), str(path)
        except (OSError, UnicodeDecodeError) as err:
            raise ProfileError(f"profile file {path} cannot be read as UTF-8 text: {err}") from None
    name = str(name_or_path)
    if name not in available_profiles():
        raise ProfileError(f"no hardware profile named {name!r}; available: "
                           f"{', '.join(available_profiles())} (or give a path to a .toml file)")
    resource = resources.files(__package__) / "profiles" / f"{name}.toml"
    return resource.read_text(encoding="utf-8"), f"profile {name!r}"


def _parse(data: Mapping[str, Any], where: str) -> HardwareProfile:
    if data.get("schema") != SCHEMA:
        raise ProfileError(f"{where}: 'schema' must be {SCHEMA!r}, got {data.get('schema')!r}")
    name, kind = _string(data, "name", where), _string(data, "kind", where)
    if kind not in ("accel", "cpu"):
        raise ProfileError(f"{where}: 'kind' must be 'accel' or 'cpu', got {kind!r}")
    raw = data.get("figures")
    if not isinstance(raw, Mapping):
        raise ProfileError(f"{where}: missing [figures] table")
    unknown = set(raw) - set(_REQUIRED) - set(_OPTIONAL)
    if unknown:
        raise ProfileError(f"{where}: unknown figure(s) {sorted(unknown)}; known: "
                           f"{', '.join(_REQUIRED + _OPTIONAL)}")
    figures = {}
    for key in _REQUIRED:
        if key not in raw:
            raise ProfileError(f"{where}: missing figure 'figures.{key}'")
        figures[key] = _figure(raw[key], f"{where}: figures.{key}", key, ratio=key in _RATIOS,
                               may_be_zero=key.endswith("overhead"))
    for key in _OPTIONAL:
        if key in raw:
            figures[key] = _figure(raw[key], f"{where}: figures.{key}", key)
    achieved = data.get("achieved_matrix_flops", {})
    if not isinstance(achieved, Mapping):
        raise ProfileError(f"{where}: [achieved_matrix_flops] must be a table dtype -> figure")
    achieved = {str(dtype): _figure(value, f"{where}: achieved_matrix_flops.{dtype}",
                                    "achieved_matrix_flops")
                for dtype, value in achieved.items()}
    link = _link(data.get("host_link"), where) if kind == "accel" else None
    if kind == "accel" and link is None:
        raise ProfileError(f"{where}: an accelerator profile needs a [host_link] table")
    return HardwareProfile(name, kind, str(data.get("title", name)), figures, achieved, link,
                           where)


def _link(raw: Any, where: str) -> LinkProfile | None:
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise ProfileError(f"{where}: [host_link] must be a table")
    figures = {key: _figure(raw.get(key), f"{where}: host_link.{key}", key,
                            may_be_zero=key == "latency")
               for key in ("bandwidth", "latency")}
    return LinkProfile(_string(raw, "name", f"{where}: host_link"), figures["bandwidth"].value,
                       figures["latency"].value, figures)


def _figure(raw: Any, where: str, key: str, *, ratio: bool = False,
            may_be_zero: bool = False) -> Figure:
    if not isinstance(raw, Mapping) or "value" not in raw:
        raise ProfileError(f"{where}: expected {{ value = <number>, unit = ..., source = ... }}")
    value = raw["value"]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ProfileError(f"{where}: value must be a finite number, got {value!r}")
    if value < 0 or (value == 0 and not may_be_zero):
        raise ProfileError(f"{where}: value must be {'>= 0' if may_be_zero else '> 0'}, "
                           f"got {value}")
    if ratio and value > 1:
        raise ProfileError(f"{where}: an efficiency is a fraction in (0, 1], got {value}")
    low, high, unit = _RANGES[key]
    if not (low <= value <= high or (may_be_zero and value == 0)):
        raise ProfileError(f"{where}: value {value:g} is outside the sane range [{low:g}, "
                           f"{high:g}]{' ' + unit if unit else ''}; fix the figure (a wrong "
                           "exponent or unit?)")
    source = raw.get("source")
    if not isinstance(source, str) or not source.strip():
        raise ProfileError(f"{where}: every figure needs a 'source' saying where it comes from")
    return Figure(float(value), str(raw.get("unit", "")), source.strip())


def _string(data: Mapping[str, Any], key: str, where: str) -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value:
        raise ProfileError(f"{where}: missing or empty string {key!r}")
    return value
