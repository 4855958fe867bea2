"""Gluon blocks written here for the zoo: models gluoncv does not have, and small variants.

Each block is a plain ``HybridBlock`` built only from operators that both TVM's MXNet frontend
and MXNet's ONNX exporter (opset 13) handle, so every zoo model exists in both forms.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import mxnet as mx
from gluoncv.model_zoo.attention import CAM_Module, PAM_Module
from gluoncv.model_zoo.fcn import _FCNHead
from gluoncv.model_zoo.resnet import BasicBlockV1
from gluoncv.model_zoo.simple_pose.simple_pose_resnet import SimplePoseResNet
from mxnet.gluon import HybridBlock, nn


class TinyYoloV2(HybridBlock):
    """Tiny YOLO v2 (VOC head: 5 anchors x (5 + 20 classes) = 125 channels), without NMS.

    Nine 3x3 convolutions with batch norm and leaky ReLU (slope 0.1) and six max pools, then a
    1x1 convolution: a 416x416 input gives a 13x13x125 grid. Darknet's sixth pool is 2x2 with
    stride 1 and a one-sided pad, which MXNet's Pooling cannot express; a 3x3 pool with stride 1
    and pad 1 keeps the 13x13 grid the same way. The report left NMS out because Inferentia did
    not support it; so does this block.
    """

    def __init__(
        self,
        channels: Sequence[int] = (16, 32, 64, 128, 256, 512),
        head_channels: Sequence[int] = (1024, 1024),
        num_outputs: int = 125,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        with self.name_scope():
            self.features = nn.HybridSequential(prefix="")
            for index, width in enumerate(channels):
                self.features.add(_conv_bn_leaky(width))
                last = index == len(channels) - 1
                self.features.add(
                    nn.MaxPool2D(pool_size=3, strides=1, padding=1) if last
                    else nn.MaxPool2D(pool_size=2, strides=2)
                )
            for width in head_channels:
                self.features.add(_conv_bn_leaky(width))
            self.output = nn.Conv2D(num_outputs, kernel_size=1)

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        return self.output(self.features(x))


def _conv_bn_leaky(channels: int) -> nn.HybridSequential:
    block = nn.HybridSequential(prefix="")
    block.add(nn.Conv2D(channels, kernel_size=3, padding=1, use_bias=False))
    block.add(nn.BatchNorm())
    block.add(nn.LeakyReLU(0.1))
    return block


class MatmulChain(HybridBlock):
    """The report's micro-benchmark: ``x = batch_dot(x, w, transpose_b=True)``, ``repeats`` times.

    ``transpose_b=True`` is what the report chose "so that Relay inserts no transpose": TVM turns
    it into ``nn.batch_matmul`` (the NT form) directly. One weight is shared by all steps; the zoo
    sets it to an orthogonal matrix so that 100 fp16 products neither overflow nor vanish.
    """

    def __init__(self, size: int = 1024, repeats: int = 100, dtype: str = "float16",
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.repeats = repeats
        with self.name_scope():
            self.weight = self.params.get("weight", shape=(1, size, size), dtype=dtype)

    def hybrid_forward(self, F: Any, x: Any, weight: Any) -> Any:
        for _ in range(self.repeats):
            x = F.batch_dot(x, weight, transpose_b=True)
        return x


class BertEncoder(HybridBlock):
    """BERT encoder layers (post-norm) on a ``(batch, seq_len, hidden)`` input, without a mask.

    Per layer: Q/K/V projections, ``batch_dot`` attention with softmax, output projection,
    residual + LayerNorm, GELU (erf form) feed-forward, residual + LayerNorm. Shapes are fixed at
    construction so that every reshape has explicit sizes (the ONNX exporter needs them).
    """

    def __init__(self, hidden: int = 768, heads: int = 12, ffn: int = 3072, layers: int = 1,
                 batch: int = 1, seq_len: int = 128, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        with self.name_scope():
            self.layers = nn.HybridSequential(prefix="")
            for _ in range(layers):
                self.layers.add(BertLayer(hidden, heads, ffn, batch, seq_len))

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        return self.layers(x)


class BertLayer(HybridBlock):
    """One BERT-base style encoder layer; see :class:`BertEncoder`."""

    def __init__(self, hidden: int, heads: int, ffn: int, batch: int, seq_len: int,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if hidden % heads:
            raise ValueError(f"hidden {hidden} is not a multiple of heads {heads}")
        self._hidden, self._heads, self._batch, self._seq = hidden, heads, batch, seq_len
        with self.name_scope():
            self.query = nn.Dense(hidden, flatten=False, in_units=hidden)
            self.key = nn.Dense(hidden, flatten=False, in_units=hidden)
            self.value = nn.Dense(hidden, flatten=False, in_units=hidden)
            self.proj = nn.Dense(hidden, flatten=False, in_units=hidden)
            self.attention_norm = nn.LayerNorm(in_channels=hidden)
            self.ffn_in = nn.Dense(ffn, flatten=False, in_units=hidden)
            self.ffn_out = nn.Dense(hidden, flatten=False, in_units=ffn)
            self.output_norm = nn.LayerNorm(in_channels=hidden)

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        head_dim = self._hidden // self._heads
        query = self._split_heads(F, self.query(x)) * (1.0 / math.sqrt(head_dim))
        scores = F.batch_dot(query, self._split_heads(F, self.key(x)), transpose_b=True)
        context = F.batch_dot(F.softmax(scores, axis=-1), self._split_heads(F, self.value(x)))
        x = self.attention_norm(x + self.proj(self._merge_heads(F, context)))
        return self.output_norm(x + self.ffn_out(_gelu(F, self.ffn_in(x))))

    def _split_heads(self, F: Any, x: Any) -> Any:
        """(batch, seq, hidden) -> (batch * heads, seq, head_dim)."""
        b, s, h = self._batch, self._seq, self._heads
        x = F.reshape(x, shape=(b, s, h, self._hidden // h))
        return F.reshape(F.transpose(x, axes=(0, 2, 1, 3)), shape=(b * h, s, self._hidden // h))

    def _merge_heads(self, F: Any, x: Any) -> Any:
        """(batch * heads, seq, head_dim) -> (batch, seq, hidden)."""
        b, s, h = self._batch, self._seq, self._heads
        x = F.reshape(x, shape=(b, h, s, self._hidden // h))
        return F.reshape(F.transpose(x, axes=(0, 2, 1, 3)), shape=(b, s, self._hidden))


def _gelu(F: Any, x: Any) -> Any:
    """GELU, erf form: x * (1 + erf(x / sqrt 2)) / 2 (what BERT uses)."""
    return F.LeakyReLU(x, act_type="gelu")


class SmallFCN(HybridBlock):
    """FCN with gluoncv's heads on a two-stage ResNet: the structure of ``fcn_resnet101_ade``.

    The backbone gives ``c3`` and ``c4`` (stride 8, as the dilated ResNet does); the main head
    reads ``c4``, the auxiliary head ``c3``, and each output is resized back to the input size
    with ``BilinearResize2D``: the two resizes of the report.
    """

    def __init__(self, nclass: int = 8, height: int = 64, width: int = 64,
                 channels: Sequence[int] = (16, 32, 64), **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._size = {"height": height, "width": width}
        with self.name_scope():
            self.stem = nn.HybridSequential(prefix="")
            self.stem.add(nn.Conv2D(channels[0], 3, strides=2, padding=1, use_bias=False))
            self.stem.add(nn.BatchNorm())
            self.stem.add(nn.Activation("relu"))
            self.stem.add(nn.MaxPool2D(3, 2, 1))
            self.layer3 = BasicBlockV1(channels[1], 2, True, in_channels=channels[0])
            self.layer4 = BasicBlockV1(channels[2], 1, True, in_channels=channels[1])
            self.head = _FCNHead(channels[2], nclass)
            self.auxlayer = _FCNHead(channels[1], nclass)

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        c3 = self.layer3(self.stem(x))
        c4 = self.layer4(c3)
        out = F.contrib.BilinearResize2D(self.head(c4), **self._size)
        aux = F.contrib.BilinearResize2D(self.auxlayer(c3), **self._size)
        return out, aux


class SmallSimplePose(SimplePoseResNet):
    """SimplePose on a narrow ResNet: gluoncv's deconv head (3 x Deconvolution+BN+ReLU) as is.

    gluoncv's constructor always builds a full-width ResNet backbone; this one skips it and
    reuses the parent's ``_make_deconv_layer`` and ``hybrid_forward``, so the node names of the
    head (``batchnormcudnnoff0_fwd``, ``relu0_fwd``...) are those of the full model.
    """

    def __init__(self, channels: Sequence[int] = (8, 8, 16, 32, 64),
                 deconv_filters: Sequence[int] = (16, 16, 16), num_joints: int = 17,
                 **kwargs: Any) -> None:
        HybridBlock.__init__(self, **kwargs)  # not SimplePoseResNet.__init__: see docstring
        from gluoncv.model_zoo.resnet import ResNetV1

        base = ResNetV1(BasicBlockV1, [1] * (len(channels) - 1), list(channels))
        self.resnet = nn.HybridSequential()
        self.resnet.add(base.features[:-1])  # drop the global pool: keep the feature map
        self.deconv_with_bias = False
        self.deconv_layers = self._make_deconv_layer(
            len(deconv_filters), list(deconv_filters), [4] * len(deconv_filters)
        )
        self.final_layer = nn.Conv2D(num_joints, kernel_size=1)


def orthogonal(size: int, seed: int) -> Any:
    """A ``(1, size, size)`` orthogonal matrix as an ``mx.nd`` array (float32)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    q, r = np.linalg.qr(rng.standard_normal((size, size)))
    q *= np.sign(np.diag(r))  # a uniformly random orthogonal matrix
    return mx.nd.array(q[None].astype("float32"))


