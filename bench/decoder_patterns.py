"""Decoders (Llama, Phi, Gemma from ``transformers`` configs, random weights, nothing downloaded):
regions, host islands, units and predicted time with patterns and op by op.

``transformers`` is not a dependency of the package; install it beside it to run this::

    TOPHUB_LOCATION=NONE .venv/bin/python bench/decoder_patterns.py [--sizes small,medium]
        [--models llama,phi,gemma] [--platforms neuron,neuron@2020,tensorcore]
        [--bundles .gpu_bundle/decoders]

Each model takes ``input_ids`` and returns its logits (``use_cache=False``); it goes through
``partition_lab.load_model(module, example)`` (``torch.export`` -> ONNX -> Relay) and is
partitioned with ``greedy`` on each platform, once as the platform is (patterns: RMSNorm,
rotary, ``repeat_kv``, attention, SiLU... judged and priced whole) and once
``targets.devices.without_patterns`` (op by op). Sizes (every config: 4 heads per 2 key/value
heads, so ``repeat_kv`` repeats twice):

- ``small``: 2 layers, hidden 64, 4 heads, 2 key/value heads, vocab 1024, sequence 16;
- ``medium``: 4 layers, hidden 512, 8 heads, 4 key/value heads, vocab 8192, sequence 128.

Predicted times are the platform's cost model (``tensorcore``: the H200 roofline, as
``bench/gpu/export_bundles.py`` plans). Writes ``bench/results/decoder_patterns.json``.

``--bundles DIR`` also writes, per model, size and ``--bundle-platforms`` platform, two GPU
bundles (``bench/gpu/README.md``): ``<model>_<size>_<platform>`` with patterns and the same
with ``_op_by_op``, each with the plans of ``--strategies`` and the all-GPU baseline, and
``DIR/order.json``, so that the GPU machine times patterns against op by op: as exported,
``bench/gpu/evidence.py --bundles DIR --out FILE --interleave greedy cost unpartitioned_gpu``
(each plan checked against the unpartitioned graph, then timed in turns with it), or
profiled first (``WORK=... bash bench/gpu/profiled_pipeline.sh profile DIR``, then ``run``).
``--measured FILE`` (no model is built) reads what ``evidence.py`` wrote and prints, per
model, size and platform, the measured greedy plan op by op over the one with patterns.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from pathlib import Path

os.environ.setdefault("TOPHUB_LOCATION", "NONE")
sys.path.insert(0, str(Path(__file__).parent / "gpu"))  # export_bundles' planning

import partition_lab  # noqa: E402
from partition_lab.relay.frontends._torch import require_torch  # noqa: E402
from partition_lab.targets import get_platform  # noqa: E402
from partition_lab.targets.devices import without_patterns  # noqa: E402

torch = require_torch("the decoder benchmark")
MODELS = ("llama", "phi", "gemma")
PLATFORMS = ("neuron", "neuron@2020", "tensorcore")
SIZES = {
    "small": {"layers": 2, "hidden": 64, "heads": 4, "kv_heads": 2, "vocab": 1024, "seq": 16},
    "medium": {"layers": 4, "hidden": 512, "heads": 8, "kv_heads": 4, "vocab": 8192,
               "seq": 128},
}
RESULTS = Path(__file__).parent / "results" / "decoder_patterns.json"


def build(kind: str, size: str) -> tuple[object, object]:
    """The ``kind`` decoder at ``size`` returning logits, and its example ``input_ids``; any
    other ``kind`` is a family of ``model_families.py`` (``einsum_vit``, ``whisper_encoder``...:
    its one, small, size) returning its last hidden state, with its example input."""
    import transformers

    if kind not in MODELS:
        from model_families import FAMILIES

        family = {f.name: f for f in FAMILIES}.get(kind)
        if family is None or family.group != "tuned":
            raise SystemExit(f"unknown model {kind!r}: one of {', '.join(MODELS)} or a tuned "
                             "family of bench/model_families.py")
        return family.build()

    s = SIZES[size]
    torch.manual_seed(0)
    common = dict(hidden_size=s["hidden"], num_hidden_layers=s["layers"],
                  num_attention_heads=s["heads"], num_key_value_heads=s["kv_heads"],
                  vocab_size=s["vocab"], intermediate_size=2 * s["hidden"],
                  max_position_embeddings=max(128, s["seq"]), use_cache=False)
    if kind == "llama":
        model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**common))
    elif kind == "phi":
        model = transformers.PhiForCausalLM(transformers.PhiConfig(**common))
    elif kind == "gemma":
        model = transformers.GemmaForCausalLM(transformers.GemmaConfig(
            **common, head_dim=s["hidden"] // s["heads"]))
    else:
        raise SystemExit(f"unknown model {kind!r}: one of {', '.join(MODELS)}")

    class Logits(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids):  # noqa: ANN001, ANN202
            return self.model(input_ids=input_ids).logits

    ids = torch.randint(0, s["vocab"], (1, s["seq"]), generator=torch.Generator().manual_seed(0))
    return Logits().eval(), ids


def cost_model_for(name: str, platform: object) -> object:
    from partition_lab.cost_models import get_cost_model

    return get_cost_model(platform, accel_profile="h200") if name == "tensorcore" \
        else get_cost_model(platform)


def row(kind: str, size: str, name: str, patterns: bool, mod: object, params: object) -> dict:
    platform = get_platform(name)
    if not patterns:
        platform = without_patterns(platform)
    result = partition_lab.partition(mod, platform, params=params, strategy="greedy",
                                     cost_model=cost_model_for(name, platform))
    plan = result.plan
    host = [d for d in plan.decisions if d.device == "cpu"]
    return {"model": kind, "size": size, "platform": name, "patterns": patterns,
            "ops": len(plan.graph), "regions": len(plan.accelerator_regions),
            "islands": len(plan.cpu_regions), "host_ops": len(host),
            "host_op_names": sorted({plan.graph[d.node].op for d in host}),
            "units": dict(sorted(Counter(u.name for u in plan.support.units).items()))
            if patterns else {},
            "predicted_s": result.cost.total if result.cost is not None else None}


def write_bundles(out: Path, kind: str, size: str, name: str, mod: object, params: object,
                  strategies: tuple[str, ...]) -> list[str]:
    """Two bundles of the model on platform ``name``: with patterns and op by op."""
    from export_bundles import plan_bundle

    from partition_lab.api import analyze
    from partition_lab.executors.graph_io import Bundle, bindings_from_relay, write_bundle

    labels = []
    for patterns in (True, False):
        platform = get_platform(name) if patterns else without_patterns(get_platform(name))
        label = f"{kind}_{size}_{name.replace('@', '_')}" + ("" if patterns else "_op_by_op")
        cost_model = cost_model_for(name, platform)
        analysis = analyze(mod, platform, params=params, cost_model=cost_model, name=label)
        inputs = analysis.graph.graph_inputs
        meta = {"model": label, "small": size == "small", "target": name,
                "input_dtype": next((t.spec.dtype for t in inputs.values()), ""),
                "input_shapes": {n: list(t.spec.shape) for n, t in inputs.items()}}
        bundle = plan_bundle(Bundle(analysis.graph, bindings_from_relay(analysis.relay)),
                             analysis.support, cost_model, meta, 0, strategies)
        write_bundle(out / f"{label}.json.gz", bundle)
        labels.append(label)
    return labels


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--sizes", default="small", help="small, medium or both")
    parser.add_argument("--platforms", default=",".join(PLATFORMS))
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--bundles", type=Path, help="also write GPU bundles to this folder")
    parser.add_argument("--bundle-platforms", default="neuron,tensorcore",
                        help="platforms of the bundles (with --bundles)")
    parser.add_argument("--strategies", default="greedy,cost",
                        help="strategies planned in the bundles (with --bundles)")
    parser.add_argument("--measured", type=Path,
                        help="only report an evidence.py run of the bundles (no model built)")
    args = parser.parse_args(argv)
    if args.measured:
        return report_measured(json.loads(args.measured.read_text()))
    rows, order = [], []
    for size in args.sizes.split(","):
        for kind in args.models.split(","):
            start = time.perf_counter()
            module, ids = build(kind, size)
            mod, params = partition_lab.load_model(module, ids)
            print(f"# {kind} {size}: loaded in {time.perf_counter() - start:.1f} s", flush=True)
            for name in args.platforms.split(","):
                for patterns in (True, False):
                    rows.append(row(kind, size, name, patterns, mod, params))
                    print(json.dumps(rows[-1]), flush=True)
            if args.bundles:
                args.bundles.mkdir(parents=True, exist_ok=True)
                for name in args.bundle_platforms.split(","):
                    order += write_bundles(args.bundles, kind, size, name, mod, params,
                                           tuple(args.strategies.split(",")))
    if args.bundles:
        (args.bundles / "order.json").write_text(json.dumps(order))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"command": " ".join(["bench/decoder_patterns.py",
                                                          *(argv or sys.argv[1:])]),
                                    "rows": rows}, indent=1) + "\n")
    print_table(rows)
    return 0


def print_table(rows: list[dict]) -> None:
    """Patterns against op by op, one line per model, size and platform."""
    print(f"\n{'model':<8}{'size':<8}{'platform':<13}{'op by op: regions+islands':>27}"
          f"{'patterns':>10}{'predicted op/pat':>20}")
    keyed = {(r["model"], r["size"], r["platform"], r["patterns"]): r for r in rows}
    for (kind, size, name, patterns), r in keyed.items():
        if not patterns:
            continue
        o = keyed[(kind, size, name, False)]
        ratio = (o["predicted_s"] / r["predicted_s"]) if r["predicted_s"] else float("nan")
        print(f"{kind:<8}{size:<8}{name:<13}{o['regions']:>20} + {o['islands']:<4}"
              f"{r['regions']:>5} + {r['islands']:<4}{ratio:>17.3f}x")


def report_measured(evidence: dict) -> int:
    """Measured median of each bundle's greedy plan, op by op over patterns, per bundle pair;
    the ratio to the all-GPU baseline where the bundle has one (timed in turns)."""
    medians = {}
    for model in evidence["models"]:
        plans = model.get("plans", {})
        medians[model["bundle"]] = {name: plan.get("median_s") for name, plan in plans.items()}
    print(f"device {evidence.get('gpu') or evidence.get('device')}\n"
          f"{'bundle':<28}{'patterns ms':>13}{'op by op ms':>13}{'op/pat':>8}")
    for bundle, plans in medians.items():
        other = medians.get(f"{bundle}_op_by_op")
        if bundle.endswith("_op_by_op") or other is None:
            continue
        mine, theirs = plans.get("greedy"), other.get("greedy")
        if mine and theirs:
            print(f"{bundle:<28}{mine * 1e3:>13.3f}{theirs * 1e3:>13.3f}{theirs / mine:>8.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
