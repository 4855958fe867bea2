"""The zoo's Hugging Face builds (``hf:NAME``): BERT-base and DistilBERT from their configs.

Each builder returns an ``nn.Module`` that takes ``input_ids`` (int64, batch x sequence) and
returns the encoder's last hidden state, with the library's random initialisation (built from a
config: nothing is downloaded); the zoo seeds torch before calling it and exports it as it exports
the torchvision builds. ``transformers`` is not a dependency of the package: importing this
module without it raises a one-line :class:`~partition_lab._optional.MissingDependencyError`.
The small variants shrink the configs to width 32, two layers of two heads, a vocabulary of 1024
and 64 positions.
"""

from __future__ import annotations

from typing import Any

from .._optional import require_transformers
from .._torch_onnx import require_torch

torch = require_torch("the zoo's Hugging Face models")
transformers = require_transformers("the zoo's Hugging Face models (hf:NAME)")

#: The small configs' vocabulary and positions (token ids in tests are drawn below the first).
SMALL_VOCABULARY = 1024
SMALL_POSITIONS = 64


class LastHiddenState(torch.nn.Module):
    """``model(input_ids=...).last_hidden_state``: one tensor in, one out (what is exported).

    The wrapped model is ``self.model``, so the exported nodes are named
    ``model.encoder.layer.0.attention.self.query`` and so on.
    """

    def __init__(self, model: Any) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids: Any) -> Any:
        return self.model(input_ids=input_ids).last_hidden_state


def bert_base(small: bool) -> Any:
    """BERT-base (12 layers, width 768, 12 heads, FFN 3072), without its pooler."""
    config = transformers.BertConfig(
        vocab_size=SMALL_VOCABULARY, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=SMALL_POSITIONS,
    ) if small else transformers.BertConfig()
    return LastHiddenState(transformers.BertModel(config, add_pooling_layer=False))


def distilbert(small: bool) -> Any:
    """DistilBERT-base (6 layers, width 768, 12 heads, FFN 3072)."""
    config = transformers.DistilBertConfig(
        vocab_size=SMALL_VOCABULARY, dim=32, n_layers=2, n_heads=2, hidden_dim=64,
        max_position_embeddings=SMALL_POSITIONS,
    ) if small else transformers.DistilBertConfig()
    return LastHiddenState(transformers.DistilBertModel(config))
