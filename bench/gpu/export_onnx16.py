"""Export torchvision models with random weights to ONNX for the TVM-built plans.

Batch 16, 3x64x64, opset 17, ``weights=None`` (no downloads; the weights are seeded random:
the plans are timed, not scored). Run with the main venv (torch + torchvision):

    .venv/bin/python bench/gpu/export_onnx16.py --out /work/onnx16 [--models resnet34 ...]

``vit_tiny`` is torchvision's ``VisionTransformer`` at a small size (64x64 images, 8x8
patches: 64 tokens + class, 4 layers of width 192, 3 heads), exported with PyTorch's fused
attention fast path off (``aten::_native_multi_head_attention`` has no ONNX export).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

MODELS = ("squeezenet1_1", "resnet18", "mnasnet0_5", "mobilenet_v2", "resnet34", "googlenet",
          "densenet121", "mobilenet_v3_small", "shufflenet_v2_x0_5",
          "regnet_y_400mf", "efficientnet_b0", "vit_tiny")
BATCH, SHAPE = 16, (3, 64, 64)


def build(name: str):
    import torch
    import torchvision

    torch.manual_seed(0)
    kwargs = {"weights": None}
    if name == "googlenet":
        kwargs |= {"aux_logits": False, "init_weights": False}
    if name == "vit_tiny":
        torch.backends.mha.set_fastpath_enabled(False)
        return torchvision.models.VisionTransformer(
            image_size=SHAPE[1], patch_size=8, num_layers=4, num_heads=3, hidden_dim=192,
            mlp_dim=768).eval()
    return getattr(torchvision.models, name)(**kwargs).eval()


def export(name: str, out: Path, opset: int = 17) -> Path:
    import torch

    model = build(name)
    x = torch.randn(BATCH, *SHAPE)
    path = out / f"{name}.onnx"
    with torch.no_grad():
        torch.onnx.export(model, (x,), str(path), opset_version=opset, dynamo=False,
                          input_names=["input"], output_names=["output"])
    return path


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="/work/onnx16")
    parser.add_argument("--models", nargs="+", default=list(MODELS))
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name in args.models:
        start = time.perf_counter()
        try:
            path = export(name, out)
        except Exception as exc:  # noqa: BLE001 - report and go on with the next model
            print(f"{name}: FAILED {type(exc).__name__}: {str(exc)[:300]}", file=sys.stderr)
            continue
        print(f"{name}: {path} ({path.stat().st_size / 1e6:.1f} MB, "
              f"{time.perf_counter() - start:.1f} s)", flush=True)


if __name__ == "__main__":
    main()
