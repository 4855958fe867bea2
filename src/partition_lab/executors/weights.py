"""Seeded synthetic weights and inputs, to run a graph where the model's parameters are not
(a bundle carries shapes, not values).

:func:`synthetic_weights` makes every node's weights from a seed and the graph alone (numpy's
generator: the same arrays on any machine), scaled so that activations stay finite in float16;
:func:`sample_inputs` draws the graph's inputs. Then
:func:`~partition_lab.executors.torch_exec.calibrate_batch_norm` sets each batch norm's
statistics to its actual input's, so a deep network stays in range as a trained one does.

>>> weights = synthetic_weights(graph, bindings, seed=0)                  # doctest: +SKIP
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ..core.graph import OpGraph, OpNode, TensorType
from .graph_io import ArgRef, Bindings


def synthetic_weights(graph: OpGraph, bindings: Bindings, seed: int = 0
                      ) -> dict[int, list[np.ndarray]]:
    """Random weights for every node, reproducible from ``seed`` and the graph alone.

    Each node's stream is seeded by ``(seed, node id)``, so the same graph gives the same
    weights on any machine (numpy's generator, not torch's). Scales keep activations finite in
    float16: convolution kernels He-initialised from their fan-in, batch norm with gamma near
    1, beta and mean near 0 and variance 1
    (see :func:`~partition_lab.executors.torch_exec.calibrate_batch_norm`), other constants
    near 1 (multipliers, divisors) or near 0 (biases, addends); dense and matmul weights with
    variance 1/fan-in.
    """
    return {node.id: synthetic_node_weights(node, refs, seed)
            for node, refs in zip(graph.nodes, bindings, strict=True) if node.weights}


def synthetic_node_weights(node: OpNode, refs: Sequence[ArgRef], seed: int = 0
                           ) -> list[np.ndarray]:
    """One node's weights as :func:`synthetic_weights` makes them (stream ``(seed, node.id)``)."""
    rng = np.random.default_rng([seed, node.id])
    return [_synthetic_array(node, position, node.args[position], rng)
            for position, ref in enumerate(refs) if ref.kind == "weight"]


def sample_inputs(graph: OpGraph, seed: int = 0) -> dict[str, np.ndarray]:
    """Standard-normal graph inputs from ``seed``, drawn as ``partition_lab.zoo.sample_inputs``
    draws them (one generator, inputs in order), so both give the same arrays."""
    rng = np.random.default_rng(seed)
    return {name: rng.standard_normal(t.spec.shape).astype(t.spec.dtype)
            for name, t in graph.graph_inputs.items()}


def _synthetic_array(node: OpNode, position: int, spec: TensorType,
                     rng: np.random.Generator) -> np.ndarray:
    shape = spec.shape
    fixed = _fixed_argument(node, position)
    if fixed is not None:
        return np.full(shape, fixed, dtype="float32" if spec.dtype == "bfloat16" else spec.dtype)
    if not spec.dtype.startswith(("float", "bfloat")):
        return np.zeros(shape, dtype=spec.dtype)
    dtype = "float32" if spec.dtype == "bfloat16" else spec.dtype
    matrix = node.op.startswith("nn.conv") or node.op in ("nn.dense", "nn.matmul", "nn.batch_matmul")
    if matrix and position == 1:
        # He init where a ReLU follows (convolutions); variance-preserving 1/fan_in for matrix
        # products, which often follow each other with no activation (100 chained matmuls).
        gain = 2.0 if node.op.startswith("nn.conv") else 1.0
        fan_in = _fan_in(node, shape)
        return (rng.standard_normal(shape) * math.sqrt(gain / fan_in)).astype(dtype)
    if node.op == "nn.batch_norm":
        # gamma, beta, mean, var
        value = {1: 1.0 + 0.1 * rng.standard_normal(shape), 2: 0.1 * rng.standard_normal(shape),
                 3: 0.1 * rng.standard_normal(shape), 4: np.ones(shape)}.get(position)
        if value is not None:
            return np.asarray(value).astype(dtype)
    if node.op in ("nn.layer_norm", "nn.instance_norm", "nn.group_norm") and position == 1:
        return (1.0 + 0.1 * rng.standard_normal(shape)).astype(dtype)
    if node.op in ("multiply", "divide", "power"):
        return rng.uniform(0.5, 1.5, shape).astype(dtype)
    if node.op == "add" and math.prod(shape) == 1:
        # a scalar added is mostly a norm's epsilon before a (r)sqrt: positive, or RMSNorm's
        # sqrt(mean(x^2) + eps) is NaN wherever a random eps is below -mean(x^2)
        return np.abs(0.1 * rng.standard_normal(shape)).astype(dtype)
    return (0.1 * rng.standard_normal(shape)).astype(dtype)


def _fixed_argument(node: OpNode, position: int) -> float | None:
    """Scalar arguments that random values would make meaningless: what the frontends write
    (arange from 0 by 1; box_nms: score threshold 0, no output limit, IoU threshold 0.5; a
    scalar exponent 2)."""
    if node.op == "arange":
        return {0: 0.0, 1: float(node.outputs[0].shape[0]), 2: 1.0}.get(position)
    if node.op == "vision.get_valid_counts" and position == 1:
        return 0.0
    if node.op == "vision.non_max_suppression":
        return {3: -1.0, 4: 0.5}.get(position)
    if node.op == "power" and position == 1 and math.prod(node.args[1].shape) == 1:
        return 2.0  # a scalar exponent (RMSNorm's x^2): a random one makes x^0.7 of x < 0 NaN
    return None


def _fan_in(node: OpNode, shape: tuple[int, ...]) -> int:
    if node.op in ("nn.conv2d", "nn.conv1d", "nn.conv3d"):
        layout = node.attrs.get("kernel_layout") or "OIHW"
        out_axis = layout.index("O") if "O" in layout else 0
        return max(1, math.prod(shape) // max(shape[out_axis], 1))
    if node.op.endswith("_transpose"):
        layout = node.attrs.get("kernel_layout") or "IOHW"
        in_axis = layout.index("I") if "I" in layout else 0
        return max(1, math.prod(shape) // max(shape[in_axis], 1))
    if node.op == "nn.batch_matmul":
        transpose_b = node.attrs.get("transpose_b", True)
        return shape[-1] if transpose_b else shape[-2]
    return shape[-1]


__all__ = ["sample_inputs", "synthetic_node_weights", "synthetic_weights"]
