"""The lander's glimpse mode (``--game-arg observation=glimpse``, issue 47): the target is
shown for ``GLIMPSE_S`` after it moves, then its offset reads 0 until it moves again. A
pilot that remembers where it saw the target keeps its score; one that forgets loses most
of it: the mode is where memory pays, measured rather than argued."""

from __future__ import annotations

import numpy as np

from games.lander.controllers import reference_actions
from games.lander.gym_env import LanderEnv
from games.lander.physics import GLIMPSE_S, POS_SCALE, TICKS_PER_SECOND
from games.lander.play import positions_from_obs
from games.lander.scoring import LanderSettings
from tests.conftest import lander_games

PERIOD_TICKS = 4 * TICKS_PER_SECOND  # difficulty 1: a target moves every 4 s


def _shown_for(obs: np.ndarray) -> np.ndarray:
    """Ticks since each agent's target moved, read from ``t`` (obs[:, 6])."""
    timer = (obs[:, 6] + 1.0) / 2.0 * PERIOD_TICKS
    return PERIOD_TICKS - timer


def test_the_target_is_shown_for_a_glimpse_then_hidden_until_it_moves() -> None:
    """Over a real game process and in-process alike: the offset is there for the first
    half second of each target and 0 after it, on every agent, for whole episodes."""
    games = lander_games(4, seed=3, observation="glimpse")
    try:
        obs = games.reset()
        seen = hidden = 0
        for _ in range(120):  # 12 s: three targets an agent
            shown = _shown_for(obs)
            offsets = np.abs(obs[:, 0:2]).sum(axis=1)
            early, late = (
                shown < GLIMPSE_S * TICKS_PER_SECOND - 1,
                shown > GLIMPSE_S * TICKS_PER_SECOND + 1,
            )
            assert np.all(offsets[late] == 0.0)
            seen += int(np.count_nonzero(offsets[early] > 0))
            hidden += int(np.count_nonzero(late))
            obs, _rewards, _dones, _infos = games.step(np.zeros((4, 2), dtype=np.float32))
        assert seen > 40 and hidden > 300, (seen, hidden)
    finally:
        games.close()

    env = LanderEnv(observation="glimpse")
    first, _ = env.reset(seed=0)
    assert np.abs(first[0:2]).sum() > 0  # a new target is in view
    for _ in range(round(GLIMPSE_S * TICKS_PER_SECOND / 6) + 1):
        last, *_ = env.step(np.zeros(2, dtype=np.float32))
    assert last[0] == last[1] == 0.0 and last[6] < first[6]


class RememberingPilot:
    """The reference pilot flying to where it last saw each target."""

    def __init__(self, agents: int) -> None:
        self.target = np.full((agents, 2), np.nan)

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        obs = np.array(obs, dtype=np.float64)
        position, shown_target = positions_from_obs(obs)
        visible = _shown_for(obs) < GLIMPSE_S * TICKS_PER_SECOND - 1e-6
        self.target[visible] = shown_target[visible]
        known = ~np.isnan(self.target[:, 0])
        obs[known, 0:2] = (self.target[known] - position[known]) / POS_SCALE
        return reference_actions(obs)


def test_memory_pays_in_the_glimpse_mode() -> None:
    """Normalized against the random pilot (0) and the pilot that always sees the target
    (1), on the same episodes: the reference pilot fed glimpses forgets the target and
    scores low; the same pilot remembering where it saw the target scores near 1."""
    settings = LanderSettings(glimpse=True)
    episodes = 64
    random, reference = settings.baseline_policies(np.random.default_rng(0))
    floor = settings.play(random, episodes, seed=5)[0].mean()
    ceiling = settings.play(reference, episodes, seed=5)[0].mean()

    def score(policy: object) -> float:
        returns = settings.play(policy, episodes, seed=5)[0].mean()  # type: ignore[arg-type]
        return float((returns - floor) / (ceiling - floor))

    forgetful = score(reference_actions)
    remembering = score(RememberingPilot(episodes))
    assert remembering > 0.9, remembering
    assert forgetful < remembering - 0.3, (forgetful, remembering)
