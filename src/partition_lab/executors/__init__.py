"""Executors that run a plan without TVM.

:mod:`.torch_exec` runs a plan with PyTorch on a CUDA GPU and the host, or on the CPU alone
(:class:`~.torch_exec.PlanExecutor`, :func:`~.torch_exec.run_plan`). It uses :mod:`.kernels`
(the op -> PyTorch kernel table), :mod:`.placement` (where each tensor lives, in which dtype,
and the copies between places) and :mod:`.benchmark` (timing records, one op timed alone);
:mod:`.turns` times any runners end to end in turns (torch-free: TVM-built plans use it too);
:mod:`.weights` makes seeded synthetic weights and inputs. :mod:`.graph_io` reads and writes the
plain-file bundles that carry graphs and plans to a machine without TVM. Importing this package
imports neither torch nor TVM.
"""
