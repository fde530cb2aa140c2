"""What the REST server's request models are made of: the base classes, and the wire
type of each kind of argument ``Memory``'s verbs take.

The models themselves (``rest_arguments.py``, one per verb) are generated from
``Memory``'s signatures by scripts/generate_verbs.py, which maps each parameter's
annotation to a type defined here (the script's tables ``WIRE_TYPES`` and
``INTEGERS``), so a keyword added to a verb travels over HTTP once the script has run.

The models check the JSON shape (a string where a string goes, no unknown field)
and bound every integer, so the OpenAPI document shows each number's range and no
number too large for the store reaches it; what a value means (an empty text, a
malformed time) is checked by ``Memory`` itself, so every surface refuses the same
input with the same error.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, TypeAdapter

from ..context import MIN_BUDGET_TOKENS
from ..decay import DecayPolicy
from ..errors import InvalidInputError
from ..memory.reads import MAX_LIMIT
from ..types import ContextFact


def _from_json(kind: Any) -> BeforeValidator:
    """Read a library dataclass from its JSON object (strict mode takes only an
    instance, which JSON cannot carry); a bad object is a validation error."""
    adapter: TypeAdapter[Any] = TypeAdapter(kind)
    return BeforeValidator(adapter.validate_python)


#: The largest count or offset taken where ``Memory`` sets no bound of its own: the
#: largest integer every JSON reader holds exactly (2**53 - 1), far below SQL's 64 bits.
MAX_COUNT = 2**53 - 1
#: Items or hits a page: the verbs' own bound.
Limit = Annotated[int, Field(ge=1, le=MAX_LIMIT)]
#: A count with no bound of its own (facts a page, episodes a consolidation reads).
Count = Annotated[int, Field(ge=1, le=MAX_COUNT)]
Offset = Annotated[int, Field(ge=0, le=MAX_COUNT)]
#: A context's size in tokens, from the smallest one that holds a hit.
Budget = Annotated[int, Field(ge=MIN_BUDGET_TOKENS, le=MAX_COUNT)]
#: Hits whose neighbouring turns a context includes.
Neighbours = Annotated[int, Field(ge=0, le=MAX_LIMIT)]


def _json_object(text: str | None) -> dict[str, Any] | None:
    """A query parameter that carries a JSON object, read into one."""
    if text is None:
        return None
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise InvalidInputError(f"must be a JSON object: {exc}") from exc
    if not isinstance(value, dict):
        raise InvalidInputError(f"must be a JSON object, not {type(value).__name__}")
    return value


Policy = Annotated[DecayPolicy | None, _from_json(DecayPolicy | None)]
Facts = Annotated[list[ContextFact] | None, _from_json(list[ContextFact] | None)]
#: A time as ``Memory`` takes it over the wire: ISO-8601 text or epoch seconds.
Time = str | float | None
Message = dict[str, Any] | str
#: Search filters in a JSON body: an object ``Memory`` reads as ``Filters``.
BodyFilters = dict[str, Any] | None
#: Search filters in a query string: JSON text, read into the object ``Memory`` takes
#: (the document shows it as the string it is on the wire).
QueryFilters = Annotated[
    str | None,
    AfterValidator(_json_object),
    Field(
        description="JSON object with keys among role, not_role, speaker, modality, "
        "event_after, event_before, metadata."
    ),
]


class Arguments(BaseModel):
    """Arguments of one verb, from a JSON body: unknown fields are refused, and JSON
    types are not coerced (``"5"`` is not a limit)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    def arguments(self) -> dict[str, Any]:
        """The fields as keyword arguments, values as validated (not re-serialised)."""
        return dict(self)


class QueryArguments(Arguments):
    """Arguments from a query string, where every value arrives as text: numbers and
    flags are read from it. List it last among a model's bases: pydantic merges the
    bases' configurations in order."""

    model_config = ConfigDict(strict=False)


class Health(BaseModel):
    """``GET /health``: the server answers, and whether its store is sound."""

    status: str
    version: str
    store_health: str
