"""How the Godot RL Agents plugin feeds and reads a game's ONNX file (:class:`OnnxLayout`):
one input per observation key, one output row of every action key's slots, and how lander's
actions map onto it."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import numpy as np

from training.errors import ExportError


@dataclass(frozen=True)
class OnnxLayout:
    """How the Godot RL Agents plugin feeds and reads the ONNX file of one game.

    The plugin feeds one input per observation key, named after the key, and reads
    the ``output`` key by key in the declared order: a discrete key's logits
    (argmax), a continuous key's means, followed by as many log-std slots unless
    every key is continuous and the output holds means only (its
    ``action_means_only``). A mixed policy's discrete slots are written clipped to
    [-1, 1], as lander's games receive them, so the plugin's argmax is lander's.

    :param input_names: the observation keys, one ONNX input each, in the game's order.
    :param actions: (key, size, discrete) per action key, in the game's order.
    """

    input_names: tuple[str, ...] = ("obs",)
    actions: tuple[tuple[str, int, bool], ...] = ()

    @classmethod
    def of_game(cls, layout: dict[str, Any] | None) -> OnnxLayout:
        """The layout of a run's game (``run.json``'s ``game_layout``; None: the bundled game).

        :raises ExportError: a layout lander cannot export (an image or a grid key).
        """
        if not layout:
            return cls()
        observations = layout.get("observations") or []
        for observation in observations:
            shape = observation.get("shape") or []
            if len(shape) != (3 if observation.get("image") else 1):
                raise ExportError(
                    f"observation {observation.get('key')!r} of shape {shape} is not a flat "
                    "vector: lander exports vectors and camera frames only"
                )
        actions = tuple(
            (str(a["key"]), int(a["size"]), a.get("action_type") == "discrete")
            for a in layout.get("actions") or []
        )
        return cls(tuple(str(o["key"]) for o in observations) or ("obs",), actions)

    @property
    def mixed(self) -> bool:
        """Continuous and discrete keys together (lander trains them as one Box)."""
        return len({discrete for _, _, discrete in self.actions}) == 2

    def plugin_read(self, output: np.ndarray) -> np.ndarray:
        """A mixed policy's ONNX output read as the plugin reads it, one column per
        continuous value (clamped to [-1, 1]) and one per discrete key (its argmax)."""
        columns = []
        index = 0
        for _, size, discrete in self.actions:
            part = output[:, index : index + size]
            if discrete:
                columns.append(np.argmax(part, axis=1)[:, None].astype(np.float64))
                index += size
            else:
                columns.append(np.clip(part, -1.0, 1.0).astype(np.float64))
                index += 2 * size  # the log-std slots after the means
        return np.concatenate(columns, axis=1)

    def game_read(self, actions: np.ndarray) -> np.ndarray:
        """A mixed policy's Box actions as lander's games receive them (see
        :class:`game_bridge.codecs.ActionCodec`), in :meth:`plugin_read`'s columns."""
        columns = []
        index = 0
        for _, size, discrete in self.actions:
            part = actions[:, index : index + size]
            columns.append(
                np.argmax(part, axis=1)[:, None].astype(np.float64)
                if discrete
                else part.astype(np.float64)
            )
            index += size
        return np.concatenate(columns, axis=1)


def action_starts(
    actions: tuple[tuple[str, int, bool], ...],
) -> list[tuple[int, tuple[str, int, bool]]]:
    """Each action key with the index of its first slot in lander's Box."""
    starts = list(itertools.accumulate((size for _, size, _ in actions), initial=0))
    return list(zip(starts, actions, strict=False))
