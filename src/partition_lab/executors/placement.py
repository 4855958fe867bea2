"""Where a run keeps each tensor and in which dtype.

:func:`places_of` maps every plan device to a :class:`Place` (a torch device, and whether half
tensors are computed in float32 there) by its memory space and precision; devices of one place
share tensors for free. :func:`compute_dtype` and :func:`wire_dtype` say which dtype a tensor is
computed in on a device and crosses between devices in; :func:`transfer` is the move itself
(cast to the wire dtype where the tensor is, copy, cast to the destination's compute dtype).

>>> from partition_lab.targets import get_platform
>>> places = places_of(get_platform("tensorcore"), device="cuda")
>>> compute_dtype("float16", places["cpu"].torch_device), wire_dtype("float16")
(torch.float32, 'float16')
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch

from ..core.platform import AS_PREPARED, Platform
from ..errors import PartitionLabError
from .kernels import HALF_DTYPES, TORCH_DTYPES, UnsupportedKernelError

DTYPE_MODES = ("graph", "float32")


# ---------------------------------------------------------------------------- dtype policy
def wire_dtype(graph_dtype: str, mode: str = "graph") -> str:
    """The dtype a tensor of ``graph_dtype`` crosses between devices in.

    The graph's own dtype (float16 tensors cost float16 bytes), except in ``"float32"`` mode,
    the reference run, where half tensors cross as float32 so that no copy rounds them.
    """
    return "float32" if mode == "float32" and graph_dtype in HALF_DTYPES else graph_dtype


def compute_dtype(graph_dtype: str, device: str, mode: str = "graph",
                  precision: str = AS_PREPARED) -> torch.dtype:
    """The torch dtype a tensor of ``graph_dtype`` is computed in on torch ``device``.

    float16/bfloat16 stay as they are on CUDA in ``"graph"`` mode and become float32 on the CPU,
    in ``"float32"`` mode and on a plan device whose ``precision`` is ``"float32"``.
    """
    if mode not in DTYPE_MODES:
        raise PartitionLabError(f"dtype must be one of {DTYPE_MODES}, not {mode!r}")
    if graph_dtype in HALF_DTYPES and (mode == "float32" or precision == "float32"
                                       or not device.startswith("cuda")):
        return torch.float32
    try:
        return TORCH_DTYPES[graph_dtype]
    except KeyError:
        raise UnsupportedKernelError(f"no torch dtype for {graph_dtype!r}") from None


# ---------------------------------------------------------------------------- places
@dataclass(frozen=True)
class Place:
    """Where a run keeps tensors: a torch device, and whether half tensors are computed in
    float32 there.

    Every plan device maps to one place: its memory space gives the torch device (the host's
    memory -> ``"cpu"``, any other -> the executor's GPU), its precision the float32 flag. Devices
    of one place share tensors for free (Tensor Core and CUDA-core regions on one GPU); a tensor
    that leaves its place is copied and/or cast once per destination place.
    """

    name: str
    torch_device: str
    float32: bool
    memory: str

    def dtype(self, graph_dtype: str) -> torch.dtype:
        """The torch dtype a tensor of ``graph_dtype`` is computed in here."""
        if graph_dtype in HALF_DTYPES and self.float32:
            return torch.float32
        try:
            return TORCH_DTYPES[graph_dtype]
        except KeyError:
            raise UnsupportedKernelError(f"no torch dtype for {graph_dtype!r}") from None


def places_of(platform: Platform, *, device: str = "cuda", dtype: str = "graph",
              device_map: Mapping[str, str] | None = None,
              separate_memories: bool = False) -> dict[str, Place]:
    """The place of each device of ``platform`` (by device name).

    ``device_map`` maps a memory space to a torch device (default: the host's memory ->
    ``"cpu"``, every other memory -> ``device``). A device computes half tensors in float32 when
    its precision is ``"float32"`` (the host of ``tensorcore``), on the CPU (PyTorch's CPU
    float16 kernels are slow or missing) and in ``dtype="float32"`` mode. Devices whose torch
    device and float32 flag agree share a place, unless ``separate_memories``: then each
    (memory space, precision) domain of the platform is its own place, even where two share a
    torch device, so crossings are exactly :meth:`PartitionPlan.crossing_tensors`.

    >>> from partition_lab.targets import get_platform
    >>> places = places_of(get_platform("tensorcore"), device="cuda")
    >>> places["tensorcore"] == places["cuda"], places["cpu"].torch_device
    (True, 'cpu')
    """
    if dtype not in DTYPE_MODES:
        raise PartitionLabError(f"dtype must be one of {DTYPE_MODES}, not {dtype!r}")
    mapping = dict(device_map or {})
    memories = {d.memory for d in platform.devices}
    unknown = sorted(set(mapping) - memories)
    if unknown:
        raise PartitionLabError(f"device_map names memory spaces {unknown} that platform "
                                f"{platform.name!r} does not have ({', '.join(sorted(memories))})")
    host_memory = platform.host.memory
    places: dict[str, Place] = {}
    for d in platform.devices:
        torch_device = mapping.get(d.memory) or ("cpu" if d.memory == host_memory else device)
        on_gpu = not torch_device.startswith("cpu")
        float32 = dtype == "float32" or d.precision == "float32" or not on_gpu
        if separate_memories:
            name = d.memory if d.precision == AS_PREPARED else f"{d.memory}:{d.precision}"
        else:
            usual = dtype == "float32" or not on_gpu
            name = torch_device if float32 == usual else f"{torch_device}:float32"
        places[d.name] = Place(name, torch_device, float32, d.memory)
    return places


def single_place(device: str, dtype: str) -> Place:
    """The place of every tensor of a run without a plan (the unpartitioned reference)."""
    on_gpu = not device.startswith("cpu")
    return Place(device, device, dtype == "float32" or not on_gpu, "device" if on_gpu else "host")


def transfer(tensor: torch.Tensor, device: str, wire_dtype: str,
             dst_dtype: torch.dtype, *, copy: bool = False) -> torch.Tensor:
    """Move ``tensor`` to ``device`` as the executor does: cast to the graph's dtype
    (``wire_dtype``) where it is, copy from pageable host memory (what TVM's runtime copies
    from), then cast to the destination's compute dtype there. Synchronous, like ``cudaMemcpy``.

    ``copy``: the tensor changes memory space even if ``device`` is its own torch device (the
    CPU stand-in of a plan's copies): a real copy is made.
    """
    wire = TORCH_DTYPES[wire_dtype]
    moved = tensor.to(wire).to(device)
    if copy and moved is tensor:
        moved = tensor.clone()
    return moved if moved.dtype == dst_dtype else moved.to(dst_dtype)


__all__ = [
    "DTYPE_MODES", "Place", "compute_dtype", "places_of", "single_place", "transfer", "wire_dtype",
]
