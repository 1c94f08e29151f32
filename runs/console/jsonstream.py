"""JSON documents written piece by piece, byte for byte as ``json.dumps(..., indent=2)``
with Django's encoder (what ``JsonResponse(..., json_dumps_params={"indent": 2})`` sends)
would write them whole, for documents whose long lists are read as they are written."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder

# Items encoded per piece handed to the response (one write per item would be many).
BATCH = 500


def dumps(value: Any) -> str:
    return json.dumps(value, cls=DjangoJSONEncoder, indent=2)


def document(head: Mapping[str, Any], lists: Mapping[str, Iterable[Any]]) -> Iterator[str]:
    """The pieces of ``dumps({**head, key: list(items) for key, items in lists})``.

    ``head`` must end with the keys of ``lists``, each an empty list (their place in the
    document); the items of each list are encoded as they are iterated."""
    keys = list(lists)
    if list(head)[-len(keys) :] != keys or any(head[k] != [] for k in keys):
        raise ValueError("the head must end with the lists' keys, each an empty list")
    text = dumps(head)
    # The top-level empty lists are the document's last lines: '  "key": [],' ... '}'.
    tail = (
        "".join(
            f"\n  {json.dumps(k)}: []{',' if i < len(keys) - 1 else ''}" for i, k in enumerate(keys)
        )
        + "\n}"
    )
    if not text.endswith(tail):
        raise ValueError("unexpected encoding of the document head")
    yield text[: -len(tail)]
    for i, key in enumerate(keys):
        yield f"\n  {json.dumps(key)}: "
        yield from _list(lists[key])
        if i < len(keys) - 1:
            yield ","
    yield "\n}"


def _list(items: Iterable[Any]) -> Iterator[str]:
    """A top-level key's list value: '[]', or '[' then each item on lines indented by four
    spaces, ',' between them, and the closing ']' indented by two."""
    batch: list[str] = []
    first = True
    for item in items:
        text = "    " + dumps(item).replace("\n", "\n    ")
        batch.append(("[\n" if first else ",\n") + text)
        first = False
        if len(batch) >= BATCH:
            yield "".join(batch)
            batch = []
    if first:
        yield "[]"
        return
    yield "".join(batch) + "\n  ]"
