"""Gluon blocks written here for the zoo: models gluoncv does not have, and small variants.

Each block is a plain ``HybridBlock`` built only from operators that both TVM's MXNet frontend
and MXNet's ONNX exporter (opset 13) handle, so every zoo model exists in both forms.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import mxnet as mx
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
