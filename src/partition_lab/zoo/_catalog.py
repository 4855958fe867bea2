"""The zoo's models: what each one is, why it is here, and how to build it (full and small)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import UnknownModelError
from ._typos import unknown_model_message

GLUONCV = "gluoncv model_zoo"
WRITTEN_HERE = "written here"
REPORT_001 = "field report 001 (Inferentia / neuron-cc)"
REPORT_000 = "field report 000 (TVM Tensor Core conv2d)"
#: How an evaluation model's story starts: plans are checked on code nobody here wrote.
EVALUATION_MODEL = "evaluation model, not written here"
FRONTENDS = ("mxnet", "onnx")
#: The packages that build a model, by its ``built_with``.
NEEDS = {"mxnet": ("mxnet", "gluoncv"), "torch": ("torch", "torchvision", "onnxscript"),
         "transformers": ("torch", "transformers", "onnxscript")}


@dataclass(frozen=True)
class ZooEntry:
    """One zoo model: shapes, provenance, and which field report or case it illustrates.

    ``input_shapes``/``dtype`` describe the full-size model and ``small_input_shapes`` the
    small variant (``small`` says how it is reduced) used by fast tests.
    """

    name: str
    description: str
    input_shapes: Mapping[str, tuple[int, ...]]
    dtype: str
    source: str
    story: str
    small: str
    small_input_shapes: Mapping[str, tuple[int, ...]]
    #: Relay op counts of the full model, through either frontend (checked by the tests).
    expected_ops: Mapping[str, int] = field(default_factory=dict)
    #: The same for the small variant.
    small_expected_ops: Mapping[str, int] = field(default_factory=dict)
    #: Op counts (both sizes) that hold through the MXNet frontend only: mxnet.onnx rewrites
    #: these ops (LayerNorm into its arithmetic, batch_dot into Transpose + MatMul).
    mxnet_only_ops: Mapping[str, int] = field(default_factory=dict)
    #: An evaluation model: plans are checked on it, the default test suite builds
    #: only its small variant. :func:`partition_lab.zoo.names` lists the others.
    evaluation: bool = False
    #: The frontends that convert the model; ``frontend_note`` says why one is missing.
    frontends: tuple[str, ...] = FRONTENDS
    frontend_note: str = ""
    #: What builds the model's files: "mxnet" (Gluon blocks, exported to ONNX by mxnet.onnx),
    #: "torch" (torchvision modules) or "transformers" (Hugging Face models built from their
    #: configs), both exported by torch.onnx with module-path node names.
    built_with: str = "mxnet"
    #: For token-id inputs (an integer ``dtype``): ids are drawn below this, a size that both
    #: variants' vocabularies hold.
    vocabulary: int = 0
    #: For a torchvision build: the gluoncv model of the same architecture it stands in for
    #: where MXNet does not install (see :data:`TORCHVISION_TWINS`).
    twin_of: str = ""

    @property
    def needs(self) -> tuple[str, ...]:
        """The packages that build the model's files (the cached ONNX file loads without)."""
        return NEEDS[self.built_with]

    @property
    def exported_by_torch(self) -> bool:
        """Whether its files come from a PyTorch module (so it can be exported again at other
        input shapes, see :func:`partition_lab.zoo.load`)."""
        return self.built_with in ("torch", "transformers")

    def shapes(self, small: bool) -> Mapping[str, tuple[int, ...]]:
        """Input shapes of the full model or of the small variant."""
        return self.small_input_shapes if small else self.input_shapes

    def op_counts(self, small: bool, frontend: str) -> dict[str, int]:
        """The Relay op counts the model must have through ``frontend`` ("mxnet"/"onnx")."""
        counts = dict(self.small_expected_ops if small else self.expected_ops)
        if frontend == "mxnet":
            counts.update(self.mxnet_only_ops)
        return counts


#: ``builder(small) -> HybridBlock`` (not initialised; the zoo seeds and initialises it).
Builder = Callable[[bool], Any]


def _image(batch: int = 1, size: int = 224) -> dict[str, tuple[int, ...]]:
    return {"data": (batch, 3, size, size)}


