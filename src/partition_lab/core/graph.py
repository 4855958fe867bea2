"""OpGraph: an IR-neutral DAG of operators.

This is what targets, strategies, cost models and drawings consume. It holds no TVM objects, so
everything downstream of it runs (and is tested) without TVM. ``partition_lab.relay.relay_graph`` builds
one from a Relay function; tests and benchmarks build synthetic ones with :class:`OpGraphBuilder`.

Model of the graph
------------------
* A node is one operator call (``nn.conv2d``, ``add``...). Relay's ``Tuple`` and
  ``TupleGetItem`` are not nodes: a tuple-producing call (``nn.batch_norm``, ``split``) is one node
  with several outputs, and a consumer of a tuple lists the tuple's fields as its inputs.
* Node ids are dense integers ``0..n-1`` in a topological order (producers before consumers).
* A :class:`Tensor` is one output of one node, or one graph input. Edges of the networkx graph
  run producer -> consumer; an edge carries the indices of the producer outputs it uses.
* Constants and parameters (weights) are not tensors between nodes; their size is counted in
  the consuming node's ``weight_bytes`` because an accelerator keeps them resident.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import networkx as nx

DTYPE_BYTES = {
    "float64": 8, "float32": 4, "float16": 2, "bfloat16": 2,
    "int64": 8, "int32": 4, "int16": 2, "int8": 1, "uint8": 1, "bool": 1,
    "uint64": 8, "uint32": 4, "uint16": 2, "int4": 0.5, "uint4": 0.5,
}


@dataclass(frozen=True)
class TensorType:
    """Static shape and dtype of a tensor."""

    shape: tuple[int, ...]
    dtype: str

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> float:
        return self.numel * DTYPE_BYTES.get(self.dtype, 4)

    def __str__(self) -> str:
        return f"{self.dtype}[{','.join(map(str, self.shape))}]"


@dataclass(frozen=True)
class OpNode:
    """One operator call.

    ``inputs`` are the tensors that come from other nodes or graph inputs (what may need a copy
    between devices); ``weights`` are constant arguments (kept resident on the device); ``args``
    are all call arguments in call order, tuples flattened, so that rules can read positional
    operands (``args[0]`` data, ``args[1]`` kernel of a conv2d) whatever their kind. ``attrs``
    are the Relay call attributes as plain Python values (str, int, float, bool, tuples).
    ``flops`` counts multiply and add separately (a MAC is 2 FLOPs).

    ``name`` is unique in its graph: the source node name (ONNX/MXNet) where that is unique,
    otherwise ``"<op>_<id>"``. ``source_name`` is the name the model file gave the node (what
    ``excl_node_names`` matches), or None.
    """

    id: int
    op: str
    name: str
    source_name: str | None
    inputs: tuple[TensorType, ...]
    outputs: tuple[TensorType, ...]
    weights: tuple[TensorType, ...] = ()
    attrs: Mapping[str, Any] = field(default_factory=dict)
    flops: float = 0.0
    args: tuple[TensorType, ...] = ()

    @property
    def input_bytes(self) -> float:
        return sum(t.nbytes for t in self.inputs)

    @property
    def output_bytes(self) -> float:
        return sum(t.nbytes for t in self.outputs)

    @property
    def weight_bytes(self) -> float:
        return sum(t.nbytes for t in self.weights)

    @property
    def bytes_moved(self) -> float:
        """Bytes read and written by the op: activations in, weights in, results out."""
        return self.input_bytes + self.weight_bytes + self.output_bytes


@dataclass(frozen=True)
class Tensor:
    """A value that flows between nodes: one output of a node, or a graph input.

    ``producer`` is None for a graph input (``input_name`` is then set). ``consumers`` are node
    ids, each listed once. ``is_output`` says the tensor is (part of) the graph's result, so it
    must reach the host.
    """

    key: str
    spec: TensorType
    producer: int | None
    index: int
    consumers: tuple[int, ...]
    is_output: bool
    input_name: str | None = None

    @property
    def nbytes(self) -> float:
        return self.spec.nbytes


class OpGraph:
    """A DAG of :class:`OpNode` plus the tensors between them. Immutable once built."""

    def __init__(
        self,
        nodes: Sequence[OpNode],
        edges: Iterable[tuple[int, int, int]],
        graph_inputs: Mapping[str, tuple[TensorType, Sequence[int]]],
        outputs: Sequence[tuple[int, int]],
        name: str = "",
        exporter: str = "",
    ) -> None:
        """Build from nodes (ids must be ``0..n-1`` in topological order) and edges.

        ``edges`` are ``(producer, output_index, consumer)``; ``graph_inputs`` maps an input
        name to its type and consumer ids; ``outputs`` lists the ``(node, output_index)`` pairs
        that form the graph's result. ``name`` is the model's name; ``exporter`` says what wrote
        the graph it was read from (``torch.onnx (dynamo, opset 18, optimizer off; torch
        2.5.1)``, :mod:`.provenance`), "" where unknown.
        """
        self.name = name
        self.exporter = exporter
        self.nodes: tuple[OpNode, ...] = tuple(nodes)
        for i, node in enumerate(self.nodes):
            if node.id != i:
                raise ValueError(f"node ids must be dense and ordered; node {i} has id {node.id}")
        self.nx = nx.DiGraph()
        self.nx.add_nodes_from(range(len(self.nodes)))
        consumers: dict[tuple[int, int], list[int]] = {}
        for producer, index, consumer in edges:
            if not producer < consumer:
                raise ValueError(f"edge {producer}->{consumer} is not in topological order")
            if self.nx.has_edge(producer, consumer):
                self.nx.edges[producer, consumer]["indices"] += (index,)
            else:
                self.nx.add_edge(producer, consumer, indices=(index,))
            uses = consumers.setdefault((producer, index), [])
            if consumer not in uses:
                uses.append(consumer)
        self.outputs: tuple[tuple[int, int], ...] = tuple(outputs)
        output_set = set(self.outputs)
        tensors: list[Tensor] = []
        for input_name, (spec, users) in graph_inputs.items():
            tensors.append(Tensor(f"input:{input_name}", spec, None, 0,
                                  tuple(dict.fromkeys(users)), False, input_name))
        for node in self.nodes:
            for index, spec in enumerate(node.outputs):
                users = tuple(consumers.get((node.id, index), ()))
                is_output = (node.id, index) in output_set
                if users or is_output:
                    tensors.append(Tensor(f"{node.name}:{index}", spec, node.id, index,
                                          users, is_output))
        self.tensors: tuple[Tensor, ...] = tuple(tensors)
        self.graph_inputs = {t.input_name: t for t in tensors if t.producer is None}
        self._by_name = {node.name: node.id for node in self.nodes}
        self._tensors_by_producer: dict[int, list[Tensor]] = {}
        for tensor in tensors:
            if tensor.producer is not None:
                self._tensors_by_producer.setdefault(tensor.producer, []).append(tensor)

    def __len__(self) -> int:
        return len(self.nodes)

    def __iter__(self) -> Iterator[OpNode]:
        return iter(self.nodes)

    def __getitem__(self, node_id: int) -> OpNode:
        return self.nodes[node_id]

    def __repr__(self) -> str:
        return f"OpGraph({self.name!r}, {len(self.nodes)} ops, {len(self.tensors)} tensors)"

    def predecessors(self, node_id: int) -> list[int]:
        return list(self.nx.predecessors(node_id))

    def successors(self, node_id: int) -> list[int]:
        return list(self.nx.successors(node_id))

    def reads_from_outside(self, nodes: Sequence[int]
                           ) -> list[tuple[tuple[int, int] | str, TensorType]]:
        """The tensors ``nodes`` read that are produced outside them, each once, in the order of
        ``nodes``: a node output as ``(node, index)``, a graph input by its name (what a region
        outlined as a function takes as parameters)."""
        members = set(nodes)
        found: dict[tuple[int, int] | str, TensorType] = {}
        for node in nodes:
            for pred in self.predecessors(node):
                if pred not in members:
                    for index in self.nx.edges[pred, node]["indices"]:
                        found.setdefault((pred, index), self[pred].outputs[index])
            for tensor in self.graph_inputs.values():
                if node in tensor.consumers:
                    found.setdefault(tensor.input_name, tensor.spec)
        return list(found.items())

    def node_by_name(self, name: str) -> OpNode:
        """The node whose unique ``name`` is ``name`` (KeyError if none)."""
        return self.nodes[self._by_name[name]]

    def nodes_with_source_name(self, source_name: str) -> list[OpNode]:
        """Nodes whose ``source_name`` (or unique ``name``) equals ``source_name``."""
        return [n for n in self.nodes if source_name in (n.source_name, n.name)]

    def op_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for node in self.nodes:
            counts[node.op] = counts.get(node.op, 0) + 1
        return dict(sorted(counts.items()))

    def tensors_of(self, node_id: int) -> list[Tensor]:
        """Output tensors of a node that are used (by a node or as a graph output)."""
        return list(self._tensors_by_producer.get(node_id, ()))


class OpGraphBuilder:
    """Incremental construction of an OpGraph, for synthetic graphs in tests and benchmarks.

    >>> b = OpGraphBuilder("tiny")
    >>> x = b.input("x", TensorType((1, 8), "float32"))
    >>> y = b.op("nn.relu", [x])
    >>> g = b.build(outputs=[y])
    """

    def __init__(self, name: str = "") -> None:
        self.name = name
        self._nodes: list[OpNode] = []
        self._edges: list[tuple[int, int, int]] = []
        self._inputs: dict[str, tuple[TensorType, list[int]]] = {}

    def input(self, name: str, spec: TensorType) -> tuple[str, str]:
        self._inputs[name] = (spec, [])
        return ("input", name)

    def op(
        self,
        op: str,
        args: Sequence[tuple[Any, Any]],
        *,
        outputs: Sequence[TensorType] | None = None,
        name: str | None = None,
        source_name: str | None = None,
        weights: Sequence[TensorType] = (),
        attrs: Mapping[str, Any] | None = None,
        flops: float = 0.0,
    ) -> tuple[int, int]:
        """Add a node consuming ``args`` (handles returned earlier); returns a handle to output 0.

        ``outputs`` defaults to one tensor shaped like the first argument.
        """
        node_id = len(self._nodes)
        input_types = []
        for handle in args:
            kind, key = handle
            if kind == "input":
                spec, users = self._inputs[key]
                users.append(node_id)
            else:
                producer, index = kind, key
                spec = self._nodes[producer].outputs[index]
                self._edges.append((producer, index, node_id))
            input_types.append(spec)
        if outputs is None:
            outputs = [input_types[0] if input_types else TensorType((1,), "float32")]
        self._nodes.append(OpNode(
            id=node_id, op=op, name=name or f"{op}_{node_id}", source_name=source_name,
            inputs=tuple(input_types), outputs=tuple(outputs), weights=tuple(weights),
            attrs=dict(attrs or {}), flops=flops,
            args=tuple(input_types) + tuple(weights),
        ))
        return (node_id, 0)

    def output(self, handle: tuple[int, int], index: int) -> tuple[int, int]:
        """Handle to output ``index`` of the node behind ``handle``."""
        return (handle[0], index)

    def build(self, outputs: Sequence[tuple[int, int]] | None = None) -> OpGraph:
        if outputs is None:
            outputs = [(len(self._nodes) - 1, 0)] if self._nodes else []
        return OpGraph(self._nodes, self._edges, self._inputs, outputs, self.name)
