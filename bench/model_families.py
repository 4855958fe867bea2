"""Model families on every built-in platform, tuned and held-out (the held-out protocol).

Builds each family of :data:`FAMILIES` from a ``transformers`` config in code (random weights,
``torch.manual_seed(0)``, nothing downloaded; 2 layers, hidden 64, 4 heads, 2 kv heads where the
config has them, vocabulary 1024, sequence 16, images 32x32, audio 0.1 s), loads it with
``partition_lab.load_model(module, example)`` (the ``nn.Module`` route, last hidden state as the
output), partitions it with ``greedy`` on every platform ``partition_lab.targets`` lists,
validates each plan and records ops, units, regions, host islands, false host islands (the rule
of :func:`classify_island`, written down in :data:`RULE`), regions with nothing between them,
host ops and their reasons. A family that does not load is recorded with a one-line reason.

    TOPHUB_LOCATION=NONE .venv/bin/python bench/model_families.py --label before
    TOPHUB_LOCATION=NONE .venv/bin/python bench/model_families.py --label after
    .venv/bin/python bench/model_families.py --table     # the page from the JSON files only

Writes ``docs/evidence/results/families_<label>.json`` and then the generated page
``docs/evidence/families.md`` from every ``families_before.json`` / ``families_after.json``
there (tuned and held-out apart, ``before -> after`` where both exist; the held-out rows stay
sealed, totals only, until an after run exists). ``--families`` or ``--group`` pick families
(with ``--out`` elsewhere: such a run is not a baseline). ``python -m bench run families`` runs
the tuned group into ``bench/results/``; ``--full`` is the after run of every family.
"""

from __future__ import annotations

import argparse
import json
import os
import platform as host_platform
import sys
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("TOPHUB_LOCATION", "NONE")

from partition_lab.core.graph import OpGraph  # noqa: E402
from partition_lab.core.pattern_library import PATTERNS  # noqa: E402
from partition_lab.core.patterns import find_units  # noqa: E402
from partition_lab.core.plan import PartitionPlan  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "docs" / "evidence" / "results"
PAGE = ROOT / "docs" / "evidence" / "families.md"
TUNED, HELD_OUT = "tuned", "held-out"

PROTOCOL = """\
Fixed before any pattern, importer or target work of this round, and not changed after:

- **Tuned** (patterns, importers, folding and region merging may be developed and checked on
  these): Llama, Phi, Gemma, BERT, ViT, Swin, Whisper (encoder), Wav2Vec2, DETR, and an
  einsum-attention ViT (a small torch module whose attention matmuls are `torch.einsum`), plus
  the suite's torchvision models.
- **Held-out** (not built, loaded or looked at by anyone changing patterns, importers or
  targets until that work is merged; only this benchmark builds them): Qwen2, Mistral, Phi3,
  GPT-NeoX, StableLM, CLIP (vision), Hubert, DINOv2.
- Every family is built from a `transformers` 5.x config in code (random weights,
  `torch.manual_seed(0)`): 2 layers, hidden 64, 4 heads, 2 key/value heads where the config has
  them, vocabulary 1024, sequence 16, images 32x32 (DETR 64x64: its backbone downsamples 32x),
  audio 1,600 samples (0.1 s at 16 kHz; Whisper 32 mel frames). Loaded with
  `partition_lab.load_model(module, example)`, output the last hidden state; decoders are called
  with `use_cache=False`. Partitioned with `greedy` on every built-in platform, validated.
- The "before" figures are the main branch before the round's work; the "after" figures the
  same command on the merged work. Both use the island rule below, applied by code
  (`bench/model_families.py`, `classify_island`), written before any after-figure existed.
"""