ENTRIES: dict[str, ZooEntry] = {
    entry.name: entry
    for entry in [
        ZooEntry(
            "resnet152_v1", "ResNet-152 v1 image classifier", _image(), "float32", GLUONCV,
            f"{REPORT_001}: image classification, 9.30 ms on Inferentia vs 9.38 ms on V100",
            "ResNetV1 with one bottleneck per stage, widths 16/64/128/256/512, 64x64 input",
            _image(1, 64), {"nn.conv2d": 155, "nn.dense": 1}, {"nn.conv2d": 17, "nn.dense": 1},
        ),
        ZooEntry(
            "resnet50_v1", "ResNet-50 v1 image classifier at batch 1", _image(), "float32", GLUONCV,
            f"{REPORT_000}: at batch 1 no conv2d can use the Tensor Core template",
            "ResNetV1 with one bottleneck per stage, widths 16/64/128/256/512, 64x64 input",
            _image(1, 64), {"nn.conv2d": 53, "nn.dense": 1}, {"nn.conv2d": 17, "nn.dense": 1},
        ),
        ZooEntry(
            "resnet50_v1_b32", "ResNet-50 v1 image classifier at batch 32", _image(32), "float32",
            GLUONCV,
            f"{REPORT_000}: batch 32 NHWC conv2d is Tensor Core eligible (1.69x over cuDNN)",
            "the small ResNet above at batch 8 (still a Tensor Core multiple), 32x32 input",
            _image(8, 32), {"nn.conv2d": 53, "nn.dense": 1}, {"nn.conv2d": 17, "nn.dense": 1},
        ),
        ZooEntry(
            "fcn_resnet101_ade", "FCN on a dilated ResNet-101 (ADE20K, 150 classes), with aux head",
            {"data": (1, 3, 200, 200)}, "float32", GLUONCV,
            f"{REPORT_001}: two _contrib_BilinearResize2D left on the CPU: 227.8 ms, 13.0 ms "
            "without them",
            "two-stage ResNet with gluoncv's FCN and aux heads, 8 classes, 64x64 input; still "
            "two resizes",
            {"data": (1, 3, 64, 64)},
            {"nn.conv2d": 110, "image.resize2d": 2}, {"nn.conv2d": 11, "image.resize2d": 2},
        ),
        ZooEntry(
            "simple_pose_resnet152_v1b", "SimplePose (ResNet-152 v1b backbone, 3 deconvolutions)",
            _image(), "float32", GLUONCV,
            f"{REPORT_001}: Deconvolution unsupported, 4 accelerator subgraphs, two of them only "
            "BatchNorm+ReLU; excluding them (excl_node_names) went 38.7 ms -> 32.0 ms",
            "narrow ResNetV1 (widths 8..64, one block per stage) with gluoncv's deconv head "
            "(3 x Deconvolution+BN+ReLU, 16 filters), 64x64 input",
            _image(1, 64),
            {"nn.conv2d": 156, "nn.conv2d_transpose": 3},
            {"nn.conv2d": 13, "nn.conv2d_transpose": 3},
        ),
        ZooEntry(
            "tiny_yolo_v2", "Tiny YOLO v2 (VOC, 13x13x125 output), no NMS",
            {"data": (1, 3, 416, 416)}, "float32", WRITTEN_HERE,
            f"{REPORT_001}: object detection written by hand, NMS left out (unsupported)",
            "same layers with widths 4..32 and one head conv, 64x64 input",
            {"data": (1, 3, 64, 64)},
            {"nn.conv2d": 9, "nn.max_pool2d": 6, "nn.leaky_relu": 8},
            {"nn.conv2d": 8, "nn.max_pool2d": 6, "nn.leaky_relu": 7},
        ),
        ZooEntry(
            "matmul_fp16_x100", "1024x1024 fp16 batch_dot(transpose_b=True), 100 times chained",
            {"data": (1, 1024, 1024)}, "float16", WRITTEN_HERE,
            f"{REPORT_001}: micro-benchmark, 17.1 ms on one NeuronCore (12.55 TOPS), 5.98 ms "
            "on T4; transpose_b=True so that Relay inserts no transpose",
            "64x64 fp16, 4 times chained",
            {"data": (1, 64, 64)},
            {"nn.batch_matmul": 100}, {"nn.batch_matmul": 4}, {"transpose": 0, "reshape": 0},
        ),
        ZooEntry(
            "mobilenetv2_1.0", "MobileNet v2, width 1.0", _image(), "float32", GLUONCV,
            "depthwise convolutions and relu6 (clip): ops that target tables treat differently",
            "width multiplier 0.25, stem + first four inverted residual blocks + tail, 10 "
            "classes, 64x64 input", _image(1, 64),
            {"nn.conv2d": 53, "clip": 35}, {"nn.conv2d": 14, "clip": 9},
        ),
        ZooEntry(
            "densenet201", "DenseNet-201", _image(), "float32", GLUONCV,
            "stress test for region merging (TVM MergeCompilerRegions takes ~21 s)",
            "DenseNet with 16 initial features, growth 8, blocks (2, 2); 56x56 input, so that "
            "DenseNet's fixed 7x7 average pool sees a 7x7 map",
            _image(1, 56),
            {"nn.conv2d": 200, "concatenate": 98}, {"nn.conv2d": 10, "concatenate": 4},
        ),
        ZooEntry(
            "bert_encoder", "one BERT-base encoder layer: hidden 768, 12 heads, FFN 3072, seq 128",
            {"data": (1, 128, 768)}, "float32", WRITTEN_HERE,
            "a transformer layer (LayerNorm, GELU, softmax, batch_dot) next to the CNNs",
            "one layer, hidden 64, 4 heads, FFN 128, seq 16", {"data": (1, 16, 64)},
            {"nn.batch_matmul": 2, "nn.dense": 6, "nn.softmax": 1, "erf": 1},
            {"nn.batch_matmul": 2, "nn.dense": 6, "nn.softmax": 1, "erf": 1},
            {"nn.layer_norm": 2},
        ),
    ]
}

