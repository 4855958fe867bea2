"""Every zoo model, every built-in platform: the plan of a cold run, a warm run and a run with
``--no-model-cache`` is the same, byte for byte (solve times masked).

The test suite checks a few models this way (``tests/relay/frontends/test_cache_identity.py``) and verifies every
cache entry any test writes (``PARTITION_LAB_VERIFY_CACHE=1``); this runs the whole zoo, which
takes minutes. Each model gets an empty model cache (``converted/``, ``prepared/``) with the zoo's
built files linked in from the user cache, and ``partition-lab partition`` runs in-process three
times per platform: cold (nothing cached; from the second platform on the converted entry is
read), warm (both entries read) and ``--no-model-cache``. Usage::

    PARTITION_LAB_CACHE=DIR .venv/bin/python bench/cache_identity.py [--models a,b] [--full]
        [--platforms tensorcore,cpu]

(``DIR`` is where the zoo's built files are kept, and built on first use.) Models: the MXNet-built
zoo (``zoo:NAME``, with MXNet, through ``--frontend onnx``: the MXNet frontend uses no model
cache), the torchvision and
transformers builds; the evaluation models with ``--models``.

Prints one row per model and platform and exits 1 if any plan differs.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TOPHUB_LOCATION", "NONE")
os.environ.setdefault("PARTITION_LAB_VERIFY_CACHE", "1")

from partition_lab import zoo  # noqa: E402
from partition_lab._run_to_run import mask_solve_times  # noqa: E402
from partition_lab.cli import main  # noqa: E402

PLATFORMS = ("tensorcore", "neuron", "neuron@2020", "cpu")
MODEL_CACHES = ("converted", "prepared")


def partition(argv: list[str], out: Path) -> tuple[int, str]:
    """``partition-lab partition ARGV -o OUT`` in-process: status and the masked plan JSON
    plus the Relay text beside it ("" on failure)."""
    said = io.StringIO()
    with contextlib.redirect_stdout(said), contextlib.redirect_stderr(said):
        status = main(["partition", *argv, "-o", str(out)])
    if status != 0:
        return status, said.getvalue().strip().splitlines()[-1] if said.getvalue() else ""
    return 0, mask_solve_times(out.read_text()) + out.with_suffix(".relay").read_text()


def cold_root(folder: Path, user_cache: Path) -> Path:
    """An empty model cache in ``folder`` with the zoo's built files linked in."""
    root = folder / "cache"
    root.mkdir()
    for built in user_cache.iterdir():
        if built.is_dir() and built.name not in MODEL_CACHES:
            (root / built.name).symlink_to(built, target_is_directory=True)
    return root


def check_model(spec: str, platforms: list[str], user_cache: Path) -> list[tuple[str, str]]:
    """``[(platform, verdict)]`` for one zoo model."""
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["PARTITION_LAB_CACHE"] = str(cold_root(Path(tmp), user_cache))
        for platform in platforms:
            runs = {}
            for label, extra in (("cold", []), ("warm", []), ("no cache", ["--no-model-cache"])):
                # zoo: models through their ONNX export (the MXNet frontend uses no model cache)
                frontend = ["--frontend", "onnx"] if spec.startswith("zoo:") else []
                status, text = partition([spec, "-t", platform, *frontend, *extra],
                                         Path(tmp) / "p.json")
                runs[label] = text if status == 0 else f"failed: {text}"
            if runs["cold"].startswith("failed"):
                rows.append((platform, f"skipped ({runs['cold'][:90]})"))
                continue
            differ = [label for label in ("warm", "no cache") if runs[label] != runs["cold"]]
            rows.append((platform, "identical" if not differ else f"DIFFERS: {', '.join(differ)}"))
    return rows


def main_(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", help="comma-separated zoo names (default: every zoo model)")
    parser.add_argument("--full", action="store_true", help="full size (default: :small)")
    parser.add_argument("--platforms", default=",".join(PLATFORMS))
    args = parser.parse_args(argv)
    if not os.environ.get("PARTITION_LAB_CACHE", "").strip():
        parser.error("set PARTITION_LAB_CACHE to the folder the zoo's built files are kept in")
    user_cache = Path(os.environ["PARTITION_LAB_CACHE"])
    specs = (args.models.split(",") if args.models else
             [f"zoo:{n}" for n in zoo.names()] + zoo.torchvision_names() + zoo.transformers_names())
    print(f"$ python bench/cache_identity.py {' '.join(argv or sys.argv[1:])}".rstrip())
    print(f"{'model':40} {'platform':12} plans (cold = warm = --no-model-cache)")
    bad = 0
    for spec in specs:
        start = time.perf_counter()
        spec = spec if args.full or spec.endswith(":small") else f"{spec}:small"
        try:
            name, small = zoo.parse_spec(spec)  # type: ignore[misc]
            zoo.onnx_path(name, small=small)  # built in the user cache first
        except Exception as exc:  # noqa: BLE001 - a model that cannot be built here is reported
            print(f"{spec:40} {'-':12} skipped ({str(exc).splitlines()[0][:80]})")
            continue
        try:
            for platform, verdict in check_model(spec, args.platforms.split(","), user_cache):
                bad += verdict.startswith("DIFFERS")
                print(f"{spec:40} {platform:12} {verdict}", flush=True)
        finally:
            os.environ["PARTITION_LAB_CACHE"] = str(user_cache)
        print(f"{'':40} {'':12} ({time.perf_counter() - start:.0f} s)", flush=True)
    print(f"{bad} model x platform rows differ")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main_())