RULE = """\
A host island is a region on the host (`cpu`) of a platform that has an accelerator. Each of its
ops is judged against the platform's first accelerator (its *target*); the island is **false**
when every op in it is one of the following, and **real** otherwise:

1. **constant**: computed only from constants (no path from a graph input reaches it); folding
   before partitioning removes it.
2. **rewrite**: an op missing from the target's op table that has a known exact rewrite into
   an op the table lists: `einsum` of two operands (a batched matrix product: `nn.batch_matmul`
   with transposes and reshapes), `nn.conv1d` (as `nn.conv2d` of height 1),
   `nn.conv1d_transpose` (as `nn.conv2d_transpose`). An op the table lists but a rule rejects
   (a grouped `nn.conv1d` where groups are not supported) is not a rewrite: its replacement
   would meet the same rule.
3. **identity**: a `cast`, `cast_like` or `copy` whose output has the shape and dtype of the
   value it casts (its first argument; removing it computes the same).
4. **piece**: an op inside a unit of the built-in pattern library (found in the graph as the
   partitioner finds units) that the target would accept judged whole: every op the pattern
   stands for is in the target's op table (a pattern standing for no op: every op of the unit
   is).

Real islands keep their ops' own reasons (int64 ids, ops the target does not have, a unit the
target rejects whole). **Adjacent regions** counts pairs of regions on one device joined by a
tensor with nothing between them (they could be one region). On a platform whose only device
is the host (`cpu`) there are no islands to count.
"""

#: op -> the op it is rewritten to, exactly (rule 2).
REWRITES = {"einsum": "nn.batch_matmul", "nn.conv1d": "nn.conv2d",
            "nn.conv1d_transpose": "nn.conv2d_transpose"}
CLASSES = ("constant", "rewrite", "identity", "piece")
#: Ops that compute their input unchanged when their output has its type (rule 3).
IDENTITIES = frozenset({"cast", "cast_like", "copy"})
SEQUENCE, VOCAB, HIDDEN, HEADS, KV_HEADS, LAYERS = 16, 1024, 64, 4, 2, 2


# ----------------------------------------------------------------------------- the rule
def constant_only(graph: OpGraph) -> list[bool]:
    """Per node: whether it is computed only from constants (no graph input reaches it)."""
    live = [False] * len(graph)
    for tensor in graph.tensors:
        if tensor.producer is None:
            for consumer in tensor.consumers:
                live[consumer] = True
    for node in graph:  # ids are in topological order
        if not live[node.id] and any(live[p] for p in graph.predecessors(node.id)):
            live[node.id] = True
    return [not alive for alive in live]


def piece_nodes(graph: OpGraph, target: Any, library: Sequence[Any] = PATTERNS) -> set[int]:
    """Nodes inside a unit of ``library`` that ``target`` would accept judged whole (rule 4)."""
    found: set[int] = set()
    for unit in find_units(graph, library):
        ops = unit.pattern.stands_for or tuple(graph[n].op for n in unit.nodes)
        if all(target.supports_op(op) for op in ops):
            found.update(unit.nodes)
    return found


def op_class(graph: OpGraph, node: int, target: Any, constants: Sequence[bool],
             pieces: set[int]) -> str:
    """``constant``, ``rewrite``, ``identity``, ``piece`` (a false host op, rules 1-4) or
    ``real``."""
    if constants[node]:
        return "constant"
    op = graph[node]
    replacement = REWRITES.get(op.op)
    if replacement and not target.supports_op(op.op) and target.supports_op(replacement) and (
            op.op != "einsum" or len(op.inputs) == 2):
        return "rewrite"
    operands = op.args or op.inputs  # args: in call order, constants too (cast_like's data)
    if op.op in IDENTITIES and operands and op.outputs == (operands[0],):
        return "identity"
    if node in pieces:
        return "piece"
    return "real"


def classify_island(classes: Sequence[str]) -> str:
    """An island of ops of these classes: ``false`` when none is ``real``."""
    return "real" if "real" in classes or not classes else "false"


def adjacent_regions(plan: PartitionPlan) -> int:
    """Pairs of regions on one device joined by a tensor (nothing between them)."""
    pairs = set()
    for u, v in plan.graph.nx.edges:
        ru, rv = plan.decisions[u].region, plan.decisions[v].region
        if ru != rv and plan.regions[ru].device == plan.regions[rv].device:
            pairs.add((min(ru, rv), max(ru, rv)))
    return len(pairs)


def accelerator_target(plan: PartitionPlan) -> Any:
    """The target rule 2 and 3 ask: the platform's most preferred accelerator's."""
    return plan.platform.primary.target


