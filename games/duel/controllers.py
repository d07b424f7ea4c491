"""The duel's scripted opponent and random player: the lander's hand-written pilot flying
its own lander (the first 7 observation values), and uniform random thrust."""

from __future__ import annotations

import numpy as np

from games.duel.world import ACTION_SIZE, OWN_SIZE
from games.lander.controllers import reference_actions


def scripted_actions(obs: np.ndarray) -> np.ndarray:
    """The scripted opponent: the lander's reference pilot, blind to its rival."""
    return reference_actions(np.asarray(obs).reshape(-1, obs.shape[-1])[:, :OWN_SIZE])


def random_actions(rng: np.random.Generator, n_agents: int) -> np.ndarray:
    """Uniform random thrust for ``n_agents`` landers."""
    return rng.uniform(-1.0, 1.0, (n_agents, ACTION_SIZE)).astype(np.float32)