#: Evaluation models: gluoncv models nobody here wrote, random weights, no download.
#: Full size they are built only by bench scripts; tests use the small variants.
EVALUATION: dict[str, ZooEntry] = {
    entry.name: entry
    for entry in [
        ZooEntry(
            "ssd_512_resnet50_v1_voc", "SSD 512 on ResNet-50 v1 (VOC), decoders and box_nms",
            _image(1, 512), "float32", GLUONCV,
            f"{EVALUATION_MODEL}: a detector whose post-processing (box decoding, per-class scores, "
            "non-maximum suppression) no accelerator table supports",
            "gluoncv's SSD block (anchors, predictors, decoders, box_nms) on a stem + two "
            "ResNet blocks + one expander stage, 3 anchor layers, 3 classes, 64x64 input",
            _image(1, 64),
            {"nn.conv2d": 73, "vision.non_max_suppression": 1},
            {"nn.conv2d": 15, "vision.non_max_suppression": 1},
            evaluation=True, frontends=("mxnet",),
            frontend_note="mxnet.onnx exports box_nms as NonMaxSuppression with data-dependent "
            "shapes (ScatterND, GatherND on Shape); TVM's ONNX frontend fails in DynamicToStatic "
            "(int64 slice end out of int32 range) and the result would not be static",
        ),
        ZooEntry(
            "yolo3_darknet53_voc", "YOLOv3 on Darknet-53 (VOC), box decoding and box_nms",
            _image(1, 416), "float32", GLUONCV,
            f"{EVALUATION_MODEL}: the report's tiny YOLO left NMS out; this one keeps it, with the "
            "decoding (sigmoid, exp, anchor grids) and nearest upsampling written as repeat",
            "gluoncv's YOLOV3 block on a DarknetV3 with one residual block per stage (widths "
            "8..256), detection blocks of 32/16/8 channels, 3 classes, 64x64 input",
            _image(1, 64),
            {"nn.conv2d": 75, "repeat": 4, "vision.non_max_suppression": 1},
            {"nn.conv2d": 39, "repeat": 4, "vision.non_max_suppression": 1},
            evaluation=True, frontends=("mxnet",),
            frontend_note="as for SSD: mxnet.onnx's NonMaxSuppression export has data-dependent "
            "shapes and TVM's ONNX frontend fails in DynamicToStatic (int64 slice end out of "
            "int32 range)",
        ),
        ZooEntry(
            "center_net_resnet18_v1b_voc", "CenterNet on a deconvolution ResNet-18 v1b (VOC)",
            _image(1, 512), "float32", GLUONCV,
            f"{EVALUATION_MODEL}: an anchor-free detector: three deconvolutions, then heatmap "
            "max-pool NMS, topk and gather_nd decoding (integer index arithmetic)",
            "gluoncv's CenterNet block and DeconvResnet head on a narrow ResNet (widths "
            "8..32), deconvolutions of 16 filters, 3 classes, topk 10, 64x64 input",
            _image(1, 64),
            {"nn.conv2d": 29, "nn.conv2d_transpose": 3, "topk": 1, "gather_nd": 4},
            {"nn.conv2d": 21, "nn.conv2d_transpose": 3, "topk": 1, "gather_nd": 4},
            evaluation=True,
        ),
        ZooEntry(
            "deeplab_resnet50_ade", "DeepLabV3 on a dilated ResNet-50 (ADE20K), with aux head",
            _image(1, 480), "float32", GLUONCV,
            f"{EVALUATION_MODEL}: a segmenter: ASPP's dilated convolutions, global-pool branch and "
            "three resizes",
            "two-stage ResNet with ASPP (gluoncv's dilated-conv and pooling branches, width 16), "
            "FCN aux head, 8 classes, 64x64 input",
            _image(1, 64),
            {"nn.conv2d": 65, "image.resize2d": 3}, {"nn.conv2d": 17, "image.resize2d": 3},
            evaluation=True,
        ),
        ZooEntry(
            "alpha_pose_resnet101_v1b_coco",
            "AlphaPose: FastSE-ResNet-101 (squeeze-excitation) with DUC pixel-shuffle head",
            {"data": (1, 3, 320, 256)}, "float32", GLUONCV,
            f"{EVALUATION_MODEL}: a pose model whose upsampling is reshape/transpose (pixel shuffle) "
            "and whose SE blocks pool, dense and broadcast inside every stage",
            "gluoncv's AlphaPose block and DUC head on a FastSEResNet with one SE bottleneck per "
            "stage (planes 4..32), 64x64 input",
            _image(1, 64),
            {"nn.conv2d": 107, "nn.dense": 8}, {"nn.conv2d": 20, "nn.dense": 8},
            evaluation=True,
        ),
        ZooEntry(
            "danet_resnet50_citys",
            "DANet on a dilated ResNet-50 (Cityscapes): position and channel self-attention",
            _image(1, 480), "float32", GLUONCV,
            f"{EVALUATION_MODEL}: the transformer-like one: self-attention over all 3600 positions "
            "(batch_matmul + softmax) and over channels, on a CNN backbone",
            "two-stage ResNet with gluoncv's PAM and CAM modules and DANetHead's three outputs, "
            "8 classes, 64x64 input",
            _image(1, 64),
            {"nn.conv2d": 65, "nn.batch_matmul": 4, "nn.softmax": 2},
            {"nn.conv2d": 17, "nn.batch_matmul": 4, "nn.softmax": 2},
            evaluation=True,
        ),
    ]
}
ENTRIES.update(EVALUATION)

