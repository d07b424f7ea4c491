"""The Arcade Learning Environment's games as the field trains them: what SB3's
``AtariWrapper`` with ``VecFrameStack(4)`` (RL Zoo's ``atari:`` settings, CleanRL's
``ppo_atari``, EnvPool's defaults) does to an ALE id, applied to every ``gym:`` id whose
environment is ale-py's, so a user writes none of it.

From the bottom up: up to 30 no-op actions at a game's start; 4 frames a step, the last
two max-pooled against flicker (only where the id does not skip frames itself, as the
``NoFrameskip-v4`` ids do not: ``ALE/Pong-v5`` keeps its own skip); 84 x 84 grey; a lost
life ends the learner's episode while the game goes on (its reset plays one no-op); FIRE
after every start where the game needs it to begin; the learner's rewards clipped to their
sign; the last 4 frames stacked, channels first. The clipping and the lives are the
learner's alone: the step that ends a game carries its whole raw score (the protocol's
``SCORE`` info key), and a step that ends a life but not the game says so (``GAME_OVER``
false), so whatever lander prints or logs is the game's own score.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import gymnasium
import numpy as np

from game_bridge.protocol import GAME_OVER, SCORE
from games.gym import ale_frames
from games.gym.pictures import RepeatAction

NOOP_MAX = 30
"""No-op actions at most at a game's start (Mnih et al. 2015; SB3's ``NoopResetEnv``)."""
FRAME_SKIP = 4
"""Emulator frames a step where the id does not skip itself (``MaxAndSkipEnv``)."""
SCREEN = 84
"""The side of the grey frame the learner sees (``WarpFrame``)."""
STACK = 4
"""Frames stacked into one observation (``VecFrameStack(4)``)."""


@cache
def register_ale() -> bool:
    """Register ale-py's ids with Gymnasium (1.x no longer does it by itself); False where
    ale-py is not installed."""
    try:
        import ale_py
    except ImportError:
        return False
    gymnasium.register_envs(ale_py)
    return True


def is_atari(env: gymnasium.Env[Any, Any]) -> bool:
    """True for an environment of ale-py's (``ALE/Pong-v5``, ``PongNoFrameskip-v4``)."""
    return type(env.unwrapped).__module__.startswith("ale_py")


class EpisodicLife(gymnasium.Wrapper[Any, Any, Any, Any]):
    """A lost life ends the learner's episode (SB3's ``EpisodicLifeEnv``); the reset that
    follows plays one no-op and goes on with the same game, so a game of five lives is five
    episodes to the learner and one to its score."""

    def __init__(self, env: gymnasium.Env[Any, Any]) -> None:
        super().__init__(env)
        self._lives = 0
        self._game_over = True

    def _ale_lives(self) -> int:
        return int(self.env.unwrapped.ale.lives())  # type: ignore[attr-defined]

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._game_over = bool(terminated or truncated)
        lives = self._ale_lives()
        life_lost = 0 < lives < self._lives
        self._lives = lives
        if self._game_over or life_lost:
            info[GAME_OVER] = self._game_over
        return obs, reward, bool(terminated or life_lost), bool(truncated), info

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        if self._game_over:
            obs, info = self.env.reset(**kwargs)
        else:
            obs, _, terminated, truncated, info = self.env.step(0)
            if terminated or truncated:  # the no-op itself ended the game
                obs, info = self.env.reset(**kwargs)
        self._game_over = False
        self._lives = self._ale_lives()
        return obs, info


class FireReset(gymnasium.Wrapper[Any, Any, Any, Any]):
    """FIRE, then the next action, at every start of a game that waits for FIRE (Breakout's
    ball is served so; SB3's ``FireResetEnv``): a policy that has not learnt to serve would
    otherwise stand still until the time limit."""

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        for action in (1, 2):
            obs, _, terminated, truncated, info = self.env.step(action)
            if terminated or truncated:
                obs, info = self.env.reset(**kwargs)
        return obs, info


def needs_fire(env: gymnasium.Env[Any, Any]) -> bool:
    """True for a game whose second action is FIRE (SB3's test for ``FireResetEnv``)."""
    meanings = env.unwrapped.get_action_meanings()  # type: ignore[attr-defined]
    return len(meanings) >= 3 and meanings[1] == "FIRE"


