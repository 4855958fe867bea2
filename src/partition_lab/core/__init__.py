"""The IR-neutral core: the op graph, platforms and their devices, plans, regions, the op vocabulary.

Nothing here imports TVM or PyTorch, or any other package of ours but ``errors``: strategies, cost models, drawings and the executors work on
these types, and a machine without TVM (the GPU machine) reads plans with them.

* :mod:`.graph`: :class:`~.graph.OpGraph`, the DAG of ops with shapes, dtypes, FLOPs and bytes;
* :mod:`.ops`: the op vocabulary shared by every layer (matrix, data-movement and MAC ops);
* :mod:`.verdicts`: :class:`~.verdicts.Verdict`, the ``Target`` protocol (a device's op rules);
* :mod:`.platform`: :class:`~.platform.Platform`, :class:`~.platform.Device`, links, the host;
* :mod:`.support`: :class:`~.support.Support`, every (op, device) verdict of a platform;
* :mod:`.reasons`: :class:`~.reasons.Reason`, :class:`~.reasons.ReasonCode`, ``Decision``;
* :mod:`.plan`: :class:`~.plan.PartitionPlan` (regions, decisions, serialisation);
* :mod:`.regions`: cycle-safe region formation with TVM's ``MergeCompilerRegions`` semantics.
"""
