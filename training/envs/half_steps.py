"""A run's games stepped in two halves, so the trainer's forward pass for one half runs
while the other half's games step: with one batch, a core waits on the policy while the
games wait on their actions, and the CNN's forward pass is about two fifths of a Pong
trainer's time collecting (py-spy). Collection alone was 1.03-1.10x as fast in halves
(docs/performance.md, "Games that see, thirteenth part"): a forward pass has a large
fixed cost, so two of half the frames cost more than one.

Only where the halves change nothing the wrappers would see: the games' own VecEnv under
:class:`GameMonitor` and a :class:`VecNormalize` that leaves observations as they are (a
picture game's frames; vectors are running-normalized, which a half cannot do as the
whole batch does). The replies of both halves are joined and handed to the top of the
wrappers as one step (:meth:`GameVecEnv.inject`), so the monitor, the reward scaling and
the callbacks see exactly what a whole step would show them.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from stable_baselines3.common.vec_env import VecEnv, VecNormalize
from stable_baselines3.common.vec_env.base_vec_env import VecEnvObs, VecEnvStepReturn

from game_bridge.vec_env import GameVecEnv
from training.envs.game_monitor import GameMonitor


class GameHalves:
    """Two halves of a run's game instances, each sent its actions and read on its own;
    a whole step given back through the wrappers once both halves have replied.

    :param env: the top of the run's wrappers.
    :param games: the games' own VecEnv under them.
    """

    def __init__(self, env: VecEnv, games: GameVecEnv) -> None:
        self.env = env
        self.games = games
        n = len(games.instances)
        k = games.agents_per_instance
        self._instances = (range(0, n // 2), range(n // 2, n))
        first, second = (slice(part.start * k, part.stop * k) for part in self._instances)
        self.rows: tuple[slice, slice] = (first, second)
        self._replies: list[VecEnvStepReturn | None] = [None, None]

    def send(self, half: int, actions: np.ndarray) -> None:
        """Send the games of ``half`` their actions (its rows of the batch)."""
        self.games.send_part(actions, self._instances[half])

    def receive(self, half: int) -> VecEnvObs:
        """Read the replies of ``half``; its observations (as the policy sees them: the
        wrappers leave them as they are)."""
        reply = self.games.receive_part(self._instances[half])
        self._replies[half] = reply
        return reply[0]

    def whole_step(self) -> VecEnvStepReturn:
        """Both halves' replies as one step of every env, through the wrappers."""
        first, second = self._replies
        assert first is not None and second is not None, "both halves must have replied"
        self._replies = [None, None]
        self.games.inject(
            (
                _joined(first[0], second[0]),
                np.concatenate([first[1], second[1]]),
                np.concatenate([first[2], second[2]]),
                [*first[3], *second[3]],
            )
        )
        return self.env.step_wait()


def _joined(first: VecEnvObs, second: VecEnvObs) -> Any:
    if isinstance(first, dict):
        assert isinstance(second, dict)
        return {key: np.concatenate([first[key], second[key]]) for key in first}
    assert isinstance(first, np.ndarray) and isinstance(second, np.ndarray)
    return np.concatenate([first, second])


def game_halves(env: VecEnv) -> GameHalves | None:
    """The halves of ``env``'s games, where stepping them in halves changes nothing its
    wrappers see (see the module's docstring); None elsewhere: in-process games, fewer
    than two game processes, self-play, stacked or running-normalized observations."""
    current: Any = env
    while isinstance(current, VecNormalize | GameMonitor):
        if isinstance(current, VecNormalize) and current.norm_obs:
            return None
        current = current.venv
    if not isinstance(current, GameVecEnv) or len(current.instances) < 2:
        return None
    if current.env_info.sides:
        return None
    return GameHalves(env, current)