# ---------------------------------------------------------------------------- evaluation models
# Small variants of the gluoncv evaluation models (see _catalog.EVALUATION). Each keeps its
# model's head as gluoncv writes it (gluoncv's own blocks where they take their widths as
# arguments) on a narrow backbone, so the small graph has the full one's op kinds.
def _small_stem(width: int) -> nn.HybridSequential:
    """conv 3x3 stride 2 + BN + ReLU + max pool stride 2: a ResNet stem at stride 4."""
    stem = nn.HybridSequential(prefix="")
    stem.add(nn.Conv2D(width, 3, strides=2, padding=1, use_bias=False))
    stem.add(nn.BatchNorm())
    stem.add(nn.Activation("relu"))
    stem.add(nn.MaxPool2D(3, 2, 1))
    return stem


class PositionAttention(PAM_Module):
    """gluoncv's ``PAM_Module`` (DANet's position attention) with its
    ``batch_dot(q, k, transpose_a=True)`` written as ``batch_dot(transpose(q), k)``.

    TVM's MXNet frontend rejects ``transpose_a`` (``OpAttributeInvalid``); the explicit
    transpose is the same function, and Relay folds it into ``nn.batch_matmul`` again. The zoo
    swaps the class of gluoncv's own instances to this one (:func:`use_position_attention`), so
    parameter names and everything else stay gluoncv's.
    """

    def hybrid_forward(self, F: Any, x: Any, **kwargs: Any) -> Any:
        gamma = kwargs["gamma"]
        proj_query = F.reshape(self.query_conv(x), (0, 0, -1))
        proj_key = F.reshape(self.key_conv(x), (0, 0, -1))
        energy = F.batch_dot(F.transpose(proj_query, axes=(0, 2, 1)), proj_key)
        attention = F.softmax(energy)
        proj_value = F.reshape(self.value_conv(x), (0, 0, -1))
        out = F.batch_dot(proj_value, attention, transpose_b=True)
        out = F.reshape_like(out, x, lhs_begin=2, lhs_end=None, rhs_begin=2, rhs_end=None)
        return F.broadcast_mul(gamma, out) + x