TORCHVISION_SOURCE = "torchvision (random weights), written here where torchvision has none"
_TV_NOTE = "built with torchvision and exported by torch.onnx; there are no MXNet files"


def _tv(name: str, counterpart: str, description: str, small: str,
        expected: Mapping[str, int], small_expected: Mapping[str, int]) -> ZooEntry:
    """A torchvision build of the zoo model ``counterpart``: its inputs and story."""
    other = ENTRIES[counterpart]
    return ZooEntry(
        f"tv:{name}", description, other.input_shapes, "float32", TORCHVISION_SOURCE,
        f"PyTorch counterpart of {counterpart} (no MXNet needed); {other.story}", small,
        other.small_input_shapes, expected, small_expected, frontends=("onnx",),
        frontend_note=_TV_NOTE, built_with="torch", twin_of=counterpart)


_TV_SMALL_RESNET = "torchvision ResNet with one Bottleneck per stage (widths 64..2048), 10 " \
    "classes, 64x64 input"

#: torchvision builds of zoo models: the zoo where MXNet does not install. Their
#: calls carry PyTorch module paths (``backbone.layer1.0.conv1``) as source names.
TORCHVISION: dict[str, ZooEntry] = {
    entry.name: entry
    for entry in [
        _tv("resnet50", "resnet50_v1", "torchvision ResNet-50 (v1.5) image classifier",
            _TV_SMALL_RESNET, {"nn.conv2d": 53, "nn.dense": 1},
            {"nn.conv2d": 17, "nn.dense": 1}),
        _tv("resnet152", "resnet152_v1", "torchvision ResNet-152 (v1.5) image classifier",
            _TV_SMALL_RESNET, {"nn.conv2d": 155, "nn.dense": 1},
            {"nn.conv2d": 17, "nn.dense": 1}),
        _tv("simple_pose_resnet152", "simple_pose_resnet152_v1b",
            "SimplePose: torchvision ResNet-152 backbone, 3 deconvolutions, 17 heatmaps",
            "torchvision ResNet with one Bottleneck per stage, the deconv head at 16 filters, "
            "64x64 input",
            {"nn.conv2d": 156, "nn.conv2d_transpose": 3},
            {"nn.conv2d": 18, "nn.conv2d_transpose": 3}),
        _tv("fcn_resnet101", "fcn_resnet101_ade",
            "torchvision FCN on a dilated ResNet-101 with aux head, 150 classes",
            "torchvision ResNet with one Bottleneck per stage, dilated like the full one, both "
            "FCN heads, 8 classes, 64x64 input; still two resizes",
            {"nn.conv2d": 108, "image.resize2d": 2}, {"nn.conv2d": 21, "image.resize2d": 2}),
        _tv("mobilenet_v2", "mobilenetv2_1.0", "torchvision MobileNet v2, width 1.0",
            "width multiplier 0.25, all blocks, 10 classes, 64x64 input",
            {"nn.conv2d": 52, "clip": 35}, {"nn.conv2d": 52, "clip": 35}),
    ]
}
TORCHVISION["tv:vit_b_16"] = ZooEntry(
    "tv:vit_b_16", "torchvision ViT-B/16 image classifier (a transformer: LayerNorm, multi-head "
    "attention, GELU)", {"data": (1, 3, 224, 224)}, "float32", TORCHVISION_SOURCE,
    "importers decompose its 25 LayerNorms, 12 attentions and 12 GELUs into primitive ops; "
    "judged op by op, neuron would keep 37 host islands; judged as patterns, it keeps none",
    "32x32 input, patch 16, 2 layers of width 32, 2 heads, 10 classes",
    {"data": (1, 3, 32, 32)},
    {"nn.conv2d": 1, "nn.dense": 49, "nn.batch_matmul": 24, "nn.softmax": 12, "variance": 25,
     "erf": 12},
    {"nn.conv2d": 1, "nn.dense": 9, "nn.batch_matmul": 4, "nn.softmax": 2, "variance": 5,
     "erf": 2}, frontends=("onnx",), frontend_note=_TV_NOTE,
    built_with="torch")