class LearnerRewards(gymnasium.Wrapper[Any, Any, Any, Any]):
    """Rewards clipped to their sign for the learner; the game's raw score summed over all
    its lives and given on the step that ends the game (its length the monitor counts)."""

    def __init__(self, env: gymnasium.Env[Any, Any]) -> None:
        super().__init__(env)
        self._score = 0.0

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._score += float(reward)
        if (terminated or truncated) and info.get(GAME_OVER, True):
            info[GAME_OVER] = True
            info[SCORE] = self._score
            self._score = 0.0
        return obs, float(np.sign(float(reward))), terminated, truncated, info


def own_frameskip(env: gymnasium.Env[Any, Any]) -> int:
    """The frames a step of ale-py's environment itself holds (``ALE/Pong-v5``'s
    ``frameskip`` keyword, 4; the ``NoFrameskip`` ids 1; a stochastic ``(2, 5)`` its
    middle, rounded)."""
    skip = getattr(env.unwrapped, "_frameskip", 1)
    return round(sum(skip) / len(skip)) if isinstance(skip, tuple) else int(skip)


def skips_itself(env: gymnasium.Env[Any, Any]) -> bool:
    """True for an ALE id that skips frames itself, where ``--action-repeat`` would skip
    again."""
    skip = getattr(env.unwrapped, "_frameskip", 1)
    return isinstance(skip, tuple) or int(skip) != 1


class NoopStart(gymnasium.Wrapper[Any, Any, Any, Any]):
    """Up to :data:`NOOP_MAX` no-ops after every reset (what ``AtariPreprocessing`` does
    for pictures), for a game whose observation is its RAM."""

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        for _ in range(int(self.env.unwrapped.np_random.integers(1, NOOP_MAX + 1))):
            obs, _, terminated, truncated, info = self.env.step(0)
            if terminated or truncated:
                obs, info = self.env.reset(**kwargs)
        return obs, info


def sees_ram(env: gymnasium.Env[Any, Any]) -> bool:
    """True for an ALE id made with ``obs_type="ram"`` (``--game-arg obs_type=ram``, the
    ``-ram`` ids): its observation is the console's 128 bytes, not the screen."""
    return len(env.observation_space.shape or ()) == 1


def preprocess(
    env: gymnasium.Env[Any, Any], frame_skip: int = FRAME_SKIP, on_the_emulator: bool = True
) -> gymnasium.Env[Any, Any]:
    """``env`` (ale-py's) as the learner sees it: see the module's docstring; each step
    holds ``frame_skip`` frames more than the id's own (1 where the id skips itself, the
    caller's to decide). Its observation is ``(4, 84, 84)`` uint8, oldest frame first; a
    game seen through its RAM keeps its 128 bytes, a vector (no frames to pool, shrink or
    stack: the bytes hold what the screen shows), with the same starts, lives and rewards.
    The pooling and shrinking are Gymnasium's ``AtariPreprocessing``, done on the emulator
    itself where the id allows (:class:`~games.gym.ale_frames.AleFrames`, the same frames for
    a fifth to a quarter less of the game's time a step); ``on_the_emulator`` False keeps
    Gymnasium's wrapper wherever (what that class is tested and measured against)."""
    from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation

    if sees_ram(env):
        ram: gymnasium.Env[Any, Any] = NoopStart(env)
        if frame_skip > 1:
            ram = RepeatAction(ram, frame_skip)
        return _lives_and_rewards(ram, env)
    wrapped: gymnasium.Env[Any, Any]
    if on_the_emulator and ale_frames.fits(env):
        wrapped = ale_frames.AleFrames(env, frame_skip, noop_max=NOOP_MAX, screen=SCREEN)
    else:
        wrapped = AtariPreprocessing(
            env,
            noop_max=NOOP_MAX,
            frame_skip=frame_skip,
            screen_size=SCREEN,
            terminal_on_life_loss=False,
            grayscale_obs=True,
        )
    return FrameStackObservation(_lives_and_rewards(wrapped, env), STACK, padding_type="reset")


def _lives_and_rewards(
    wrapped: gymnasium.Env[Any, Any], game: gymnasium.Env[Any, Any]
) -> gymnasium.Env[Any, Any]:
    """A life as the learner's episode, FIRE at starts where ``game`` needs it, rewards
    clipped for the learner and the raw score at the game's end (the module's docstring)."""
    wrapped = EpisodicLife(wrapped)
    if needs_fire(game):
        wrapped = FireReset(wrapped)
    return LearnerRewards(wrapped)