def use_position_attention(block: HybridBlock) -> HybridBlock:
    """Make every gluoncv ``PAM_Module`` under ``block`` a :class:`PositionAttention`."""
    for child in _all_blocks(block):
        if type(child) is PAM_Module:
            child.__class__ = PositionAttention
    return block


def _all_blocks(block: HybridBlock) -> list[HybridBlock]:
    found = [block]
    for child in block._children.values():
        found.extend(_all_blocks(child))
    return found


def default_norm_inits(block: HybridBlock) -> HybridBlock:
    """Give batch-norm parameters that have no initializer of their own (those of gluoncv's
    ``FeatureExpander``, a SymbolBlock) the usual ones; the zoo's global Xavier initializer
    would otherwise be applied to them and refuse 1-D arrays. The zoo then sets every BN's
    statistics and affine parameters itself."""
    for name, param in block.collect_params().items():
        if param.init is None and name.endswith(("gamma", "moving_var", "running_var")):
            param.init = mx.init.One()
        elif param.init is None and name.endswith(("beta", "moving_mean", "running_mean")):
            param.init = mx.init.Zero()
    return block


class SmallDANet(HybridBlock):
    """DANet's structure on a two-stage ResNet: gluoncv's position (PAM) and channel (CAM)
    attention modules, the three heads of ``DANetHead`` and the three resizes to the input."""

    def __init__(self, nclass: int = 8, height: int = 64, width: int = 64,
                 channels: Sequence[int] = (16, 32, 64), **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._size = {"height": height, "width": width}
        inter = channels[2] // 4
        with self.name_scope():
            self.stem = _small_stem(channels[0])
            self.layer3 = BasicBlockV1(channels[1], 2, True, in_channels=channels[0])
            self.layer4 = BasicBlockV1(channels[2], 1, True, in_channels=channels[1])
            self.conv5a = _conv_bn_relu(inter, 3)
            self.conv5c = _conv_bn_relu(inter, 3)
            self.sa = PositionAttention(inter)
            self.sc = CAM_Module(inter)
            self.conv51 = _conv_bn_relu(inter, 3)
            self.conv52 = _conv_bn_relu(inter, 3)
            self.conv6 = nn.Conv2D(nclass, 1)
            self.conv7 = nn.Conv2D(nclass, 1)
            self.conv8 = nn.Conv2D(nclass, 1)

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        c4 = self.layer4(self.layer3(self.stem(x)))
        sa_conv = self.conv51(self.sa(self.conv5a(c4)))
        sc_conv = self.conv52(self.sc(self.conv5c(c4)))
        outputs = (self.conv8(sa_conv + sc_conv), self.conv6(sa_conv), self.conv7(sc_conv))
        return tuple(F.contrib.BilinearResize2D(out, **self._size) for out in outputs)


def _conv_bn_relu(channels: int, kernel: int, **conv: Any) -> nn.HybridSequential:
    block = nn.HybridSequential(prefix="")
    block.add(nn.Conv2D(channels, kernel, padding=conv.pop("padding", kernel // 2),
                        use_bias=False, **conv))
    block.add(nn.BatchNorm())
    block.add(nn.Activation("relu"))
    return block


class SmallDeepLab(HybridBlock):
    """DeepLabV3 on a two-stage ResNet: ASPP with gluoncv's ``_ASPPConv`` branches (dilated 3x3)
    and ``_AsppPooling`` (global pool, 1x1 conv, resize back), projection, the head's 3x3 conv
    and classifier, gluoncv's FCN aux head, and the resizes of both outputs to the input."""

    def __init__(self, nclass: int = 8, height: int = 64, width: int = 64,
                 channels: Sequence[int] = (16, 32, 64), aspp: int = 16,
                 rates: Sequence[int] = (1, 2, 3), **kwargs: Any) -> None:
        super().__init__(**kwargs)
        from gluoncv.model_zoo.deeplabv3 import _ASPPConv, _AsppPooling
        from mxnet.gluon.contrib.nn import HybridConcurrent

        self._size = {"height": height, "width": width}
        with self.name_scope():
            self.stem = _small_stem(channels[0])
            self.layer3 = BasicBlockV1(channels[1], 2, True, in_channels=channels[0])
            self.layer4 = BasicBlockV1(channels[2], 1, True, in_channels=channels[1])
            self.concurent = HybridConcurrent(axis=1)
            with self.concurent.name_scope():
                self.concurent.add(_conv_bn_relu(aspp, 1))
                for rate in rates:
                    self.concurent.add(_ASPPConv(channels[2], aspp, rate, nn.BatchNorm, None))
                self.concurent.add(_AsppPooling(channels[2], aspp, nn.BatchNorm, None,
                                                height=height // 8, width=width // 8))
            self.project = _conv_bn_relu(aspp, 1)
            self.project.add(nn.Dropout(0.5))
            self.block = _conv_bn_relu(aspp, 3)
            self.block.add(nn.Dropout(0.1))
            self.block.add(nn.Conv2D(nclass, 1))
            self.auxlayer = _FCNHead(channels[1], nclass)

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        c3 = self.layer3(self.stem(x))
        c4 = self.layer4(c3)
        out = self.block(self.project(self.concurent(c4)))
        return (F.contrib.BilinearResize2D(out, **self._size),
                F.contrib.BilinearResize2D(self.auxlayer(c3), **self._size))


def small_alpha_pose(num_joints: int = 17, planes: Sequence[int] = (4, 8, 16, 32),
                     stem: int = 8) -> HybridBlock:
    """AlphaPose (gluoncv's ``AlphaPose`` block and its ``DUC``/``PixelShuffle`` head) on a
    narrow FastSEResNet: one SE bottleneck per stage, the full model's stem and strides."""
    from gluoncv.model_zoo.alpha_pose.fast_pose import (
        DUC,
        AlphaPose,
        Bottleneck,
        FastSEResNet,
        PixelShuffle,
    )

    class _NarrowFastSEResNet(FastSEResNet):
        def __init__(self) -> None:
            HybridBlock.__init__(self)  # not FastSEResNet.__init__: it fixes the widths
            self.inplanes, self.norm_layer, self.block = stem, nn.BatchNorm, Bottleneck
            self.conv1 = nn.Conv2D(stem, in_channels=3, kernel_size=7, strides=2, padding=3,
                                   use_bias=False)
            self.bn1 = nn.BatchNorm()
            self.relu = nn.Activation("relu")
            self.maxpool = nn.MaxPool2D(pool_size=3, strides=2, padding=1)
            self.layer1 = self.make_layer(Bottleneck, planes[0], 1)
            self.layer2 = self.make_layer(Bottleneck, planes[1], 1, stride=2)
            self.layer3 = self.make_layer(Bottleneck, planes[2], 1, stride=2)
            self.layer4 = self.make_layer(Bottleneck, planes[3], 1, stride=2)

    class _SmallAlphaPose(AlphaPose):
        def __init__(self) -> None:
            HybridBlock.__init__(self)  # not AlphaPose.__init__: it fixes the head's widths
            self.preact = _NarrowFastSEResNet()
            self.num_joints = num_joints
            width = planes[3] * Bottleneck.expansion // 4  # after the first pixel shuffle
            self.shuffle1 = PixelShuffle(2)
            self.duc1 = DUC(2 * width, inplanes=width, upscale_factor=2)
            self.duc2 = DUC(width, inplanes=width // 2, upscale_factor=2)
            self.conv_out = nn.Conv2D(channels=num_joints, in_channels=width // 4,
                                      kernel_size=3, strides=1, padding=1)

    return _SmallAlphaPose()


class _SmallSSDFeatures(HybridBlock):
    """Three feature maps (strides 8, 16, 32) for the small SSD: a stem, two ResNet blocks and
    one FeatureExpander-style extra stage (1x1 transition + 3x3 stride-2 conv, BN, ReLU)."""

    def __init__(self, channels: Sequence[int] = (8, 16, 32, 32), **kwargs: Any) -> None:
        super().__init__(**kwargs)
        with self.name_scope():
            self.stem = _small_stem(channels[0])
            self.stage1 = BasicBlockV1(channels[1], 2, True, in_channels=channels[0])
            self.stage2 = BasicBlockV1(channels[2], 2, True, in_channels=channels[1])
            self.expand = _conv_bn_relu(channels[3] // 2, 1)
            self.expand.add(_conv_bn_relu(channels[3], 3, strides=2, padding=1))

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        f1 = self.stage1(self.stem(x))
        f2 = self.stage2(f1)
        return [f1, f2, self.expand(f2)]


def small_ssd(classes: Sequence[str] = ("a", "b", "c"), size: int = 64) -> HybridBlock:
    """gluoncv's ``SSD`` block (anchors, class/box predictors, box decoder, per-class decoder,
    ``box_nms``) on :class:`_SmallSSDFeatures`, three layers of anchors for a 64x64 input."""
    from gluoncv.model_zoo.ssd.ssd import SSD

    return SSD(None, size, lambda **_: _SmallSSDFeatures(), None,
               sizes=[6.4, 12.8, 25.6, 51.2],
               ratios=[[1, 2, 0.5], [1, 2, 0.5, 3, 1.0 / 3], [1, 2, 0.5]],
               steps=[8, 16, 32], classes=list(classes), nms_topk=100, post_nms=20,
               anchor_alloc_size=16)


def small_center_net(classes: Sequence[str] = ("a", "b", "c"), topk: int = 10) -> HybridBlock:
    """gluoncv's ``CenterNet`` (heatmap max-pool NMS, topk decoder with gather_nd) on a narrow
    ResNet with DeconvResnet's three deconvolution stages."""
    from collections import OrderedDict

    from gluoncv.model_zoo.center_net.center_net import CenterNet
    from gluoncv.model_zoo.center_net.deconv_resnet import DeconvResnet
    from gluoncv.model_zoo.resnet import ResNetV1

    class _NarrowDeconvResnet(DeconvResnet):
        def __init__(self) -> None:
            HybridBlock.__init__(self)  # not DeconvResnet.__init__: it loads a full ResNet
            base = ResNetV1(BasicBlockV1, [1, 1, 1, 1], [8, 8, 16, 24, 32])
            self.base_network = nn.HybridSequential()
            self.base_network.add(base.features[:-1])  # drop the global pool
            self._norm_layer, self._norm_kwargs, self._use_dcnv2 = nn.BatchNorm, {}, False
            with self.name_scope():
                self.deconv = self._make_deconv_layer((16, 16, 16), (4, 4, 4))

    heads = OrderedDict([("heatmap", {"num_output": len(classes), "bias": -2.19}),
                         ("wh", {"num_output": 2}), ("reg", {"num_output": 2})])
    return CenterNet(_NarrowDeconvResnet(), heads, list(classes), head_conv_channel=8,
                     scale=4.0, topk=topk)


def small_yolo3(classes: Sequence[str] = ("a", "b", "c")) -> HybridBlock:
    """gluoncv's ``YOLOV3`` block (three detection blocks and outputs, upsampling by repeat,
    box decoding, ``box_nms``) on a DarknetV3 with one residual block per stage (widths
    8..128), the full model's anchors and strides, for a 64x64 input."""
    from gluoncv.model_zoo.yolo.darknet import DarknetV3
    from gluoncv.model_zoo.yolo.yolo3 import YOLOV3

    base = DarknetV3([1, 1, 1, 1, 1], [8, 16, 32, 64, 128, 256])
    # As yolo3_darknet53 splits darknet53: up to stride 8, to 16, to 32.
    stages = [base.features[:7], base.features[7:9], base.features[9:]]
    anchors = [[10, 13, 16, 30, 33, 23], [30, 61, 62, 45, 59, 119], [116, 90, 156, 198, 373, 326]]
    return YOLOV3(stages, [32, 16, 8], anchors, [8, 16, 32], classes=list(classes),
                  alloc_size=(16, 16), nms_topk=100, post_nms=20)