TORCHVISION["tv:swin_t"] = ZooEntry(
    "tv:swin_t", "torchvision Swin-T image classifier (shifted-window attention)",
    {"data": (1, 3, 224, 224)}, "float32", TORCHVISION_SOURCE,
    "its shifted windows build their attention mask with ScatterND (reduction \"none\" at "
    "opset 18), which TVM 0.19 alone cannot convert",
    "32x32 input, embedding 16, two stages of two blocks, window 4, 10 classes",
    {"data": (1, 3, 32, 32)},
    {"nn.conv2d": 1, "nn.dense": 52, "nn.batch_matmul": 24, "nn.softmax": 12, "variance": 29,
     "erf": 12, "scatter_nd": 90},
    {"nn.conv2d": 1, "nn.dense": 18, "nn.batch_matmul": 8, "nn.softmax": 4, "variance": 11,
     "erf": 4, "scatter_nd": 18}, frontends=("onnx",), frontend_note=_TV_NOTE,
    built_with="torch")
TORCHVISION["tv:ssdlite320_mobilenet_v3_large"] = ZooEntry(
    "tv:ssdlite320_mobilenet_v3_large", "torchvision SSDlite320 on MobileNetV3-Large (COCO, 91 "
    "classes) up to decoded boxes and class scores; no post-processing",
    {"data": (1, 3, 320, 320)}, "float32", TORCHVISION_SOURCE,
    "a detector as accelerators run it: torchvision's score filtering, top-k and NMS have shapes "
    "that depend on the scores, which torch.export refuses and partition_lab cannot split "
    "(README, known limitations), so they stay with the caller",
    "the same network with 3 classes, 64x64 input",
    {"data": (1, 3, 64, 64)},
    {"nn.conv2d": 98, "nn.softmax": 1, "exp": 2},
    {"nn.conv2d": 98, "nn.softmax": 1, "exp": 2}, frontends=("onnx",), frontend_note=_TV_NOTE,
    built_with="torch")
