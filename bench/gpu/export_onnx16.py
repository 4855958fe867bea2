"""Export torchvision models with random weights to ONNX for the TVM-built plans (issue 22).

Batch 16, 3x64x64, opset 17, ``weights=None`` (no downloads; the weights are seeded random:
the plans are timed, not scored). Run with the main venv (torch + torchvision):

    .venv/bin/python bench/gpu/export_onnx16.py --out /work/onnx16 [--models resnet34 ...]

``relu6`` replaces every ``nn.ReLU6`` by ``Relu`` followed by ``Min`` with a constant 6
exported as ``Clip(x, 0, 6)`` with constant bounds: TVM's importer turns that Clip into a plain
``relax.op.clip`` (not ``call_tir``), so ToMixedPrecision can handle it.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

MODELS = ("squeezenet1_1", "resnet18", "mnasnet0_5", "mobilenet_v2", "resnet34", "googlenet",
          "densenet121", "alexnet", "vgg11_bn", "mobilenet_v3_small", "shufflenet_v2_x0_5",
          "regnet_y_400mf", "efficientnet_b0", "vit_b_16")
BATCH, SHAPE = 16, (3, 64, 64)


def build(name: str):
    import torch
    import torchvision

    torch.manual_seed(0)
    kwargs = {"weights": None}
    if name == "googlenet":
        kwargs |= {"aux_logits": False, "init_weights": False}
    if name.startswith("vit"):
        kwargs |= {"image_size": SHAPE[1]}  # 64x64 with 16x16 patches: 16 tokens + class
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
