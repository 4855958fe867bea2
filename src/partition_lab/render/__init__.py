"""Draw a PartitionPlan with graphviz: regions per device, the cuts between them, and why ops
are not on a more preferred device.

The drawing answers the questions an engineer asks of a partition:

* which ops run together on which device: one cluster per region off the host, coloured by its
  device (Tensor Core regions, regions on a GPU's CUDA cores, an NPU's, a DSP's...); host ops are
  grey and dashed, outside every cluster. The header lists every device the plan uses with its
  colour, its role (BYOC, main target, host) and its op count;
* what every cut costs: an edge that leaves its domain (memory space, precision) is red and
  labelled with the tensor's type, its size and the predicted copy time (one label per tensor per
  destination domain, because the copy is paid once there);
* why an op is not on a more preferred device: a short reason under the op's name (the verdict of
  the device that rejected it, or the strategy's reason for moving it), the full text in the SVG
  tooltip. Summaries group these reasons by the rejecting device's rule, or by the strategy's
  reason; a reason never names a region that is not drawn.

A graph of more than :data:`COLLAPSE_ABOVE` ops is drawn collapsed by default: each region becomes
one summary node (op histogram, op count, predicted time) and the edges between regions are
aggregated. The output is deterministic: the same plan and cost give byte-identical DOT.

>>> from partition_lab import OpGraphBuilder, TensorType, Verdict, synthetic
>>> b = OpGraphBuilder("tiny")
>>> x = b.input("x", TensorType((1, 8), "float32"))
>>> y = b.op("nn.relu", [b.op("nn.dense", [x])])
>>> graph = b.build(outputs=[y])
>>> verdicts = [Verdict(True, "in the op table"), Verdict(False, "relu: not in the op table")]
>>> support = synthetic.one_accelerator(verdicts, "neuron")
>>> plan = synthetic.plan_on(graph, support, "greedy", [0])
>>> "cluster_accel0" in draw(plan).source
True

The package is split by job: :mod:`.view` (what each region, op and cut shows: colours, reasons,
cuts, header lines), :mod:`.dot` (the DOT graph from a view) and :mod:`.graphviz` (running
``dot``, writing files atomically, drawings side by side). :mod:`.html` writes the interactive
view (``.html``: pan, zoom, search, regions that expand on click) for plans of any size, laid
out by :mod:`.layered` instead of graphviz.
"""

from .dot import COLLAPSE_ABOVE, CUT_COLOUR, draw
from .graphviz import FORMATS, render_source, write, write_atomic, write_side_by_side
from .html import write_html
from .view import (
    TARGET_COLOURS,
    device_colours,
    format_bytes,
    format_time,
    role_text,
    target_colours,
)

__all__ = [
    "COLLAPSE_ABOVE", "CUT_COLOUR", "FORMATS", "TARGET_COLOURS", "device_colours", "draw",
    "format_bytes", "format_time", "render_source", "role_text", "target_colours", "write",
    "write_atomic", "write_html", "write_side_by_side",
]