TORCHVISION["tv:convnext_tiny"] = ZooEntry(
    "tv:convnext_tiny", "torchvision ConvNeXt-T image classifier (depthwise 7x7 convolutions, "
    "channels-last LayerNorm, GELU MLPs, layer scale)", {"data": (1, 3, 224, 224)}, "float32",
    TORCHVISION_SOURCE,
    "a CNN with a transformer's pieces: importers decompose its 23 LayerNorms (channels last, "
    "between two transposes) and 18 GELUs; judged op by op, neuron would keep 23 host "
    "islands",
    "32x32 input, two stages of one block (widths 16, 32), 10 classes",
    {"data": (1, 3, 32, 32)}, {"nn.conv2d": 22, "nn.dense": 37, "variance": 23, "erf": 18},
    {"nn.conv2d": 4, "nn.dense": 5, "variance": 5, "erf": 2}, frontends=("onnx",), frontend_note=_TV_NOTE,
    built_with="torch")
TORCHVISION["tv:efficientnet_b0"] = ZooEntry(
    "tv:efficientnet_b0", "torchvision EfficientNet-B0 image classifier (MBConv blocks, SiLU, "
    "squeeze-excitation)", {"data": (1, 3, 224, 224)}, "float32", TORCHVISION_SOURCE,
    "SiLU (x * sigmoid(x)) after nearly every convolution and a sigmoid-gated "
    "squeeze-excitation in every block: activations importers write as two ops",
    "64x64 input, width 0.25, two MBConv stages of 1 and 2 blocks, 10 classes",
    {"data": (1, 3, 64, 64)}, {"nn.conv2d": 81, "sigmoid": 65, "nn.dense": 1},
    {"nn.conv2d": 16, "sigmoid": 13, "nn.dense": 1},
    frontends=("onnx",), frontend_note=_TV_NOTE, built_with="torch")
TORCHVISION["tv:deeplabv3_mobilenet_v3_large"] = ZooEntry(
    "tv:deeplabv3_mobilenet_v3_large", "torchvision DeepLabV3 on a dilated MobileNetV3-Large "
    "(21 classes, 520x520)", {"data": (1, 3, 520, 520)}, "float32", TORCHVISION_SOURCE,
    "a segmenter with hard-swish, hard-sigmoid-gated squeeze-excitation, ASPP's dilated and "
    "pooling branches and two bilinear resizes",
    "64x64 input, five inverted residual blocks at width 0.5 (ReLU, hard-swish, SE, one "
    "dilated), ASPP of width 16, 8 classes",
    {"data": (1, 3, 64, 64)}, {"nn.conv2d": 70, "clip": 28, "image.resize2d": 2},
    {"nn.conv2d": 28, "clip": 8, "image.resize2d": 2},
    frontends=("onnx",), frontend_note=_TV_NOTE, built_with="torch")
ENTRIES.update(TORCHVISION)
#: gluoncv model -> its torchvision build, the one-line suggestion where MXNet is missing.
#: resnet50_v1_b32 is ResNet-50 at batch 32: tv:resnet50 exported again at that batch.
TORCHVISION_TWINS: dict[str, str] = {
    **{tv.twin_of: tv.name for tv in TORCHVISION.values() if tv.twin_of},
    "resnet50_v1_b32": "tv:resnet50",
}

