"""An OpenEnv environment server written from the ``openenv`` package's own template
(``openenv init``: ``models.py``, ``server/<name>_environment.py``, ``server/app.py``),
run by the tests with the real package in a throwaway virtual environment.

Reach: a point on a line moves by the action's ``push``; each step's reward is minus its
distance to the target, so a policy that learns to steer scores higher. An episode is
``--episode 20`` steps (the server's ``done``). Faults for the tests, after ``--after K``
steps of the whole server: ``--fault die`` (the server exits), ``hang`` (a step never
returns), ``error`` (one step raises: the package answers an ``EXECUTION_ERROR`` frame).

    python openenv_reach.py --port P [--max-envs N] [--episode 20] [--fault F --after K]
"""

import argparse
import os
import random
import time
from typing import Any
from uuid import uuid4

import uvicorn
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field

parser = argparse.ArgumentParser()
parser.add_argument("--port", type=int, required=True)
parser.add_argument("--max-envs", type=int, default=8)
parser.add_argument("--episode", type=int, default=20)
parser.add_argument("--fault", default="")
parser.add_argument("--after", type=int, default=0)
ARGS = parser.parse_args()
STEPS = [0]  # the whole server's steps, for the faults


class ReachAction(Action):
    """Action for the Reach environment: how hard to push the point."""

    push: float = Field(..., ge=-1.0, le=1.0, description="Push, -1 (left) to 1 (right)")


class ReachObservation(Observation):
    """Observation from the Reach environment: where the point and its target are."""

    position: float = Field(default=0.0, ge=-2.0, le=2.0, description="The point")
    target: float = Field(default=0.0, ge=-1.0, le=1.0, description="Where it should be")


class ReachEnvironment(Environment):
    """A point to steer onto its target."""

    SUPPORTS_CONCURRENT_SESSIONS: bool = True

    def __init__(self):
        self._state = State(episode_id=str(uuid4()), step_count=0)
        self._rng = random.Random()
        self._position = 0.0
        self._target = 0.0

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> ReachObservation:
        if seed is not None:
            self._rng.seed(seed)
        self._state = State(episode_id=episode_id or str(uuid4()), step_count=0)
        self._position = self._rng.uniform(-1.0, 1.0)
        self._target = self._rng.uniform(-1.0, 1.0)
        return ReachObservation(position=self._position, target=self._target, reward=0.0)

    def step(self, action: ReachAction) -> ReachObservation:  # type: ignore[override]
        STEPS[0] += 1
        if ARGS.fault and STEPS[0] == ARGS.after:
            if ARGS.fault == "die":
                os._exit(3)
            if ARGS.fault == "hang":
                time.sleep(3600)
            if ARGS.fault == "error":
                raise RuntimeError("the reach environment failed on purpose")
        self._state.step_count += 1
        self._position = max(-2.0, min(2.0, self._position + 0.25 * action.push))
        return ReachObservation(
            position=self._position,
            target=self._target,
            reward=-abs(self._position - self._target),
            done=self._state.step_count >= ARGS.episode,
        )

    @property
    def state(self) -> State:
        return self._state


app = create_app(
    ReachEnvironment,
    ReachAction,
    ReachObservation,
    env_name="reach",
    max_concurrent_envs=ARGS.max_envs,
)

if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=ARGS.port, log_level="warning")
