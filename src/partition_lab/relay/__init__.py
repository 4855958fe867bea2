"""The TVM Relay adapter: everything that touches TVM.

* :mod:`.frontends`: ONNX, MXNet, PyTorch (``nn.Module``, ``.pt2``) and Relay text -> Relay
  modules;
* :mod:`.relay_graph`: a Relay module -> the core :class:`~partition_lab.core.graph.OpGraph`;
* :mod:`.passes`: prepare (layout, precision), annotate (support per device), outline (plan ->
  partitioned Relay), and TVM's own partitioning chain as a reference for tests and benchmarks;
* :mod:`.runtime`: region-by-region execution with TVM's llvm backend (the stand-in for
  accelerator compilers here); per-op timing with TVM is
  :mod:`partition_lab.profiling.tvm_runners`.

Importing this package does not import TVM; its modules do.
"""
