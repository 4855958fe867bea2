"""The op -> PyTorch kernel table of the plan executor.

:data:`KERNELS` maps a Relay op name to its :class:`Kernel`. Importing this package fills it:
:mod:`.tensor_ops` (elementwise, shape, reductions, matrix, convolution, normalisation, pooling,
resizing) and :mod:`.index_ops` (shape-like, index and sort ops, detection post-processing).
:func:`check_kernels` raises :class:`UnsupportedKernelError` listing every op of a graph that has
no kernel, or whose attribute values its kernel does not take, before anything runs (an op is
never skipped); :func:`kernel` registers a new one. ``tests/executors/test_torch_exec.py`` checks that every
op of the zoo and evaluation models on every built-in platform has a kernel.

>>> from partition_lab.executors.kernels import supported_ops
>>> "nn.conv2d" in supported_ops()
True
"""

from . import index_ops, tensor_ops  # noqa: F401  (they register their kernels)
from .registry import (
    HALF_DTYPES,
    KERNELS,
    TORCH_DTYPES,
    Kernel,
    UnsupportedKernelError,
    check_kernels,
    kernel,
    node_problem,
    supported_ops,
    unsupported_nodes,
)

__all__ = [
    "HALF_DTYPES", "KERNELS", "Kernel", "TORCH_DTYPES", "UnsupportedKernelError",
    "check_kernels", "kernel", "node_problem", "supported_ops", "unsupported_nodes",
]
