"""JSON Schemas (draft 2020-12) of every JSON file and output partition-lab writes.

* ``plan.schema.json``: ``partition_lab.plan/2``, from ``partition -o PLAN.json`` and
  ``PartitionResult.to_json()``;
* ``compare.schema.json``: ``partition_lab.compare/3``, from ``compare --json``;
* ``profile_cache.schema.json``: ``partition_lab.profile_cache/1``, the file ``profile`` writes;
* ``profile_result.schema.json``: what one ``profile --json`` run did.

Validate with any JSON Schema library, e.g. ``jsonschema.validate(data, load_schema("plan"))``.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from ..errors import PartitionLabError

SCHEMAS = ("plan", "compare", "profile_cache", "profile_result")


def schema_path(name: str) -> Any:
    """The packaged file of schema ``name`` (one of :data:`SCHEMAS`)."""
    if name not in SCHEMAS:
        raise PartitionLabError(f"no schema {name!r}; known: {', '.join(SCHEMAS)}")
    return resources.files(__package__).joinpath(f"{name}.schema.json")


def load_schema(name: str) -> dict[str, Any]:
    """The JSON Schema ``name`` as a dict (``plan``, ``compare``, ``profile_cache``,
    ``profile_result``)."""
    return json.loads(schema_path(name).read_text(encoding="utf-8"))
