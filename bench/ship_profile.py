"""Write the profile cache that ships with the package for the built-in ``tensorcore`` platform.

It is the project's own H200 measurements, merged: the zoo models
(``experiments/data/gpu_ingraph_cache.json.xz``, 16 gluoncv models) and the transformer suite
(``experiments/data/gpu_suite_cache.json.xz``, 11 torchvision / transformers builds), timed by
``partition-lab profile`` with the PyTorch runner on one lent NVIDIA H200 and its 16-thread
Xeon host. Only the ``tensorcore`` binding is kept (the ``neuron`` rows of those runs had the
GPU stand in for an accelerator it is not, so they are not shipped as a neuron profile), and
the measured choices are dropped (they belong to the machine that timed them).

    .venv/bin/python bench/ship_profile.py      # rewrites src/partition_lab/cost_models/shipped/
"""

from __future__ import annotations

import argparse
import gzip
import json
import lzma
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from partition_lab.cost_models.cache_records import ProfileCache  # noqa: E402
from partition_lab.cost_models.shipped import SHIPPED  # noqa: E402

#: The profile caches as measured, xz-compressed (the shipped profile's ``sources``).
SOURCES = tuple(ROOT / source for source in SHIPPED["tensorcore"].sources)


def read_source(path: Path) -> ProfileCache:
    """One of :data:`SOURCES`: an xz-compressed profile cache."""
    with lzma.open(path, "rt", encoding="utf-8") as raw:
        return ProfileCache.from_dict(json.load(raw), str(path))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--platform", default="tensorcore", choices=sorted(SHIPPED))
    args = parser.parse_args()
    shipped = SHIPPED[args.platform]
    merged = ProfileCache()
    for source in SOURCES:
        merged.merge(read_source(source))
    binding = merged.binding(args.platform)
    keep = set(binding.values())
    merged.devices = {key: entry for key, entry in merged.devices.items() if key in keep}
    merged.bindings = {args.platform: binding}
    merged.choices = {}
    text = json.dumps(merged.to_dict(), sort_keys=True, separators=(",", ":"))
    # mtime=0: the same measurements give the same bytes (a reviewable diff, a stable wheel)
    data = gzip.compress(text.encode("utf-8"), compresslevel=9, mtime=0)
    shipped.path.write_bytes(data)
    # The cross-validated sigmas take leave-one-model-out fits over every profiled model:
    # seconds per process, so they are computed here once (same code, same data).
    from partition_lab.cost_models.profiled import ProfiledCostModel
    from partition_lab.targets import get_platform

    model = ProfiledCostModel(merged.to_dict(), get_platform(args.platform))
    sigmas = {key: model.fitted_sigma(key) for key in sorted(set(binding.values()))}
    shipped.sigma_path.write_text(json.dumps(sigmas, indent=1, sort_keys=True) + "\n",
                                  encoding="utf-8")
    ops = {key: len(entry.ops) for key, entry in merged.devices.items()}
    print(f"wrote {shipped.path.relative_to(ROOT)} ({len(data) / 1e3:.0f} kB; sigmas "
          f"{shipped.sigma_path.name}; ops per "
          f"device {ops}; binding {binding})")


if __name__ == "__main__":
    main()
