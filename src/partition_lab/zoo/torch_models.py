"""The zoo's PyTorch builds: torchvision counterparts of the gluoncv models, needing no MXNet.

Each builder returns an ``nn.Module`` with torchvision's random initialisation (``weights=None``;
nothing is downloaded); the zoo seeds torch before calling it and exports the module to ONNX
with its module paths as node names (:func:`partition_lab._torch_onnx.module_to_onnx`).
The small variants keep what the tests look at (three deconvolutions, two resizes) at a fraction
of the size, as the gluoncv zoo's small variants do.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

from .._torch_onnx import require_torch

torch = require_torch("the zoo's torchvision models")
import torchvision  # noqa: E402  (after require_torch: it hides Triton, which crashes beside TVM)
from torch import nn  # noqa: E402
from torchvision.models import convnext, efficientnet, mobilenetv3, resnet, segmentation  # noqa: E402
from torchvision.models._utils import IntermediateLayerGetter  # noqa: E402
from torchvision.models.detection.image_list import ImageList  # noqa: E402
from torchvision.models.segmentation import deeplabv3, fcn  # noqa: E402

#: Bottleneck counts of the small ResNets: one block per stage (17 convolutions).
SMALL_LAYERS = [1, 1, 1, 1]


def small_resnet(num_classes: int = 10, dilate: Sequence[bool] = (False, False, False)) -> Any:
    """torchvision's ResNet with one Bottleneck per stage (widths 64..2048, as ResNet-50)."""
    return resnet.ResNet(resnet.Bottleneck, SMALL_LAYERS, num_classes=num_classes,
                         replace_stride_with_dilation=list(dilate))


class SimplePose(nn.Module):
    """SimplePose (Xiao et al. 2018; gluoncv's ``SimplePoseResNet``): a ResNet backbone without
    its pool and classifier, three ``ConvTranspose2d(k=4, s=2, p=1)`` + BatchNorm + ReLU stages
    and a 1x1 convolution to one heatmap per joint (17, COCO)."""

    def __init__(self, backbone: Any, backbone_channels: int = 2048,
                 deconv_filters: Sequence[int] = (256, 256, 256), joints: int = 17) -> None:
        super().__init__()
        # Keeps torchvision's names (backbone.layer1.0.conv1) and drops the pool and classifier.
        self.backbone = IntermediateLayerGetter(backbone, return_layers={"layer4": "out"})
        stages: list[nn.Module] = []
        channels = backbone_channels
        for filters in deconv_filters:
            stages += [nn.ConvTranspose2d(channels, filters, kernel_size=4, stride=2, padding=1,
                                          bias=False),
                       nn.BatchNorm2d(filters), nn.ReLU()]
            channels = filters
        self.deconv = nn.Sequential(*stages)
        self.final = nn.Conv2d(channels, joints, kernel_size=1)

    def forward(self, x: Any) -> Any:
        return self.final(self.deconv(self.backbone(x)["out"]))


def resnet50(small: bool) -> Any:
    return small_resnet() if small else torchvision.models.resnet50(weights=None)


def resnet152(small: bool) -> Any:
    return small_resnet() if small else torchvision.models.resnet152(weights=None)


def simple_pose_resnet152(small: bool) -> Any:
    if small:
        return SimplePose(small_resnet(), deconv_filters=(16, 16, 16))
    return SimplePose(torchvision.models.resnet152(weights=None))


def fcn_resnet101(small: bool) -> Any:
    """FCN with its aux head (two bilinear resizes back to the input), 150 ADE20K classes; small:
    one block per stage, dilated like the full model, 8 classes."""
    if not small:
        return fcn.fcn_resnet101(weights=None, weights_backbone=None, num_classes=150,
                                 aux_loss=True)
    backbone = IntermediateLayerGetter(small_resnet(dilate=(False, True, True)),
                                       return_layers={"layer4": "out", "layer3": "aux"})
    return fcn.FCN(backbone, fcn.FCNHead(2048, 8), fcn.FCNHead(1024, 8))


def mobilenet_v2(small: bool) -> Any:
    if small:
        return torchvision.models.mobilenet_v2(weights=None, width_mult=0.25, num_classes=10)
    return torchvision.models.mobilenet_v2(weights=None)


def densenet201(small: bool) -> Any:
    if small:
        return torchvision.models.DenseNet(growth_rate=8, block_config=(2, 2),
                                           num_init_features=16, num_classes=10)
    return torchvision.models.densenet201(weights=None)


def vit_b_16(small: bool) -> Any:
    """ViT-B/16 (224x224, 12 layers of width 768); small: 32x32 input, 2 layers of width 32, 2
    heads, 10 classes (every LayerNorm, attention and GELU of the full model, in miniature)."""
    if small:
        return torchvision.models.VisionTransformer(
            image_size=32, patch_size=16, num_layers=2, num_heads=2, hidden_dim=32, mlp_dim=64,
            num_classes=10)
    return torchvision.models.vit_b_16(weights=None)


