"""Executors that run a plan without TVM: :mod:`.torch_exec` (PyTorch on a CUDA GPU and the host,
or on the CPU alone) and :mod:`.graph_io` (the plain-file bundles that carry graphs and plans to a
machine without TVM)."""