HUGGING_FACE_SOURCE = "Hugging Face transformers, built from its config (random weights)"
_HF_NOTE = "built with transformers and exported by torch.onnx; there are no MXNet files"
_HF_SMALL = "configs shrunk to width 32, two layers of two heads, FFN 64, vocabulary 1024, " \
    "sequence 16"

#: Hugging Face transformers builds: ``input_ids`` in, the last hidden state out.
HUGGING_FACE: dict[str, ZooEntry] = {
    entry.name: entry
    for entry in [
        ZooEntry(
            "hf:bert_base", "BERT-base encoder (12 layers, width 768, 12 heads), last hidden "
            "state, sequence 128", {"input_ids": (1, 128)}, "int64", HUGGING_FACE_SOURCE,
            "importers decompose its 25 LayerNorms, 12 attentions (with the NaN guard "
            "torch.export writes after a masked softmax) and 12 GELUs; judged op by op, neuron "
            "would keep 38 host islands",
            _HF_SMALL, {"input_ids": (1, 16)},
            {"nn.dense": 72, "nn.batch_matmul": 24, "nn.softmax": 12, "variance": 25, "erf": 12,
             "take": 3},
            {"nn.dense": 12, "nn.batch_matmul": 4, "nn.softmax": 2, "variance": 5, "erf": 2,
             "take": 2},
            frontends=("onnx",), frontend_note=_HF_NOTE, built_with="transformers",
            vocabulary=1024),
        ZooEntry(
            "hf:distilbert", "DistilBERT-base encoder (6 layers, width 768, 12 heads), last "
            "hidden state, sequence 128", {"input_ids": (1, 128)}, "int64", HUGGING_FACE_SOURCE,
            "BERT's pieces at half the depth: 13 LayerNorms, 6 attentions, 6 GELUs; judged op by "
            "op, neuron would keep 20 host islands",
            _HF_SMALL, {"input_ids": (1, 16)},
            {"nn.dense": 36, "nn.batch_matmul": 12, "nn.softmax": 6, "variance": 13, "erf": 6,
             "take": 2},
            {"nn.dense": 12, "nn.batch_matmul": 4, "nn.softmax": 2, "variance": 5, "erf": 2,
             "take": 1},
            frontends=("onnx",), frontend_note=_HF_NOTE, built_with="transformers",
            vocabulary=1024),
    ]
}
ENTRIES.update(HUGGING_FACE)


def entry(name: str) -> ZooEntry:
    """The entry called ``name``; :class:`UnknownModelError` with the closest name otherwise
    (:func:`~partition_lab.zoo._typos.unknown_model_message`)."""
    try:
        return ENTRIES[name]
    except KeyError:
        raise UnknownModelError(unknown_model_message(name, ENTRIES)) from None


# ---------------------------------------------------------------------------- builders
def _gluoncv(name: str, **kwargs: Any) -> Any:
    from gluoncv.model_zoo import get_model

    # Nothing may download: random weights, no pretrained backbone.
    return get_model(name, pretrained=False, **kwargs)


def _small_resnet() -> Any:
    from gluoncv.model_zoo.resnet import BottleneckV1, ResNetV1

    return ResNetV1(BottleneckV1, [1, 1, 1, 1], [16, 64, 128, 256, 512], classes=10)


def _resnet(full_name: str) -> Builder:
    return lambda small: _small_resnet() if small else _gluoncv(full_name)


def _fcn(small: bool) -> Any:
    from .models import SmallFCN

    if small:
        return SmallFCN()
    # aux=True is gluoncv's default and gives the report's two resizes (main and aux head);
    # height/width make both resize back to the 200x200 input, as gluoncv's demo() does.
    return _gluoncv("fcn_resnet101_ade", pretrained_base=False, aux=True, height=200, width=200)


def _simple_pose(small: bool) -> Any:
    from .models import SmallSimplePose

    return SmallSimplePose() if small else _gluoncv("simple_pose_resnet152_v1b",
                                                    pretrained_base=False)


def _tiny_yolo(small: bool) -> Any:
    from .models import TinyYoloV2

    if small:
        return TinyYoloV2(channels=(4, 8, 8, 16, 16, 32), head_channels=(32,))
    return TinyYoloV2()