def plan_figures(plan: PartitionPlan, library: Sequence[Any] = PATTERNS) -> dict[str, Any]:
    """One plan's row: ops, units, regions, islands (and false ones), host ops and reasons."""
    graph, host = plan.graph, plan.platform.host.name
    single = len(plan.platform.devices) == 1
    target = accelerator_target(plan)
    constants = constant_only(graph)
    pieces = set() if single else piece_nodes(graph, target, library)
    islands = []
    for region in ([] if single else plan.cpu_regions):
        classes = [op_class(graph, n, target, constants, pieces) for n in region.nodes]
        islands.append({"ops": len(region.nodes), "verdict": classify_island(classes),
                        "classes": dict(Counter(classes)),
                        "op_types": dict(Counter(graph[n].op for n in region.nodes))})
    decisions = [] if single else [d for d in plan.decisions if d.device == host]
    reasons = Counter(short_reason(d.reason) for d in decisions)
    return {"ops": len(graph), "units": len(plan.support.units),
            "unit_kinds": dict(Counter(u.name for u in plan.support.units).most_common()),
            "regions": len(plan.accelerator_regions), "islands": len(islands),
            "false_islands": sum(i["verdict"] == "false" for i in islands),
            "false_by_class": dict(sum((Counter(i["classes"]) for i in islands
                                        if i["verdict"] == "false"), Counter())),
            "adjacent_regions": adjacent_regions(plan), "host_ops": len(decisions),
            "host_op_types": dict(Counter(graph[d.node].op for d in decisions).most_common()),
            "reasons": reasons.most_common(), "island_list": islands}


def short_reason(text: str, limit: int = 110) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[:limit - 3] + "..."


# ----------------------------------------------------------------------------- the families
@dataclass(frozen=True)
class Family:
    name: str
    group: str
    build: Callable[[], tuple[Any, Any]]  #: (module, example input), both torch


def _wrap(model: Any, keyword: str, **extra: Any) -> Any:
    import torch

    class LastHiddenState(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, x):  # noqa: ANN001, ANN202
            return self.model(**{keyword: x}, **extra).last_hidden_state

    return LastHiddenState().eval()


def _ids() -> Any:
    import torch

    return torch.randint(0, VOCAB, (1, SEQUENCE), generator=torch.Generator().manual_seed(1))


def _image(size: int = 32) -> Any:
    import torch

    return torch.randn(1, 3, size, size, generator=torch.Generator().manual_seed(1))


def _audio() -> Any:
    import torch

    return torch.randn(1, 1600, generator=torch.Generator().manual_seed(1))


def _decoder(config_name: str, model_name: str, **extra: Any) -> Callable[[], tuple[Any, Any]]:
    def build() -> tuple[Any, Any]:
        import torch
        import transformers

        config = getattr(transformers, config_name)(
            vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=2 * HIDDEN,
            num_hidden_layers=LAYERS, num_attention_heads=HEADS, max_position_embeddings=64,
            **extra)
        torch.manual_seed(0)
        return _wrap(getattr(transformers, model_name)(config), "input_ids",
                     use_cache=False), _ids()
    return build


def _bert() -> tuple[Any, Any]:
    import torch
    import transformers

    config = transformers.BertConfig(vocab_size=VOCAB, hidden_size=HIDDEN,
                                     num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                                     intermediate_size=2 * HIDDEN, max_position_embeddings=64)
    torch.manual_seed(0)
    return _wrap(transformers.BertModel(config, add_pooling_layer=False), "input_ids"), _ids()


def _vision(config_name: str, model_name: str, **extra: Any) -> Callable[[], tuple[Any, Any]]:
    def build() -> tuple[Any, Any]:
        import torch
        import transformers

        config = getattr(transformers, config_name)(
            image_size=32, patch_size=8, hidden_size=HIDDEN, num_hidden_layers=LAYERS,
            num_attention_heads=HEADS, intermediate_size=2 * HIDDEN, **extra)
        torch.manual_seed(0)
        model = getattr(transformers, model_name)(config)
        return _wrap(model, "pixel_values"), _image()
    return build


def _swin() -> tuple[Any, Any]:
    import torch
    import transformers

    # One stage of two blocks (the second shifted), width 64, 4 heads, 4x4 windows.
    config = transformers.SwinConfig(image_size=32, patch_size=4, embed_dim=HIDDEN, depths=[2],
                                     num_heads=[HEADS], window_size=4)
    torch.manual_seed(0)
    return _wrap(transformers.SwinModel(config, add_pooling_layer=False), "pixel_values"), \
        _image()


