"""An OpenEnv environment's JSON Schemas as lander's spaces, and its messages as the
values a policy reads and writes.

OpenEnv has no gym spaces: a server publishes its Pydantic action and observation
models as JSON Schema at ``/schema``. lander reads them field by field, in their
declared order (docs/protocol.md, "OpenEnv"):

- an action field: a number with ``minimum`` and ``maximum`` is one continuous value
  (the policy's [-1, 1] scaled to the bounds), an array of such numbers of fixed length
  is as many; an integer with bounds, an ``enum`` or a boolean is one discrete choice;
- an observation field: a number, integer or boolean is one value, an array of numbers
  of fixed length is as many, joined into one vector ``obs``; ``done``, ``reward`` and
  ``metadata`` are the protocol's, not the observation's.

Anything else cannot be mapped and is named in one line; ``--openenv-schema FILE``
replaces a field's schema (or drops it with ``null``) before the mapping.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from game_bridge.errors import LanderError

PROTOCOL_FIELDS = frozenset({"done", "reward", "metadata"})
"""Fields of every OpenEnv observation (and ``metadata`` of every action) that are not
the environment's own."""


class SchemaError(LanderError, ValueError):
    """An OpenEnv schema lander cannot turn into spaces."""


@dataclass(frozen=True)
class ActionField:
    """One field of the action model.

    :param name: the field's name, as the server's action model names it.
    :param size: continuous: values; discrete: choices.
    :param discrete: one choice among ``size`` (``choices`` are the values sent).
    :param low, high: a continuous field's bounds.
    :param array: sent as a list (an array field), not as one number.
    :param choices: a discrete field's values, in the order of the policy's choices.
    """

    name: str
    size: int
    discrete: bool
    low: float = -1.0
    high: float = 1.0
    array: bool = False
    choices: tuple[Any, ...] = ()

    def value(self, action: Any) -> Any:
        """The field's JSON value for the policy's action of this key."""
        if self.discrete:
            return self.choices[int(action)]
        values = [
            self.low + (min(max(float(a), -1.0), 1.0) + 1.0) * 0.5 * (self.high - self.low)
            for a in (action if isinstance(action, list) else [action])
        ]
        return values if self.array else values[0]


@dataclass(frozen=True)
class ObservationField:
    """One field of the observation model: ``size`` values of the vector ``obs``."""

    name: str
    size: int
    low: float
    high: float


@dataclass(frozen=True)
class OpenEnvSpaces:
    """What a policy of an OpenEnv environment reads and writes."""

    actions: tuple[ActionField, ...]
    observations: tuple[ObservationField, ...]

    @property
    def obs_size(self) -> int:
        return sum(field.size for field in self.observations)

    def env_info(self) -> dict[str, Any]:
        """The environment as a one-agent game's ``env_info`` (PROTOCOL.md): one
        observation key ``obs``, one action key per field, in the schema's order."""
        lows = [f.low for f in self.observations]
        highs = [f.high for f in self.observations]
        return {
            "type": "env_info",
            "observation_space": {
                "obs": {
                    "size": [self.obs_size],
                    "space": "box",
                    "low": min(lows),
                    "high": max(highs),
                }
            },
            "action_space": {
                f.name: {"size": f.size, "action_type": "discrete" if f.discrete else "continuous"}
                for f in self.actions
            },
            "n_agents": 1,
        }

    def observation(self, fields: Any) -> list[float]:
        """The observation vector of one OpenEnv observation's fields.

        :raises SchemaError: a field missing or of another shape than its schema says.
        """
        if not isinstance(fields, dict):
            raise SchemaError(f"the observation is not an object: {fields!r:.80}")
        values: list[float] = []
        for field in self.observations:
            value = fields.get(field.name)
            items: list[Any] = value if isinstance(value, list) else [value]
            # bool is an int: a boolean field is read as 0 or 1.
            if len(items) != field.size or not all(finite_number(v) for v in items):
                raise SchemaError(
                    f"observation field {field.name!r} is {value!r:.80}, its schema says "
                    f"{field.size} number(s)"
                )
            values.extend(float(v) for v in items)
        return values

    def action(self, keyed: dict[str, Any]) -> dict[str, Any]:
        """The OpenEnv action (its fields) of one agent's action dict by key."""
        return {field.name: field.value(keyed[field.name]) for field in self.actions}


def finite_number(value: Any) -> bool:
    """A JSON number a float holds finitely (a 400-digit integer is not one; bool is an
    int: a boolean field or reward reads as 0 or 1), for every number a server sends."""
    if not isinstance(value, int | float):
        return False
    try:
        return math.isfinite(float(value))
    except OverflowError:  # a 400-digit integer
        return False


def _resolve(schema: dict[str, Any], part: Any) -> Any:
    """A property's schema with ``$ref`` followed and ``Optional`` (anyOf with null) unwrapped."""
    for _ in range(16):
        if not isinstance(part, dict):
            return part
        if "$ref" in part:
            ref = str(part["$ref"])
            name = ref.rsplit("/", 1)[-1]
            defs = schema.get("$defs") or schema.get("definitions") or {}
            if name not in defs:
                raise SchemaError(f"the schema refers to {ref!r}, which it does not define")
            part = {**defs[name], **{k: v for k, v in part.items() if k != "$ref"}}
            continue
        options = part.get("anyOf") or part.get("oneOf")
        if options:
            kept = [o for o in options if not (isinstance(o, dict) and o.get("type") == "null")]
            if len(kept) == 1:
                part = {**kept[0], **{k: v for k, v in part.items() if k not in ("anyOf", "oneOf")}}
                continue
        return part
    raise SchemaError("the schema's references nest too deeply")


