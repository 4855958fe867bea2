"""TVM's own BYOC backends as targets: ``tvm:tensorrt``, ``tvm:cutlass``, ``tvm:cublas``,
``tvm:cudnn``, ``tvm:nnapi``, ``tvm:coreml``, ``tvm:hipblas``.

* :mod:`.backends`: where each backend's pattern table and ``partition_for_*`` live;
* :mod:`.matching`: what the table takes in a module (TVM's ``FuseOpsByPattern``, checks traced);
* :mod:`.target`: the target (a verdict with a reason per op, a unit per composite) and its
  platform, registered as the ``tvm:`` family of :mod:`partition_lab.targets.registry`;
* :mod:`.form`: a plan's partitioned module in the form the backend's ``partition_for_*``
  leaves, written by TVM's own passes (the Relax adapter's outline for ``tvm:`` platforms);
* :mod:`.oracle`: what ``partition_for_*`` itself offloads (what greedy is tested against).
"""

from __future__ import annotations

from ...targets.registry import register_family
from .backends import BACKENDS, backend, partition_for
from .target import TvmBackendTarget, build, platform, remember

register_family("tvm", build, platform)

__all__ = ["BACKENDS", "TvmBackendTarget", "backend", "build", "partition_for", "platform",
           "remember"]
