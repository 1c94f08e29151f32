"""Whether a discovered tool's schema is a JSON Schema at all (its meta-schema check).

The discovery parser (``catalog.domain.discovery``) is pure; this is the check it is
handed. A schema is checked against the meta-schema of the dialect its ``$schema`` names
when the installed ``jsonschema`` knows it, else JSON Schema 2020-12 (MCP's default
dialect). Nothing is fetched and no ``$ref`` is resolved: a reference is checked as text,
so a ``$ref`` cycle (recursion is legal JSON Schema) is no problem.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from jsonschema.validators import validator_for


def meta_problem(schema: Mapping[str, Any]) -> str | None:
    """Why ``schema`` breaks its meta-schema (where and what), or None when it does not."""
    try:
        validator_for(schema, default=Draft202012Validator).check_schema(schema)
    except SchemaError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "(root)"
        return f"at {where}: {exc.message}"[:240]
    except RecursionError:
        return "it nests too deep to check"
    return None