def _bounds(part: dict[str, Any]) -> tuple[float, float]:
    low = part.get("minimum", part.get("exclusiveMinimum", -math.inf))
    high = part.get("maximum", part.get("exclusiveMaximum", math.inf))
    return float(low), float(high)


def _action_field(name: str, part: dict[str, Any]) -> ActionField:
    kind = part.get("type")
    if "enum" in part:
        return ActionField(name, len(part["enum"]), True, choices=tuple(part["enum"]))
    if kind == "boolean":
        return ActionField(name, 2, True, choices=(False, True))
    if kind == "integer":
        low, high = _bounds(part)
        if math.isfinite(low) and math.isfinite(high) and high - low < 10_000:
            return ActionField(
                name, int(high - low) + 1, True, choices=tuple(range(int(low), int(high) + 1))
            )
    if kind == "number":
        low, high = _bounds(part)
        if math.isfinite(low) and math.isfinite(high) and high > low:
            return ActionField(name, 1, False, low, high)
    if kind == "array":
        items = part.get("items") or {}
        size = part.get("minItems")
        low, high = _bounds(items if isinstance(items, dict) else {})
        if (
            isinstance(items, dict)
            and items.get("type") == "number"
            and size is not None
            and size == part.get("maxItems")
            and math.isfinite(low)
            and math.isfinite(high)
        ):
            return ActionField(name, int(size), False, low, high, array=True)
    raise SchemaError(
        f"action field {name!r} ({_describe(part)}) cannot be mapped to a space: lander maps "
        "numbers with minimum and maximum, bounded integers, enums, booleans and fixed-length "
        "arrays of bounded numbers (give its bounds in the model, or replace it with "
        "--openenv-schema)"
    )


def _observation_field(name: str, part: dict[str, Any]) -> ObservationField:
    kind = part.get("type")
    if kind in ("number", "integer"):
        return ObservationField(name, 1, *_bounds(part))
    if kind == "boolean":
        return ObservationField(name, 1, 0.0, 1.0)
    items = part.get("items") if kind == "array" else None
    size = part.get("minItems") if kind == "array" else None
    if (
        isinstance(items, dict)
        and items.get("type") in ("number", "integer")
        and size is not None
        and size == part.get("maxItems")
    ):
        return ObservationField(name, int(size), *_bounds(items))
    raise SchemaError(
        f"observation field {name!r} ({_describe(part)}) cannot be mapped to a space: lander "
        "reads numbers, integers, booleans and fixed-length arrays of numbers (drop it or "
        "replace it with --openenv-schema)"
    )


def _describe(part: Any) -> str:
    if not isinstance(part, dict):
        return repr(part)[:60]
    kind = part.get("type", "no type")
    return f"{kind} without fixed length" if kind == "array" else str(kind)


def _properties(
    schema: Any, which: str, override: dict[str, Any] | None
) -> list[tuple[str, dict[str, Any]]]:
    if not isinstance(schema, dict) or not isinstance(schema.get("properties"), dict):
        raise SchemaError(f"the server's {which} schema has no properties")
    merged: dict[str, Any] = dict(schema["properties"])
    for name, replacement in (override or {}).items():
        if replacement is None:
            merged.pop(name, None)
        else:
            merged[name] = replacement
    return [
        (name, _resolve(schema, part))
        for name, part in merged.items()
        if name not in PROTOCOL_FIELDS
    ]


def spaces_of(schemas: Any, override: dict[str, Any] | None = None) -> OpenEnvSpaces:
    """The spaces of an OpenEnv server's ``/schema`` answer.

    :param override: ``{"action": {field: schema or null}, "observation": {...}}``.
    :raises SchemaError: naming the first field that cannot be mapped.
    """
    try:
        return _spaces_of(schemas, override)
    except SchemaError:
        raise
    except RecursionError:
        raise SchemaError("the schema is nested too deeply to map") from None
    except (TypeError, AttributeError, ValueError, KeyError) as exc:
        # A part of another type than JSON Schema gives it (a list for an object, text
        # for a number): one named fault, whichever part it is.
        raise SchemaError(f"the schema has a part of an unexpected kind ({exc})") from None


def _spaces_of(schemas: Any, override: dict[str, Any] | None) -> OpenEnvSpaces:
    if not isinstance(schemas, dict):
        raise SchemaError("the server's /schema is not an object")
    override = override or {}
    actions = tuple(
        _action_field(name, part)
        for name, part in _properties(schemas.get("action"), "action", override.get("action"))
    )
    observations = tuple(
        _observation_field(name, part)
        for name, part in _properties(
            schemas.get("observation"), "observation", override.get("observation")
        )
    )
    if not actions:
        raise SchemaError("the server's action schema has no field lander can act with")
    if not observations:
        raise SchemaError("the server's observation schema has no field lander can read")
    return OpenEnvSpaces(actions, observations)