def _whisper() -> tuple[Any, Any]:
    import torch
    import transformers
    from transformers.models.whisper.modeling_whisper import WhisperEncoder

    config = transformers.WhisperConfig(
        vocab_size=VOCAB, d_model=HIDDEN, encoder_layers=LAYERS, decoder_layers=LAYERS,
        encoder_attention_heads=HEADS, decoder_attention_heads=HEADS,
        encoder_ffn_dim=2 * HIDDEN, decoder_ffn_dim=2 * HIDDEN, num_mel_bins=80,
        max_source_positions=16, max_target_positions=16)
    torch.manual_seed(0)
    features = torch.randn(1, 80, 32, generator=torch.Generator().manual_seed(1))
    return _wrap(WhisperEncoder(config), "input_features"), features


def _speech(config_name: str, model_name: str) -> Callable[[], tuple[Any, Any]]:
    def build() -> tuple[Any, Any]:
        import torch
        import transformers

        config = getattr(transformers, config_name)(
            vocab_size=32, hidden_size=HIDDEN, num_hidden_layers=LAYERS,
            num_attention_heads=HEADS, intermediate_size=2 * HIDDEN, conv_dim=(32, 32, 32),
            conv_stride=(5, 2, 2), conv_kernel=(10, 3, 3), num_conv_pos_embeddings=16,
            num_conv_pos_embedding_groups=4)
        torch.manual_seed(0)
        return _wrap(getattr(transformers, model_name)(config), "input_values"), _audio()
    return build


def _detr() -> tuple[Any, Any]:
    import torch
    import transformers

    backbone = transformers.ResNetConfig(embedding_size=16, hidden_sizes=[16, 32, 64, 128],
                                         depths=[1, 1, 1, 1], layer_type="basic",
                                         out_features=["stage4"])
    config = transformers.DetrConfig(
        use_timm_backbone=False, backbone_config=backbone, use_pretrained_backbone=False,
        d_model=HIDDEN, encoder_layers=LAYERS, decoder_layers=LAYERS,
        encoder_attention_heads=HEADS, decoder_attention_heads=HEADS,
        encoder_ffn_dim=2 * HIDDEN, decoder_ffn_dim=2 * HIDDEN, num_queries=16)
    torch.manual_seed(0)
    return _wrap(transformers.DetrModel(config), "pixel_values"), _image(64)


