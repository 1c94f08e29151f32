"""Property-based requests generated from the published OpenAPI schema (Hypothesis
strategies built from its JSON Schemas, ``from_schema`` below): whoever calls, with
whatever body the schema allows (and some it does not), the API never answers 5xx,
answers only statuses its schema documents, with bodies that match the documented
schema, and never returns another tenant's data."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

import jsonschema
import pytest
from django.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from api.tokens import token_create
from approvals.models import Checkpoint
from tests.conftest import make_user
from tests.helpers import make_run

pytestmark = pytest.mark.django_db


def _schema() -> dict[str, Any]:
    return json.loads(Client().get("/api/v1/schema/").content)


def _inline(node: Any, components: dict[str, Any]) -> Any:
    """The schema with every local $ref replaced by what it names (ours do not recurse)."""
    if isinstance(node, dict):
        if "$ref" in node:
            name = node["$ref"].rsplit("/", 1)[-1]
            return _inline(components[name], components)
        return {k: _inline(v, components) for k, v in node.items()}
    if isinstance(node, list):
        return [_inline(v, components) for v in node]
    return node


def from_schema(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values valid for the JSON Schema subset the API publishes (objects with properties,
    strings, integers, booleans, enums, anyOf, null, maps). hypothesis-jsonschema would do
    this, but its 0.23 release fails on the Hypothesis version the project pins."""
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if "anyOf" in schema:
        return st.one_of(*(from_schema(s) for s in schema["anyOf"]))
    kind = schema.get("type")
    if kind == "string":
        fmt = schema.get("format")
        if fmt == "uuid":
            return st.uuids().map(str)
        return st.text(max_size=schema.get("maxLength", 80))
    if kind == "integer":
        return st.integers(min_value=-(2**40), max_value=2**40)
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    if kind == "object":
        props = schema.get("properties", {})
        required = set(schema.get("required", ()))
        fixed = {k: from_schema(v) for k, v in props.items() if k in required}
        optional = {k: from_schema(v) for k, v in props.items() if k not in required}
        base = st.fixed_dictionaries(fixed, optional=optional)
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict) and not props:
            return st.dictionaries(st.text(max_size=12), from_schema(extra), max_size=5)
        return base
    if kind == "array":
        return st.lists(from_schema(schema.get("items", {})), max_size=3)
    return st.none() | st.integers() | st.text(max_size=5)


@pytest.fixture
def scene(world: None) -> dict[str, Any]:
    """Two tenants, each with a waiting checkpoint; principals of every kind."""
    north_op = make_user("operator", "north", "operator")
    south_op = make_user("operator-s", "south", "operator")
    north_run = make_run(principal="user:operator", requested_by=north_op, namespace="live")
    south_run = make_run(
        principal="user:operator-s",
        requested_by=south_op,
        namespace="live",
        tenant="south",
        equipment_id="EQ-31",
        location_id="LOC-S1",
    )
    principals = {
        "approver": make_user("approver", "north", "approver"),
        "operator": north_op,
        "both": make_user("lead", "north", "approver", "operator"),
        "outsider": make_user("outsider", "north"),
    }
    tokens = {name: token_create(user=u, name="fuzz")[1] for name, u in principals.items()}
    tokens["anonymous"] = ""
    tokens["garbage"] = "fo_nothere_xxxxxxxx"
    north_cp = Checkpoint.objects.get(pk=north_run.waiting_checkpoint)
    south_cp = Checkpoint.objects.get(pk=south_run.waiting_checkpoint)
    return {
        "tokens": tokens,
        "ids": {
            "run_id": [str(north_run.pk), str(south_run.pk), "not-a-uuid", "0" * 32],
            "checkpoint_id": [north_cp.pk, south_cp.pk, "cp_missing", "cp x;'<"],
        },
        "hashes": [north_cp.proposal_hash, south_cp.proposal_hash],
        "foreign": {str(south_run.pk), south_cp.pk, south_cp.proposal_hash},
    }


SCHEMA_CACHE: dict[str, Any] = {}


def operations() -> list[tuple[str, str]]:
    from api.v1 import api

    schema = api.get_openapi_schema()
    return [(path, method) for path, ops in schema["paths"].items() for method in ops]


@pytest.mark.parametrize(("path", "method"), operations())
@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_the_api_honours_its_published_schema(scene, path, method, data):
    schema = SCHEMA_CACHE.setdefault("v1", _schema())
    components = schema["components"]["schemas"]
    operation = _inline(schema["paths"][path][method], components)
    principal = data.draw(st.sampled_from(sorted(scene["tokens"])), label="principal")
    url = path
    query: dict[str, Any] = {}
    for param in operation.get("parameters", []):
        if param["in"] == "path":
            value = data.draw(st.sampled_from(scene["ids"][param["name"]]), label=param["name"])
            url = url.replace("{" + param["name"] + "}", quote(value, safe=""))
        elif param["in"] == "query" and data.draw(st.booleans(), label=f"send {param['name']}"):
            query[param["name"]] = data.draw(
                st.one_of(from_schema(param["schema"]), st.text(max_size=8)),
                label=param["name"],
            )
    body: Any = None
    if "requestBody" in operation:
        body_schema = operation["requestBody"]["content"]["application/json"]["schema"]
        body = data.draw(
            st.one_of(
                from_schema(body_schema),
                st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5)),
            ),
            label="body",
        )
        if isinstance(body, dict) and "seen_hash" in body and data.draw(st.booleans()):
            body["seen_hash"] = data.draw(st.sampled_from(scene["hashes"]))
    token = scene["tokens"][principal]
    headers = {"HTTP_AUTHORIZATION": f"Bearer {token}"} if token else {}
    client = Client()
    if method == "get":
        response = client.get(url, {k: str(v) for k, v in query.items()}, **headers)
    else:
        response = client.post(
            url, data=json.dumps(body), content_type="application/json", **headers
        )
    status = response.status_code
    assert status < 500, (method, url, body, response.content[:300])
    documented = operation["responses"]
    assert str(status) in documented, (method, url, principal, status, response.content[:300])
    content = documented[str(status)].get("content", {}).get("application/json")
    payload = response.json()
    if content:
        jsonschema.validate(payload, content["schema"])
    text = response.content.decode()
    if principal != "anonymous":
        leaked = [f for f in scene["foreign"] if f in text]
        assert not leaked, (method, url, principal, leaked)