def _matmul(small: bool) -> Any:
    from .models import MatmulChain

    return MatmulChain(64, 4) if small else MatmulChain(1024, 100)


def _mobilenet(small: bool) -> Any:
    from gluoncv.model_zoo.mobilenet import MobileNetV2

    if not small:
        return _gluoncv("mobilenetv2_1.0")
    net = MobileNetV2(multiplier=0.25, classes=10)
    # Keep the stem, the first four inverted residual blocks (stride 1 and 2, with and without
    # the residual add) and the tail: fewer kernels to compile in the numerics tests.
    features = list(net.features)
    net.features = mx_sequential(features[:7] + features[-4:])
    return net


def _densenet(small: bool) -> Any:
    from gluoncv.model_zoo.densenet import DenseNet

    # Two dense blocks on a 56x56 input reach the 7x7 map that DenseNet's final pool expects.
    return DenseNet(16, 8, [2, 2], classes=10) if small else _gluoncv("densenet201")


def _ssd(small: bool) -> Any:
    from .models import default_norm_inits, small_ssd

    return small_ssd() if small else default_norm_inits(
        _gluoncv("ssd_512_resnet50_v1_voc", pretrained_base=False))


def _yolo3(small: bool) -> Any:
    from .models import small_yolo3

    return small_yolo3() if small else _gluoncv("yolo3_darknet53_voc", pretrained_base=False)


def _center_net(small: bool) -> Any:
    from .models import small_center_net

    return small_center_net() if small else _gluoncv("center_net_resnet18_v1b_voc",
                                                     pretrained_base=False)


def _deeplab(small: bool) -> Any:
    from .models import SmallDeepLab

    return SmallDeepLab() if small else _gluoncv("deeplab_resnet50_ade", pretrained_base=False)


def _alpha_pose(small: bool) -> Any:
    from .models import small_alpha_pose

    return small_alpha_pose() if small else _gluoncv("alpha_pose_resnet101_v1b_coco",
                                                     pretrained_base=False)


def _danet(small: bool) -> Any:
    from .models import SmallDANet, use_position_attention

    return SmallDANet() if small else use_position_attention(
        _gluoncv("danet_resnet50_citys", pretrained_base=False))


def mx_sequential(blocks: list[Any]) -> Any:
    """A HybridSequential of existing blocks, keeping their names."""
    from mxnet.gluon import nn

    sequential = nn.HybridSequential(prefix="")
    sequential.add(*blocks)
    return sequential


def _bert(small: bool) -> Any:
    from .models import BertEncoder

    if small:
        return BertEncoder(hidden=64, heads=4, ffn=128, layers=1, seq_len=16)
    return BertEncoder()


def _torchvision(name: str) -> Builder:
    def build(small: bool) -> Any:
        from . import torch_models

        return getattr(torch_models, name)(small)

    return build


def _hugging_face(name: str) -> Builder:
    def build(small: bool) -> Any:
        from . import hf_models  # raises a one-line MissingDependencyError without transformers

        return getattr(hf_models, name)(small)

    return build


BUILDERS: dict[str, Builder] = {
    **{name: _torchvision(name.removeprefix("tv:")) for name in TORCHVISION},
    **{name: _hugging_face(name.removeprefix("hf:")) for name in HUGGING_FACE},
    "resnet152_v1": _resnet("resnet152_v1"),
    "resnet50_v1": _resnet("resnet50_v1"),
    "resnet50_v1_b32": _resnet("resnet50_v1"),
    "fcn_resnet101_ade": _fcn,
    "simple_pose_resnet152_v1b": _simple_pose,
    "tiny_yolo_v2": _tiny_yolo,
    "matmul_fp16_x100": _matmul,
    "mobilenetv2_1.0": _mobilenet,
    "densenet201": _densenet,
    "bert_encoder": _bert,
    "ssd_512_resnet50_v1_voc": _ssd,
    "yolo3_darknet53_voc": _yolo3,
    "center_net_resnet18_v1b_voc": _center_net,
    "deeplab_resnet50_ade": _deeplab,
    "alpha_pose_resnet101_v1b_coco": _alpha_pose,
    "danet_resnet50_citys": _danet,
}
