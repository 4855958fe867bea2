"""Synthetic operator graphs and support verdicts for tests and benchmarks (no TVM needed).

Every generator returns an :class:`~partition_lab.core.graph.OpGraph` with realistic op names, shapes,
weights and FLOP counts, so the cost models see sensible numbers. Randomness always takes a seed.

>>> g = layered_dag(200, seed=1)
>>> len(g), g[0].op
(200, 'nn.conv2d')
>>> verdicts = random_verdicts(g, seed=1, unsupported=0.1)
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Mapping, Sequence

from .core.graph import OpGraph, OpGraphBuilder, TensorType
from .core.ops import MAC_OPS  # noqa: F401  (re-exported: tests use synthetic.MAC_OPS)
from .core.plan import PartitionPlan
from .core.platform import HOST, one_accelerator_platform
from .core.reasons import Reason
from .core.support import Support, Verdict

Handle = tuple

# ---------------------------------------------------------------------------- op helpers
class _Net:
    """A builder that tracks shapes and adds conv/bn/relu... nodes with their FLOPs."""

    def __init__(self, name: str, dtype: str = "float32") -> None:
        self.b = OpGraphBuilder(name)
        self.dtype = dtype
        self.shape: dict[Handle, tuple[int, ...]] = {}

    def input(self, name: str, shape: tuple[int, ...]) -> Handle:
        h = self.b.input(name, TensorType(shape, self.dtype))
        self.shape[h] = shape
        return h

    def _add(self, op: str, args: Sequence[Handle], shape: tuple[int, ...], *, flops: float,
             weights: Sequence[tuple[int, ...]] = (), attrs: dict | None = None,
             name: str | None = None, source_name: str | None = None) -> Handle:
        out = TensorType(shape, self.dtype)
        h = self.b.op(op, list(args), outputs=[out], flops=flops,
                      weights=[TensorType(w, self.dtype) for w in weights], attrs=attrs,
                      name=name, source_name=source_name)
        self.shape[h] = shape
        return h

    def conv(self, x: Handle, channels: int, kernel: int = 3, stride: int = 1, **kw) -> Handle:
        n, c, h, w = self.shape[x]
        oh, ow = max(1, math.ceil(h / stride)), max(1, math.ceil(w / stride))
        out = (n, channels, oh, ow)
        flops = 2.0 * n * channels * oh * ow * c * kernel * kernel
        attrs = {"channels": channels, "kernel_size": (kernel, kernel),
                 "strides": (stride, stride), "padding": (kernel // 2,) * 4, "groups": 1,
                 "data_layout": "NCHW", "kernel_layout": "OIHW"}
        return self._add("nn.conv2d", [x], out, flops=flops,
                         weights=[(channels, c, kernel, kernel)], attrs=attrs, **kw)

    def deconv(self, x: Handle, channels: int, kernel: int = 4, stride: int = 2, **kw) -> Handle:
        n, c, h, w = self.shape[x]
        out = (n, channels, h * stride, w * stride)
        flops = 2.0 * n * c * h * w * channels * kernel * kernel
        attrs = {"channels": channels, "kernel_size": (kernel, kernel),
                 "strides": (stride, stride), "groups": 1, "data_layout": "NCHW"}
        return self._add("nn.conv2d_transpose", [x], out, flops=flops,
                         weights=[(c, channels, kernel, kernel)], attrs=attrs, **kw)

    def bn(self, x: Handle, **kw) -> Handle:
        shape = self.shape[x]
        c = shape[1]
        # Relay's batch_norm also returns mean and var; no consumer uses them, so one output.
        return self._add("nn.batch_norm", [x], shape, flops=4.0 * math.prod(shape),
                         weights=[(c,)] * 4, attrs={"axis": 1, "epsilon": 1e-5}, **kw)

    def unary(self, op: str, x: Handle, **kw) -> Handle:
        shape = self.shape[x]
        return self._add(op, [x], shape, flops=float(math.prod(shape)), **kw)

    def binary(self, op: str, x: Handle, y: Handle, **kw) -> Handle:
        shape = self.shape[x]
        return self._add(op, [x, y], shape, flops=float(math.prod(shape)), **kw)

    def pool(self, x: Handle, stride: int = 2, op: str = "nn.max_pool2d") -> Handle:
        n, c, h, w = self.shape[x]
        out = (n, c, max(1, h // stride), max(1, w // stride))
        return self._add(op, [x], out, flops=9.0 * math.prod(out),
                         attrs={"pool_size": (3, 3), "strides": (stride, stride)})

    def global_pool(self, x: Handle) -> Handle:
        n, c, h, w = self.shape[x]
        return self._add("nn.global_avg_pool2d", [x], (n, c, 1, 1), flops=float(n * c * h * w))

    def flatten(self, x: Handle) -> Handle:
        shape = self.shape[x]
        return self._add("nn.batch_flatten", [x], (shape[0], math.prod(shape[1:])), flops=0.0)

    def dense(self, x: Handle, units: int) -> Handle:
        n, k = self.shape[x]
        return self._add("nn.dense", [x], (n, units), flops=2.0 * n * units * k,
                         weights=[(units, k)], attrs={"units": units})

    def matmul(self, x: Handle, size: int) -> Handle:
        n, k = self.shape[x]
        # MXNet dot(x, w, transpose_b=True) -> nn.dense in Relay (see the field report).
        return self._add("nn.dense", [x], (n, size), flops=2.0 * n * size * k,
                         weights=[(size, k)], attrs={"units": size})

    def concat(self, xs: Sequence[Handle]) -> Handle:
        n, _, h, w = self.shape[xs[0]]
        c = sum(self.shape[x][1] for x in xs)
        return self._add("concatenate", xs, (n, c, h, w), flops=0.0, attrs={"axis": 1})

    def build(self, outputs: Iterable[Handle]) -> OpGraph:
        return self.b.build(outputs=list(outputs))


# ---------------------------------------------------------------------------- generators
def layered_dag(n_ops: int, *, width: int = 8, max_fan_in: int = 2, reach: int = 2,
                channels: int = 64, size: int = 28, seed: int = 0,
                name: str | None = None) -> OpGraph:
    """A random layered DAG of CNN ops, ``width`` nodes per layer, ``n_ops`` nodes in all.

    Each node takes 1..``max_fan_in`` inputs from the previous ``reach`` layers, preferring a
    tensor of the previous layer that nothing consumes yet (so, as in a real network, almost
    every tensor is used); one-input nodes are conv2d / batch_norm / relu / other elementwise
    ops, two-input nodes are ``add`` (shapes stay ``(1, channels, size, size)`` so any two
    tensors can meet). The nodes nothing consumes are the outputs.
    """
    rng = random.Random(seed)
    net = _Net(name or f"layered{n_ops}")
    x = net.input("data", (1, channels, size, size))
    layers: list[list[Handle]] = [[x]]
    used: set[Handle] = set()
    count = 0
    while count < n_ops:
        layer = []
        for _ in range(min(width, n_ops - count)):
            pool = [h for prev in layers[-reach:] for h in prev]
            args = rng.sample(pool, min(len(pool), rng.randint(1, max_fan_in)))
            unused = [h for h in layers[-1] if h not in used and h not in args]
            if unused and args[0] in used:
                args[0] = rng.choice(unused)  # consume every tensor, like a real network
            used.update(args)
            layer.append(_random_op(net, rng, args))
            count += 1
        layers.append(layer)
    return net.build([h for layer in layers[1:] for h in layer if h not in used])


def _random_op(net: _Net, rng: random.Random, args: list[Handle]) -> Handle:
    if len(args) >= 2:
        return net.binary("add", args[0], args[1])
    kind = rng.random()
    if kind < 0.3:
        return net.conv(args[0], net.shape[args[0]][1], kernel=rng.choice((1, 3)))
    if kind < 0.55:
        return net.bn(args[0])
    if kind < 0.85:
        return net.unary("nn.relu", args[0])
    return net.unary(rng.choice(("sigmoid", "tanh", "exp")), args[0])


def random_dag(n_ops: int, *, seed: int = 0, max_fan_in: int = 2, window: int = 4,
               size: int = 64) -> OpGraph:
    """A small random DAG of mixed ops on ``(1, size)`` tensors; the sinks are the outputs.

    Node ``v`` takes 1..``max_fan_in`` inputs among the ``window`` nodes before it (or the graph
    input); ops are dense (a MAC op), relu, tanh, add, concatenate.
    """
    rng = random.Random(seed)
    b = OpGraphBuilder(f"random{n_ops}_{seed}")
    spec = TensorType((1, size), "float32")
    handles: list[Handle] = [b.input("x", spec)]
    used: set[Handle] = set()
    for _ in range(n_ops):
        pool = handles[max(0, len(handles) - window):]
        args = rng.sample(pool, min(len(pool), rng.randint(1, max_fan_in)))
        used.update(args)
        if len(args) >= 2:
            op = rng.choice(("add", "concatenate"))
            h = b.op(op, args, outputs=[spec], flops=float(size))
        else:
            op = rng.choice(("nn.dense", "nn.relu", "tanh"))
            mac = op == "nn.dense"
            h = b.op(op, args, outputs=[spec], flops=2.0 * size * size if mac else float(size),
                     weights=[TensorType((size, size), "float32")] if mac else ())
        handles.append(h)
    return b.build(outputs=[h for h in handles[1:] if h not in used])


def chain(ops: Sequence[str], *, shape: tuple[int, ...] = (1, 64, 28, 28),
          name: str = "chain", dtype: str = "float32") -> OpGraph:
    """A straight chain of the given ops (conv2d / conv2d_transpose / dense keep the shape)."""
    net = _Net(name, dtype)
    x = net.input("data", shape)
    for op in ops:
        if op == "nn.conv2d":
            x = net.conv(x, shape[1])
        elif op == "nn.conv2d_transpose":
            x = net.deconv(x, shape[1], kernel=3, stride=1)
        elif op == "nn.batch_norm":
            x = net.bn(x)
        else:
            x = net.unary(op, x)
    return net.build([x])


def diamond(*, branches: int = 2, depth: int = 2, shape: tuple[int, ...] = (1, 64, 28, 28),
            name: str = "diamond") -> OpGraph:
    """conv -> ``branches`` parallel branches of ``depth`` (conv, relu) -> add chain -> relu."""
    net = _Net(name)
    x = net.conv(net.input("data", shape), shape[1])
    ends = []
    for _ in range(branches):
        y = x
        for _ in range(depth):
            y = net.unary("nn.relu", net.conv(y, shape[1]))
        ends.append(y)
    y = ends[0]
    for other in ends[1:]:
        y = net.binary("add", y, other)
    return net.build([net.unary("nn.relu", y)])


def simple_pose_like(*, backbone_blocks: int = 4, name: str = "simple_pose_like") -> OpGraph:
    """A SimplePose-ResNet-like chain: conv backbone, then 3 x (deconv, BN, ReLU), then a 1x1 conv.

    Shapes follow ``simple_pose_resnet152_v1b`` at 224x224 (backbone out 2048x7x7, deconvs to
    256 channels at 14, 28, 56, 17 heatmaps). With neuron@2020 (no Deconvolution) greedy gives
    4 accelerator regions: the backbone, two BatchNorm+ReLU-only regions, and BN+ReLU+conv.
    Node source names follow MXNet's (``batchnormcudnnoff0_fwd``, ``relu0_fwd``...).
    """
    net = _Net(name)
    x = net.input("data", (1, 3, 224, 224))
    x = net.unary("nn.relu", net.bn(net.conv(x, 64, kernel=7, stride=2)))
    x = net.pool(x)
    stages = [(256, 1), (512, 2), (1024, 2), (2048, 2)]
    for channels, stride in stages[:max(1, backbone_blocks)]:
        y = net.bn(net.conv(x, channels // 4, kernel=1))
        y = net.bn(net.conv(net.unary("nn.relu", y), channels // 4, kernel=3, stride=stride))
        y = net.bn(net.conv(net.unary("nn.relu", y), channels, kernel=1))
        shortcut = net.bn(net.conv(x, channels, kernel=1, stride=stride))
        x = net.unary("nn.relu", net.binary("add", y, shortcut))
    for i in range(3):
        x = net.deconv(x, 256, source_name=f"deconvolution{i}_fwd")
        x = net.bn(x, source_name=f"batchnormcudnnoff{i}_fwd")
        x = net.unary("nn.relu", x, source_name=f"relu{i}_fwd")
    x = net.conv(x, 17, kernel=1, source_name="conv_final_fwd")
    return net.build([x])


def matmul_chain(count: int = 100, size: int = 1024, dtype: str = "float16",
                 name: str | None = None) -> OpGraph:
    """``count`` chained ``size`` x ``size`` matmuls (the field report's fp16 benchmark)."""
    net = _Net(name or f"matmul{size}x{count}", dtype=dtype)
    x = net.input("a", (size, size))
    for _ in range(count):
        x = net.matmul(x, size)
    return net.build([x])


def resnet_v1(depths: Sequence[int] = (3, 8, 36, 3), *, image: int = 224, classes: int = 1000,
              name: str | None = None) -> OpGraph:
    """A ResNet-v1 with bottleneck blocks (``(3, 8, 36, 3)`` is ResNet-152) at batch 1, fp32."""
    net = _Net(name or f"resnet{sum(depths) * 3 + 2}_v1")
    x = net.input("data", (1, 3, image, image))
    x = net.pool(net.unary("nn.relu", net.bn(net.conv(x, 64, kernel=7, stride=2))))
    for stage, blocks in enumerate(depths):
        width = 64 * 2 ** stage
        for block in range(blocks):
            stride = 2 if block == 0 and stage > 0 else 1
            y = net.unary("nn.relu", net.bn(net.conv(x, width, kernel=1)))
            y = net.unary("nn.relu", net.bn(net.conv(y, width, kernel=3, stride=stride)))
            y = net.bn(net.conv(y, width * 4, kernel=1))
            if block == 0:
                x = net.bn(net.conv(x, width * 4, kernel=1, stride=stride))
            x = net.unary("nn.relu", net.binary("add", y, x))
    x = net.dense(net.flatten(net.global_pool(x)), classes)
    return net.build([x])


# ---------------------------------------------------------------------------- verdicts
def verdicts_by_op(graph: OpGraph, unsupported: Iterable[str] = (), *,
                   anchors: Iterable[str] = (), target: str = "accel") -> list[Verdict]:
    """Support by op name: ops in ``unsupported`` are rejected; ``anchors`` are anchor ops."""
    rejected, anchor_ops = set(unsupported), set(anchors)
    return [
        Verdict(False, f"{node.op} is not supported by {target}", "op-table")
        if node.op in rejected else
        Verdict(True, f"{node.op} is in the {target} op table", "op-table",
                anchor=node.op in anchor_ops)
        for node in graph
    ]


def random_verdicts(graph: OpGraph, *, seed: int = 0, unsupported: float = 0.2,
                    anchored: bool = False) -> list[Verdict]:
    """Each op unsupported with probability ``unsupported``; with ``anchored``, MAC ops anchor."""
    rng = random.Random(seed)
    out = []
    for node in graph:
        if rng.random() < unsupported:
            out.append(Verdict(False, f"{node.op} rejected at random (seed {seed})", "random"))
        else:
            out.append(Verdict(True, "supported at random", "random",
                               anchor=anchored and node.op in MAC_OPS))
    return out


# ---------------------------------------------------------------------------- platforms
def one_accelerator(verdicts: Sequence[Verdict], name: str = "acc") -> Support:
    """Support on a platform of one accelerator ``name`` (with ``verdicts``) + the host."""
    return Support.with_host(one_accelerator_platform(name), {name: list(verdicts)})


def plan_on(graph: OpGraph, support: Support, strategy: str, on_accelerator: Iterable[int],
            reasons: Mapping[int, Reason | str] | None = None) -> PartitionPlan:
    """The plan that puts ``on_accelerator`` on ``support``'s most preferred accelerator and
    every other node on the host (a hand-made plan to compare strategies with)."""
    accelerated = set(on_accelerator)
    primary = support.platform.primary.name
    devices = [primary if n in accelerated else HOST for n in range(len(graph))]
    return PartitionPlan.from_devices(graph, support, strategy, devices, reasons)
