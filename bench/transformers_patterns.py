"""BERT-base and DistilBERT (Hugging Face ``transformers``, from configs, random weights, nothing
downloaded): regions and host islands with patterns and op by op.

``transformers`` is not a dependency of the package; install it beside it to run this::

    .venv/bin/pip install transformers
    TOPHUB_LOCATION=NONE .venv/bin/python bench/transformers_patterns.py [--small] [--models bert,distilbert]

Each model takes ``input_ids`` of shape (1, 128) (16 with ``--small``, where the configs are
shrunk to width 32 and two layers) and returns its last hidden state; it goes through the
PyTorch input route (``torch.export`` -> ONNX -> Relay) and is partitioned with ``greedy`` on
``neuron``, ``neuron@2020`` and ``tensorcore``. Writes ``docs/evidence/results/transformers_patterns.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("TOPHUB_LOCATION", "NONE")

import partition_lab  # noqa: E402
from partition_lab.relay.frontends._torch import require_torch  # noqa: E402
from partition_lab.targets import get_platform  # noqa: E402
from partition_lab.targets.devices import without_patterns  # noqa: E402

torch = require_torch("the transformers benchmark")
PLATFORMS = ("neuron", "neuron@2020", "tensorcore")
RESULTS = Path(__file__).parent / "results" / "transformers_patterns.json"


def build(kind: str, small: bool) -> object:
    import transformers

    torch.manual_seed(0)
    if kind == "bert":
        config = (transformers.BertConfig(hidden_size=32, num_hidden_layers=2,
                                          num_attention_heads=2, intermediate_size=64)
                  if small else transformers.BertConfig())
        model = transformers.BertModel(config, add_pooling_layer=False)
    else:
        config = (transformers.DistilBertConfig(dim=32, n_layers=2, n_heads=2, hidden_dim=64)
                  if small else transformers.DistilBertConfig())
        model = transformers.DistilBertModel(config)

    class LastHiddenState(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids):  # noqa: ANN001, ANN202
            return self.model(input_ids=input_ids).last_hidden_state

    return LastHiddenState().eval()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="bert,distilbert")
    parser.add_argument("--small", action="store_true")
    args = parser.parse_args()
    rows = []
    for kind in args.models.split(","):
        ids = torch.randint(0, 1000, (1, 16 if args.small else 128))
        mod, params = partition_lab.load_model(build(kind, args.small), ids)
        for name in PLATFORMS:
            for patterns in (False, True):
                platform = get_platform(name)
                if not patterns:
                    platform = without_patterns(platform)
                plan = partition_lab.partition(mod, platform, params=params,
                                               strategy="greedy").plan
                host = [d for d in plan.decisions if d.device == "cpu"]
                rows.append({"model": kind, "small": args.small, "platform": name,
                             "patterns": patterns, "regions": len(plan.accelerator_regions),
                             "islands": len(plan.cpu_regions), "host_ops": len(host),
                             "host_op_names": sorted({plan.graph[d.node].op for d in host})})
                print(json.dumps(rows[-1]), flush=True)
    RESULTS.write_text(json.dumps({"command": " ".join(sys.argv), "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
