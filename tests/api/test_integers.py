"""An integer in an API body is a JSON integer: ``true``, ``1.0`` and ``"1"`` are refused
with the API's 400 shape and a message naming the field, never coerced to 1."""

from __future__ import annotations

from typing import Any

import pytest
from ninja import Schema
from pydantic import ValidationError

from api import v1
from approvals.models import Decision, DecisionRefusal
from runs.models import Evidence, Run
from tests.api.test_api import _checkpoint, bearer, call
from tests.helpers import make_run

pytestmark = pytest.mark.django_db

NOT_INTEGERS = [
    (True, "a boolean (true)"),
    (False, "a boolean (false)"),
    (1.0, "a number with a decimal point (1.0)"),
    (2.5, "a number with a decimal point (2.5)"),
    ("1", "a string"),
    (None, "null"),
]


@pytest.mark.parametrize(("value", "kind"), NOT_INTEGERS)
def test_a_run_start_refuses_a_quantity_that_is_not_a_json_integer(
    world: None, operator: Any, value: Any, kind: str
) -> None:
    response = call("POST", "/runs", bearer(operator), {"quantity": value})
    assert response.status_code == 400, response.content
    assert response.json() == {
        "code": "invalid_request",
        "message": f"body.body.quantity: must be a JSON integer, not {kind}",
    }
    assert not Run.objects.exists()


def test_a_run_start_takes_a_json_integer_quantity(world: None, operator: Any) -> None:
    response = call("POST", "/runs", bearer(operator), {"quantity": 2})
    assert response.status_code == 201, response.content
    request = Evidence.objects.get(run_id=response.json()["id"], kind="request")
    assert request.content["data"]["quantity"] == 2


@pytest.mark.parametrize(("value", "kind"), [v for v in NOT_INTEGERS if v[0] != "1"])
def test_a_requested_change_refuses_a_value_that_is_neither_text_nor_an_integer(
    world: None, operator: Any, approver: Any, value: Any, kind: str
) -> None:
    waiting = make_run(principal="user:operator", requested_by=operator, namespace="live")
    cp = _checkpoint(waiting)
    body = {
        "verdict": "decline",
        "seen_hash": cp.proposal_hash,
        "reason": "another quantity",
        "requested_change": {"quantity": value},
    }
    response = call("POST", f"/checkpoints/{cp.pk}/decision", bearer(approver), body)
    assert response.status_code == 400, response.content
    where = "body.body.requested_change.quantity"
    assert response.json() == {
        "code": "invalid_request",
        "message": f"{where}: must be a string or a JSON integer, not {kind}",
    }
    assert not Decision.objects.exists() and not DecisionRefusal.objects.exists()


def _sample(schema: dict[str, Any]) -> Any:
    if "enum" in schema:
        return schema["enum"][0]
    return {"string": "x", "integer": 1, "boolean": True, "object": {}}.get(schema.get("type"))


def _integer_places(schema: dict[str, Any]) -> list[tuple[str, bool]]:
    """(property, inside a map of values) of every integer a body schema holds."""
    places = []
    for name, prop in schema.get("properties", {}).items():
        for branch in prop.get("anyOf", [prop]):
            if branch.get("type") == "integer":
                places.append((name, False))
            values = branch.get("additionalProperties")
            if isinstance(values, dict) and any(
                v.get("type") == "integer" for v in values.get("anyOf", [values])
            ):
                places.append((name, True))
    return places


def test_every_integer_of_every_request_body_refuses_true_and_one_point_zero() -> None:
    spec = v1.api.get_openapi_schema(path_prefix="/api/v1")
    components = spec["components"]["schemas"]
    bodies = {
        op["requestBody"]["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[-1]
        for path in spec["paths"].values()
        for op in path.values()
        if "requestBody" in op
    }
    checked = []
    for name in sorted(bodies):
        schema = components[name]
        model: type[Schema] = getattr(v1, name)
        base = {k: _sample(schema["properties"][k]) for k in schema.get("required", [])}
        for field, in_map in _integer_places(schema):
            for value in (True, 1.0):
                body = {**base, field: {"k": value} if in_map else value}
                with pytest.raises(ValidationError, match="JSON integer"):
                    model.model_validate(body)
            checked.append(f"{name}.{field}")
    assert checked == ["DecisionIn.requested_change", "RunIn.quantity"]