def swin_t(small: bool) -> Any:
    """Swin-T (224x224, depths 2-2-6-2, window 7); small: 32x32 input, embedding 16, two stages
    of two blocks (the second of each shifted, so its ScatterND-built attention mask), window 4,
    10 classes."""
    if small:
        return torchvision.models.SwinTransformer(
            patch_size=[4, 4], embed_dim=16, depths=[2, 2], num_heads=[2, 2], window_size=[4, 4],
            num_classes=10)
    return torchvision.models.swin_t(weights=None)


class SSDWithoutPostprocessing(nn.Module):
    """torchvision's SSD up to its decoded boxes and class scores: backbone, head, anchors and
    box decoding, as ``SSD.postprocess_detections`` starts. Its score filtering, top-k and NMS
    are left to the host: their output shapes depend on the scores (``x[scores > t]``, a
    ``topk`` of ``min(k, n)``, NMS), which ``torch.export`` refuses and partition_lab cannot
    split. The input is an image already resized and normalised (``SSD.transform`` is left out
    too: it only rescales at 320x320)."""

    def __init__(self, ssd: Any) -> None:
        super().__init__()
        self.backbone = ssd.backbone  # keeps torchvision's names: backbone.features.0.0.0
        self.head = ssd.head
        self.anchor_generator = ssd.anchor_generator
        self.box_coder = ssd.box_coder  # not a module: weights 10, 10, 5, 5

    def forward(self, images: Any) -> Any:
        features = list(self.backbone(images).values())
        outputs = self.head(features)
        sizes = [(int(images.shape[-2]), int(images.shape[-1]))] * int(images.shape[0])
        anchors = self.anchor_generator(ImageList(images, sizes), features)
        boxes = torch.stack([self.box_coder.decode_single(codes, image_anchors) for
                             codes, image_anchors in zip(outputs["bbox_regression"], anchors,
                                                         strict=True)])
        return boxes, torch.softmax(outputs["cls_logits"], dim=-1)


def ssdlite320_mobilenet_v3_large(small: bool) -> Any:
    """SSDlite320 on MobileNetV3-Large (91 COCO classes, 320x320), without post-processing;
    small: the same network with 3 classes (the input is 64x64)."""
    ssd = torchvision.models.detection.ssdlite320_mobilenet_v3_large(
        weights=None, weights_backbone=None, num_classes=3 if small else 91)
    return SSDWithoutPostprocessing(ssd)


def convnext_tiny(small: bool) -> Any:
    """ConvNeXt-T (224x224, stages of 3-3-9-3 blocks, widths 96..768); small: 32x32 input, two
    stages of one block (widths 16, 32), 10 classes: its channels-last LayerNorms, depthwise 7x7
    convolutions, GELU MLPs and layer scales, in miniature."""
    if not small:
        return torchvision.models.convnext_tiny(weights=None)
    return convnext.ConvNeXt([convnext.CNBlockConfig(16, 32, 1), convnext.CNBlockConfig(32, None, 1)],
                             num_classes=10)


def efficientnet_b0(small: bool) -> Any:
    """EfficientNet-B0 (224x224, 16 MBConv blocks); small: 64x64 input, width 0.25, two MBConv
    stages (expansion 1 and 6, three blocks: SiLU, squeeze-excitation with a sigmoid gate, the
    residual add), 10 classes."""
    if not small:
        return torchvision.models.efficientnet_b0(weights=None)
    setting = [efficientnet.MBConvConfig(1, 3, 1, 32, 16, 1, width_mult=0.25),
               efficientnet.MBConvConfig(6, 3, 2, 16, 24, 2, width_mult=0.25)]
    return efficientnet.EfficientNet(setting, dropout=0.2, num_classes=10)


def deeplabv3_mobilenet_v3_large(small: bool) -> Any:
    """DeepLabV3 on a dilated MobileNetV3-Large (520x520, 21 classes, no aux head, as torchvision
    builds it without weights); small: 64x64 input, five inverted residual blocks at width 0.5
    (ReLU and hard-swish, squeeze-excitation with its hard-sigmoid gate, a dilated one), an ASPP
    head of width 16 (its pooling branch's resize and the final one), 8 classes."""
    if not small:
        return segmentation.deeplabv3_mobilenet_v3_large(weights=None, weights_backbone=None)
    block = partial(mobilenetv3.InvertedResidualConfig, width_mult=0.5)
    setting = [block(16, 3, 16, 16, False, "RE", 1, 1), block(16, 3, 64, 24, False, "RE", 2, 1),
               block(24, 5, 72, 40, True, "RE", 2, 1), block(40, 3, 240, 80, False, "HS", 2, 1),
               block(80, 5, 480, 112, True, "HS", 1, 2)]
    features = mobilenetv3.MobileNetV3(setting, last_channel=64).features
    backbone = IntermediateLayerGetter(features, return_layers={str(len(features) - 1): "out"})
    channels = features[-1].out_channels
    head = nn.Sequential(deeplabv3.ASPP(channels, [12, 24, 36], out_channels=16),
                         nn.Conv2d(16, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
                         nn.Conv2d(16, 8, 1))
    return deeplabv3.DeepLabV3(backbone, head)