def _einsum_vit() -> tuple[Any, Any]:
    """A ViT (patch 8, cls token, 2 pre-norm blocks) whose attention matmuls are einsums."""
    import torch

    class Block(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.norm1, self.norm2 = torch.nn.LayerNorm(HIDDEN), torch.nn.LayerNorm(HIDDEN)
            self.qkv, self.proj = torch.nn.Linear(HIDDEN, 3 * HIDDEN), torch.nn.Linear(HIDDEN,
                                                                                       HIDDEN)
            self.mlp = torch.nn.Sequential(torch.nn.Linear(HIDDEN, 2 * HIDDEN), torch.nn.GELU(),
                                           torch.nn.Linear(2 * HIDDEN, HIDDEN))

        def forward(self, x):  # noqa: ANN001, ANN202
            b, n, c = x.shape
            q, k, v = self.qkv(self.norm1(x)).reshape(b, n, 3, HEADS, c // HEADS) \
                .permute(2, 0, 3, 1, 4)
            weights = (torch.einsum("bhid,bhjd->bhij", q, k) * (c // HEADS) ** -0.5) \
                .softmax(dim=-1)
            out = torch.einsum("bhij,bhjd->bhid", weights, v).transpose(1, 2).reshape(b, n, c)
            x = x + self.proj(out)
            return x + self.mlp(self.norm2(x))

    class EinsumViT(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.patch = torch.nn.Conv2d(3, HIDDEN, 8, stride=8)
            self.cls = torch.nn.Parameter(torch.randn(1, 1, HIDDEN))
            self.pos = torch.nn.Parameter(torch.randn(1, 17, HIDDEN))
            self.blocks = torch.nn.Sequential(*(Block() for _ in range(LAYERS)))
            self.norm = torch.nn.LayerNorm(HIDDEN)

        def forward(self, x):  # noqa: ANN001, ANN202
            x = self.patch(x).flatten(2).transpose(1, 2)
            x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
            return self.norm(self.blocks(x))

    torch.manual_seed(0)
    return EinsumViT().eval(), _image()


FAMILIES: tuple[Family, ...] = (
    Family("llama", TUNED, _decoder("LlamaConfig", "LlamaModel", num_key_value_heads=KV_HEADS)),
    Family("phi", TUNED, _decoder("PhiConfig", "PhiModel", num_key_value_heads=KV_HEADS)),
    Family("gemma", TUNED, _decoder("GemmaConfig", "GemmaModel", num_key_value_heads=KV_HEADS,
                                    head_dim=HIDDEN // HEADS)),
    Family("bert", TUNED, _bert),
    Family("vit", TUNED, _vision("ViTConfig", "ViTModel")),
    Family("swin", TUNED, _swin),
    Family("whisper_encoder", TUNED, _whisper),
    Family("wav2vec2", TUNED, _speech("Wav2Vec2Config", "Wav2Vec2Model")),
    Family("detr", TUNED, _detr),
    Family("einsum_vit", TUNED, _einsum_vit),
    Family("qwen2", HELD_OUT, _decoder("Qwen2Config", "Qwen2Model",
                                       num_key_value_heads=KV_HEADS)),
    Family("mistral", HELD_OUT, _decoder("MistralConfig", "MistralModel",
                                         num_key_value_heads=KV_HEADS)),
    Family("phi3", HELD_OUT, _decoder("Phi3Config", "Phi3Model", num_key_value_heads=KV_HEADS,
                                      pad_token_id=0)),
    Family("gpt_neox", HELD_OUT, _decoder("GPTNeoXConfig", "GPTNeoXModel")),
    Family("stablelm", HELD_OUT, _decoder("StableLmConfig", "StableLmModel",
                                          num_key_value_heads=KV_HEADS)),
    Family("clip_vision", HELD_OUT, _vision("CLIPVisionConfig", "CLIPVisionModel")),
    Family("hubert", HELD_OUT, _speech("HubertConfig", "HubertModel")),
    Family("dinov2", HELD_OUT, _vision("Dinov2Config", "Dinov2Model", mlp_ratio=2)),
)


# ----------------------------------------------------------------------------- the run
def one_line(exc: BaseException, limit: int = 200) -> str:
    """An exception as one line (ANSI colours and blank lines dropped)."""
    import re

    text = re.sub(r"\x1b\[[0-9;]*m", "", str(exc))
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return short_reason(f"{type(exc).__name__}: {first}", limit)


def run_family(family: Family, platforms: Sequence[str]) -> dict[str, Any]:
    """Build, load and partition one family; failures recorded, not raised."""
    import partition_lab

    record: dict[str, Any] = {"name": family.name, "group": family.group, "plans": {}}
    start = time.perf_counter()
    try:
        module, example = family.build()
    except Exception as exc:  # noqa: BLE001 - a build failure is data
        record["load_failure"] = "build: " + one_line(exc)
        return record
    try:
        mod, params = partition_lab.load_model(module, example)
    except Exception as exc:  # noqa: BLE001 - a load failure is data
        record["load_failure"] = one_line(exc)
        record["load_seconds"] = round(time.perf_counter() - start, 1)
        return record
    record["load_seconds"] = round(time.perf_counter() - start, 1)
    for name in platforms:
        begin = time.perf_counter()
        try:
            result = partition_lab.partition(mod, name, params=params, strategy="greedy",
                                             name=family.name)
            result.plan.validate()
            figures = plan_figures(result.plan)
        except Exception as exc:  # noqa: BLE001 - a partition failure is data
            figures = {"failure": one_line(exc)}
        else:
            record.setdefault("exporter", result.graph.exporter)
        figures["seconds"] = round(time.perf_counter() - begin, 2)
        record["plans"][name] = figures
    return record


def versions() -> dict[str, str]:
    import importlib.metadata as md

    found = {}
    for package in ("partition_lab", "tvm", "torch", "transformers", "onnx", "onnxscript"):
        try:
            found[package] = md.version(package if package != "tvm" else "apache-tvm")
        except md.PackageNotFoundError:
            try:
                found[package] = __import__(package).__version__
            except Exception:  # noqa: BLE001
                found[package] = "?"
    return found


def run(label: str, names: Sequence[str], command: str) -> dict[str, Any]:
    from partition_lab._tvm_logs import quiet_tvm_logs
    from partition_lab.targets import available_targets

    platforms = available_targets()
    chosen = [f for f in FAMILIES if f.name in names]
    start = time.perf_counter()
    records = []
    with quiet_tvm_logs(True):
        for family in chosen:
            records.append(run_family(family, platforms))
            r = records[-1]
            status = r.get("load_failure") or ", ".join(
                f"{p}: {f.get('islands', '?')} islands" for p, f in r["plans"].items())
            print(f"{family.name} ({family.group}): {status}", file=sys.stderr, flush=True)
    return {"label": label, "command": command, "protocol": PROTOCOL, "rule": RULE,
            "platforms": platforms, "machine": f"{host_platform.node()} "
            f"({os.cpu_count()} cores)", "versions": versions(),
            "seconds": round(time.perf_counter() - start, 1), "families": records}


# ----------------------------------------------------------------------------- the page
LABELS = ("before", "after")


def _pair(values: Sequence[Any]) -> str:
    shown = ["-" if v is None else str(v) for v in values]
    return shown[0] if len(set(shown)) == 1 else " -> ".join(shown)


def _plans(runs: Sequence[Mapping[str, Any]], group: str
           ) -> dict[tuple[str, str], list[Mapping[str, Any] | None]]:
    """``(family, platform) -> [figures per run]`` (a load failure as ``{"failure": ...}``)."""
    table: dict[tuple[str, str], list[Mapping[str, Any] | None]] = {}
    for index, data in enumerate(runs):
        for record in data["families"]:
            if record["group"] != group:
                continue
            for platform in data["platforms"]:
                key = (record["name"], platform)
                row = table.setdefault(key, [None] * len(runs))
                if "load_failure" in record:
                    row[index] = {"failure": "does not load"}
                else:
                    row[index] = record["plans"].get(platform)
    return table


FIELDS = ("ops", "units", "regions", "islands", "false_islands", "adjacent_regions", "host_ops")


def group_table(runs: Sequence[Mapping[str, Any]], group: str) -> list[str]:
    lines = ["| family | platform | ops | units | regions | host islands | false islands | "
             "adjacent regions | host ops | host reasons (" + runs[-1]["label"] + ") |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for (family, platform), row in _plans(runs, group).items():
        cells = [_pair([None if r is None or "failure" in r else r.get(f) for r in row])
                 for f in FIELDS]
        last = row[-1] or {}
        if last.get("false_by_class"):
            cells[FIELDS.index("false_islands")] += " (" + ", ".join(
                f"{n} {kind}" for kind, n in sorted(last["false_by_class"].items())) + " ops)"
        if "failure" in last:
            why = last["failure"]
        else:
            why = "; ".join(f"{n}x {text}" for text, n in last.get("reasons", [])[:2]) or "-"
        lines.append(f"| {family} | {platform} | " + " | ".join(cells) + f" | {why} |")
    return lines


def totals(data: Mapping[str, Any], group: str) -> dict[str, int]:
    """Sums over a run's plans of one group, on the platforms with an accelerator."""
    sums = dict.fromkeys(("families", "load_failures", "plans", "plan_failures", "regions",
                          "islands", "false_islands", "false_lookups", "adjacent_regions",
                          "host_ops"), 0)
    for record in data["families"]:
        if record["group"] != group:
            continue
        sums["families"] += 1
        if "load_failure" in record:
            sums["load_failures"] += 1
            continue
        for platform, figures in record["plans"].items():
            if platform == "cpu":
                continue
            sums["plans"] += 1
            if "failure" in figures:
                sums["plan_failures"] += 1
                continue
            for key in ("regions", "islands", "false_islands", "adjacent_regions", "host_ops"):
                sums[key] += figures[key]
            sums["false_lookups"] += sum(map(is_false_lookup, figures.get("island_list", ())))
    return sums


#: The ops of an embedding lookup with negative-index normalisation (the ``embedding`` unit).
LOOKUP_OPS = frozenset({"less", "add", "where", "take"})


def is_false_lookup(island: Mapping[str, Any]) -> bool:
    """A false island that is an embedding lookup alone: rule 4 reads the target's op table, in
    which ``take`` is, not its dtype rules, which reject int64 ids; so once the lookup is a unit
    (after this round) the int64 lookup counts as false although it is real. Shown apart rather
    than the rule changed after the after run."""
    return island["verdict"] == "false" and set(island["op_types"]) == LOOKUP_OPS


LOOKUP_NOTE = (
    "\"of which int64 lookups\": false islands that are an embedding lookup alone (`less`, "
    "`add`, `where`, `take`). Rule 4 asks whether the ops a unit stands for are in the target's "
    "op table; `take` is, but neuron's dtype rule rejects int64 ids, so the lookup is a real "
    "island. Before this round the lookup was no unit and counted as real; now it is the "
    "`embedding` unit and rule 4 counts it as false. The rule was fixed before the after run "
    "and is not changed after it; this column, computed by code from the same islands, shows "
    "how many of the false islands are this flaw of the rule.")


def markdown(runs: Sequence[Mapping[str, Any]]) -> str:
    labels = " -> ".join(r["label"] for r in runs)
    lines = ["# Model families, tuned and held-out", "",
             "Generated by `bench/model_families.py` from "
             + ", ".join(f"`docs/evidence/results/families_{r['label']}.json`" for r in runs)
             + " (do not edit). Columns show `" + labels + "` where the runs differ. "
             "The per-model pattern table is [patterns.md](patterns.md).", "",
             "## The protocol", "", PROTOCOL, "## The island rule", "", RULE,
             "## Totals (platforms with an accelerator)", "",
             "| group | " + " | ".join(("families", "load failures", "plans", "plan failures",
                                        "regions", "host islands", "false islands",
                                        "of which int64 lookups", "adjacent regions",
                                        "host ops")) + " |",
             "|---|" + "---|" * 10]
    for group in (TUNED, HELD_OUT):
        sums = [totals(r, group) for r in runs]
        lines.append(f"| {group} | " + " | ".join(_pair([s[k] for s in sums])
                                                 for k in sums[0]) + " |")
    lines += ["", LOOKUP_NOTE]
    sealed = len(runs) < 2
    for group in (TUNED, HELD_OUT):
        lines += ["", f"## {group.capitalize()} families", ""]
        if group == HELD_OUT and sealed:
            lines.append("Sealed until the after run: the held-out figures are in the JSON, and "
                         "only their totals are shown here, so that no one tuning patterns, "
                         "importers or targets reads them.")
            continue
        lines += group_table(runs, group)
        failures = [(r["label"], f["name"], f["load_failure"]) for r in runs
                    for f in r["families"] if f["group"] == group and "load_failure" in f]
        if failures:
            lines += ["", "Load failures:", ""]
            lines += [f"- {label}: {name}: {why}" for label, name, why in failures]
    lines += ["", "## Runs", "", "| run | seconds | machine | versions | command |",
              "|---|---|---|---|---|"]
    for r in runs:
        v = ", ".join(f"{k} {x}" for k, x in r["versions"].items())
        lines.append(f"| {r['label']} | {r['seconds']:.0f} | {r['machine']} | {v} | "
                     f"`{r['command']}` |")
    return "\n".join(lines) + "\n"


def write_page(results: Path = RESULTS, page: Path = PAGE) -> str | None:
    runs = [json.loads(p.read_text(encoding="utf-8")) for label in LABELS
            if (p := results / f"families_{label}.json").is_file()]
    if not runs:
        return None
    text = markdown(runs)
    page.write_text(text, encoding="utf-8")
    return text


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--label", choices=LABELS, default="after")
    parser.add_argument("--families", help="comma-separated names (default: all)")
    parser.add_argument("--group", choices=(TUNED, HELD_OUT), help="one group only")
    parser.add_argument("--out", type=Path,
                        help="the JSON file (default: docs/evidence/results/families_LABEL.json)")
    parser.add_argument("--table", action="store_true",
                        help="only write the page from the JSON files there")
    args = parser.parse_args(argv)
    if not args.table:
        command = "bench/model_families.py " + " ".join(argv if argv is not None
                                                        else sys.argv[1:])
        names = [f.name for f in FAMILIES if (not args.group or f.group == args.group)
                 and (not args.families or f.name in args.families.split(","))]
        data = run(args.label, names, command.strip())
        out = args.out or RESULTS / f"families_{args.label}.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {out} ({data['seconds']:.0f} s)", file=sys.stderr)
    text = write_page()
    print(f"wrote {PAGE.relative_to(ROOT)}" if text else "no families_*.json yet",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
