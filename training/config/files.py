"""Settings from files and from a run's record: a config file (``--config``), overrides
checked key by key and kind by kind, YAML that cannot expand past a bound, and the settings
of runs recorded before a setting existed."""

from __future__ import annotations

import json
import tomllib
from dataclasses import fields
from pathlib import Path
from typing import Any

from game_bridge.file_input import read_bounded_text
from training.config.declare import ConfigError
from training.config.settings import FIELD_NAMES, TrainConfig

_FIELD_TYPES = {f.name: str(f.type) for f in fields(TrainConfig)}


def _check_type(name: str, value: Any, source: str) -> Any:
    """Refuse a value of the wrong kind (a config file's ``n_parallel = "four"``)."""
    kind = _FIELD_TYPES[name]
    if value is None and kind.endswith("| None"):
        return value
    base = kind.split(" |")[0]
    ok = {
        "int": isinstance(value, int) and not isinstance(value, bool),
        "float": isinstance(value, int | float) and not isinstance(value, bool),
        "bool": isinstance(value, bool),
        "str": isinstance(value, str),
        "dict[str, str]": isinstance(value, dict),
        "list[str]": isinstance(value, list) and all(isinstance(v, str) for v in value),
    }.get(base, True)
    if not ok:
        raise ConfigError(f"{source}: {name} must be {kind}, got {value!r}")
    if base == "float":
        return float(value)
    if base == "dict[str, str]":
        return {str(k): str(v) for k, v in value.items()}
    if base == "list[str]":
        return list(value)
    return value


def apply_overrides(base: TrainConfig, overrides: dict[str, Any], source: str) -> TrainConfig:
    """A copy of ``base`` with ``overrides`` applied; unknown keys are an error.

    :param source: where the overrides came from, for the error message.
    :raises ConfigError: on an unknown key.
    """
    unknown = sorted(set(overrides) - FIELD_NAMES)
    if unknown:
        raise ConfigError(f"{source}: unknown setting(s) {', '.join(unknown)}")
    checked = {name: _check_type(name, value, source) for name, value in overrides.items()}
    # A shallow copy, its dicts copied (asdict's deep copy was most of what reading a run
    # record cost: status reads hundreds).
    current = {
        name: dict(value)
        if isinstance(value, dict)
        else list(value)
        if isinstance(value, list)
        else value
        for name in FIELD_NAMES
        for value in (getattr(base, name),)
    }
    return TrainConfig(**{**current, **checked})


RECORDED_BEFORE: dict[str, Any] = {"adaptive_kl": 0.0, "max_std": 0.0, "std_regrowth": 0.0}
"""Settings added after runs were recorded, with what those runs trained with: a record
without the key resumes as it trained, whatever the default has become since."""


def from_dict(values: dict[str, Any], source: str) -> TrainConfig:
    """Rebuild a config saved by :meth:`TrainConfig.to_dict` (older keys are refused)."""
    return apply_overrides(TrainConfig(), {**RECORDED_BEFORE, **values}, source)


def load_config_file(path: Path) -> dict[str, Any]:
    """Read settings from a ``.toml`` or ``.json`` file (dashes or underscores in keys).

    :raises ConfigError: missing file, bad syntax or unknown key.
    """
    if not path.exists():  # a folder or a FIFO exists: read_settings_text says what it is
        raise ConfigError(f"config file {str(path)!r} does not exist")
    if path.suffix not in (".json", ".toml"):
        raise ConfigError(f"config file {str(path)!r}: use a .toml or .json file")
    text = read_settings_text(path, "config file")
    try:
        values = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
    except (json.JSONDecodeError, tomllib.TOMLDecodeError, RecursionError) as exc:
        first = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        raise ConfigError(f"config file {str(path)!r} is not valid: {first}") from None
    if not isinstance(values, dict):
        raise ConfigError(f"config file {str(path)!r} must hold a table of settings")
    normalised = {str(key).replace("-", "_"): value for key, value in values.items()}
    apply_overrides(
        TrainConfig(), normalised, f"config file {str(path)!r}"
    )  # checks keys and kinds now
    return normalised


MAX_SETTINGS_BYTES = 2**20
"""A settings file, search space or plan larger than this is refused before it is parsed."""
MAX_YAML_NODES = 100_000
"""Nodes a YAML file may expand to, aliases counted each time they are used: an alias bomb
(a few lines that expand to billions of nodes) is refused before it is built."""


def read_settings_text(path: Path, what: str) -> str:
    """The text of a small file the user gave (settings, a space, a plan), bounded in size.

    :raises ConfigError: a missing, unreadable, oversized or non-UTF-8 file.
    """
    try:
        size = path.stat().st_size
        if size > MAX_SETTINGS_BYTES:
            raise ConfigError(
                f"{what} {str(path)!r} is {size:,} bytes: over the {MAX_SETTINGS_BYTES:,} a {what} may be"
            )
        return read_bounded_text(path, MAX_SETTINGS_BYTES)
    except OSError as exc:
        raise ConfigError(f"{what} {str(path)!r}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{what} {str(path)!r} is not UTF-8 text") from None


def _expanded_size(root: Any) -> int:
    """How many nodes the composed YAML ``root`` stands for once every alias is expanded
    (aliases share their node, so each node's size is computed once)."""
    import yaml

    sizes: dict[int, int] = {}
    # Post-order over the node graph without recursion: deep nesting cannot overflow the stack.
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, expanded = stack.pop()
        if id(node) in sizes:
            continue
        if isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        elif isinstance(node, yaml.MappingNode):
            children = [item for pair in node.value for item in pair]
        else:
            children = []
        if expanded:
            total = 1 + sum(sizes[id(child)] for child in children)
            sizes[id(node)] = min(total, MAX_YAML_NODES + 1)
        else:
            stack.append((node, True))
            stack.extend((child, False) for child in children if id(child) not in sizes)
    return sizes[id(root)]


def load_yaml(path: Path, what: str) -> Any:
    """Parse a YAML file (a search space, a curriculum plan), bounded in size and in what
    its aliases expand to.

    :param what: what the file is, for the error message.
    :raises ConfigError: when the file cannot be read, is too large or is not valid YAML.
    """
    import yaml

    text = read_settings_text(path, what)
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        if node is None:
            return None
        if _expanded_size(node) > MAX_YAML_NODES:
            raise ConfigError(
                f"{what} {str(path)!r} expands to over {MAX_YAML_NODES:,} values (aliases of aliases?)"
            )
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{what} {str(path)!r} is not valid YAML: {exc}") from None
    except RecursionError:
        raise ConfigError(f"{what} {str(path)!r} is nested too deeply") from None
