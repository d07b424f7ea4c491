"""One typed configuration for a training run.

Built from defaults (or, on a resume, the parent run's saved settings), then a
config file, then command-line flags; saved in ``checkpoints/<run>/run.json`` and
read back on resume. Nothing else parses these settings.
"""

from __future__ import annotations

import json
import math
import tomllib
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from game_bridge import TRANSPORTS
from game_bridge.errors import LanderError
from game_bridge.file_input import read_bounded_text
from game_bridge.frame_stack import MAX_FRAMES
from game_bridge.openenv_instance import server_url
from game_bridge.protocol import DEFAULT_PORT
from game_bridge.spaces import MAX_GAME_AGENTS
from games import (
    BUNDLED_GAMES,
    DEFAULT_GAME,
    GAME_NAMES,
    GYM_PREFIX,
    REGISTRY,
    UnknownGame,
    game_entry,
    is_game_name,
)

MAX_MEMORY = 4096
"""The most units ``--memory`` may ask for: a GRU of 4,096 is 50M weights, past any bot."""
CAMERA_ENCODERS = ("centroids", "nature", "small")
PICTURE_DEFAULTS: dict[str, Any] = {
    # The first DQN's two strided convolutions: on Breakout at the general settings it ran
    # 162 samples/s (10 epochs of a CNN on 2 cores) and learned nothing in 4 minutes; the
    # centroids, made for a few sprites on a dark field, ran 435/s and reached 2.3 (random
    # play 1.4) in 4 minutes: a map is a mix of grey frames, no band of grey levels, so it
    # cannot tell Breakout's ball from its bricks (docs/performance.md, "Games that see").
    "camera_encoder": "small",
    # The field's settings for a CNN (the PPO paper's Atari table, CleanRL's ppo_atari, RL
    # Zoo's atari entry): 128-step rollouts, 4 epochs, a step of 2.5e-4, a clip of 0.1,
    # gamma 0.99 and GAE 0.95, a constant step (no schedule, no adaptive KL: the CNN's
    # minibatch KL is not the MLP's). With them the small CNN ran 400 samples/s on Breakout.
    "n_steps": 128,
    "n_epochs": 4,
    "learning_rate": 2.5e-4,
    "clip_range": 0.1,
    "gamma": 0.99,
    "gae_lambda": 0.95,
    "adaptive_kl": 0.0,
    # 4 processes of 2 copies: rollouts of 1,024 in minibatches of 256, as the zoo's 8 x 128
    # (twice the gradient steps a sample of the general 4 x 4). On Breakout at 10 minutes
    # 16 copies scored 2.1 and 8 scored 5.7 (the zoo 5.8), 371 samples/s against 393.
    "agents_per_instance": 2,
}
"""The settings a new run starts from where its game sends pictures (a camera key), over
the general ones below and under the game's own (the bundled camera modes keep theirs)."""
"""What ``--camera-encoder`` may name (training/ppo/camera_policy.py)."""


class ConfigError(LanderError, ValueError):
    """A configuration file or value that cannot be used."""


MAX_TIMESTEPS = 10**12
MAX_AGENTS = MAX_GAME_AGENTS
"""Agents one bundled game instance may simulate."""
MAX_ACTION_REPEAT = 1000
MAX_SPEEDUP = 1e6
"""Physics ticks per step: 1,000 ticks are 16 game seconds, past any sane control rate."""
"""A trillion steps: beyond any run, and far inside the int64 step counters."""


def setting(
    default: Any = MISSING,
    *,
    help: str,
    low: float | None = None,
    high: float | None = None,
    choices: tuple[str, ...] | None = None,
    resumable: bool = False,
    shown: str | None = None,
    factory: Any = MISSING,
    inherited: bool = True,
    panel: str,
) -> Any:
    """Declare one training setting: everything lander knows of it lives here. The
    command-line options of every training command are generated from these
    declarations (``cli/common/train_flags.py``), :meth:`TrainConfig.validate` checks the
    bounds, and a resume changes only the ``resumable`` ones.

    :param help: one line for ``--help``.
    :param low: smallest value allowed (inclusive); ``high`` likewise.
    :param choices: the values a text setting may take.
    :param resumable: a resumed PPO model takes the new value (others are the
        network's shape or the games' set-up, kept from the checkpoint's run).
    :param shown: the default as ``--help`` shows it, when the value itself says
        too little (None: "the game's own").
    :param inherited: a resume starts from the parent run's value; False for where a
        session runs (a cluster may be gone by then), which each session names anew.
    :param panel: the group ``--help`` lists the option in (Games, PPO, Health, ...).
    """
    metadata = {
        "help": help,
        "low": low,
        "high": high,
        "choices": choices,
        "resumable": resumable,
        "shown": shown,
        "inherited": inherited,
        "panel": panel,
    }
    if factory is not MISSING:
        return field(default_factory=factory, metadata=metadata)
    return field(default=default, metadata=metadata)


@dataclass
class TrainConfig:
    """Every setting of a training run, with its default: the one place a setting is declared."""

    # -- games -------------------------------------------------------------------
    n_parallel: int = setting(
        4, help="Game instances (processes), each on its own port.", low=1, panel="Games"
    )
    # Where lander launches the game (a gym: game, the bundled ones) it asks for this many
    # agents; a game binary declares its own. 4 instances of 4 make rollouts of 1,024
    # samples, twice the updates per sample of 8 each: Pendulum reached its mark on 3
    # seeds of 3 (1 of 3 with 8), BipedalWalker its 234 by 501k steps (1.49M with 8),
    # LunarLanderContinuous in 12.7 s (21.6) (docs/performance.md). The bundled games keep 8.
    agents_per_instance: int = setting(
        4,
        help="Agents in each instance, where lander launches the game (the bundled games' "
        "own default: 8; a game binary declares its own).",
        low=1,
        high=MAX_AGENTS,
        panel="Games",
    )
    speedup: float | None = setting(
        None,
        help="Game seconds per wall second (physics ticks/s = 60 x speedup).",
        low=1e-9,
        high=MAX_SPEEDUP,
        shown="the game's own",
        panel="Games",
    )
    action_repeat: int | None = setting(
        None,
        help="Physics ticks per step.",
        low=1,
        high=MAX_ACTION_REPEAT,
        shown="the game's own",
        panel="Games",
    )
    port: int = setting(
        DEFAULT_PORT,
        help="Base TCP port: instance i listens on port + i.",
        low=1,
        high=65535,
        panel="Games",
    )
    seed: int = setting(
        0, help="Seed of PPO and of instance 0 (instance i gets seed + i).", low=0, panel="Run"
    )
    game: str = setting(
        DEFAULT_GAME,
        help="The bundled game (a folder of games/): "
        + "; ".join(f"{name}: {summary}" for name, summary in REGISTRY.items())
        + f"; or {GYM_PREFIX}ENV_ID, any installed Gymnasium environment (--game-arg KEY=VALUE "
        "are its keyword arguments).",
        panel="Games",
    )
    game_bin: str | None = setting(
        None,
        help="A game executable speaking the Godot RL Agents protocol (instead of --game).",
        shown="the bundled game",
        panel="Games",
    )
    transport: str | None = setting(
        None,
        help="How the games talk: tcp (frames on a port each), stdio (a JSON line a "
        "message on stdin/stdout) or openenv (sessions of an OpenEnv server, --game-url).",
        choices=TRANSPORTS,
        shown="the game's own (games/NAME/entry.py); tcp for --game-bin; openenv for --game-url",
        panel="Games",
    )
    game_url: str | None = setting(
        None,
        help="An OpenEnv environment server to train: http://HOST:PORT, or a Hugging Face "
        "Space id OWNER/NAME; one WebSocket session per --n-parallel, spaces from its "
        "/schema (instead of --game).",
        shown="none",
        panel="Games",
    )
    openenv_schema: str | None = setting(
        None,
        help="With --game-url: a JSON file {action: {FIELD: schema or null}, observation: "
        "{...}} replacing fields of the server's schemas (null drops one).",
        shown="none",
        panel="Games",
    )
    max_episode_steps: int = setting(
        1000,
        help="With --game-url: steps after which lander ends an episode itself (a "
        "truncation; OpenEnv has one done flag).",
        low=1,
        panel="Games",
    )
    game_args: dict[str, str] = setting(
        help="Game setting KEY=VALUE, passed to the game as --KEY=VALUE (repeatable).",
        factory=dict,
        panel="Games",
    )
    in_process: bool = setting(
        False,
        help="Train on the game's in-process gymnasium env (no TCP): debugging, speed reference.",
        panel="Games",
    )
    read_timeout: float = setting(
        30.0, help="Seconds a game may take to answer one message.", low=1e-3, panel="Games"
    )
    # On since issue 30: the same samples to skill in 0.86 of the time on the bundled game
    # (benchmarks/time_to_skill.py, docs/performance.md); a game that does not accept it
    # is spoken to in JSON, as before.
    fast_wire: bool = setting(
        True,
        help="Offer lander's binary step encoding; games that do not speak it (Godot) keep JSON.",
        panel="Games",
    )
    max_restarts_per_minute: int = setting(
        3,
        help="Faulty games restarted per minute before the run stops (0: never restart).",
        low=0,
        panel="Games",
    )
    cluster: str | None = setting(
        None,
        help="A Ray cluster's head HOST:PORT: run the game instances on its nodes (docs/cluster.md).",
        shown="this machine",
        inherited=False,
        panel="Cluster",
    )
    instances_per_node: int | None = setting(
        None,
        help="With --cluster: at most this many game instances on each node.",
        low=1,
        shown="by free CPUs",
        inherited=False,
        panel="Cluster",
    )
    # -- PPO -----------------------------------------------------------------------
    timesteps: int = setting(
        600_000,
        help="Environment steps to train (on a resume: additional steps).",
        low=1,
        high=MAX_TIMESTEPS,
        panel="Run",
    )
    # Rollout, minibatch and step size were chosen by time to a good bot, not fps
    # (benchmarks/time_to_skill.py; docs/performance.md): short rollouts and a large
    # step make many updates per sample, which reaches skill in far less wall time.
    learning_rate: float = setting(
        2e-3,
        help="Adam step size (with --adaptive-kl: where it starts).",
        low=1e-12,
        resumable=True,
        panel="PPO",
    )
    # rsl_rl's adaptive rule, bounded above by the learning rate: a step that shrinks when
    # an update moves the policy too far. A constant 0.002 lets each update move a
    # sharpening policy further (BipedalWalker: approx_kl 0.02 early, 0.1-0.7 by 1.5M, the
    # reward from 215 to 130); held near 0.01 (with the std's regrowth bounded, below) the
    # walker reached 235.7 by 1.49M, and LunarLander its 200 by 164k steps where the
    # constant step took 584k (docs/performance.md, "BipedalWalker-v3, the sixth").
    adaptive_kl: float = setting(
        0.01,
        help="KL from the rollout's policy each minibatch aims at: over twice it, the step "
        "size shrinks 1.5x, under half it grows 1.5x back towards --learning-rate, never "
        "past it (rsl_rl's rule; 0: a constant step).",
        low=0,
        high=1,
        panel="PPO",
    )
    # A Gaussian policy's actions are clipped to the game's bounds ([-1, 1] as lander
    # rescales them): the policy gradient (and the entropy bonus) can gain by growing the
    # std until the actions sit on the bounds. BipedalWalker's std went from 0.62 to 2.8
    # by 1.5M steps at the constant step, and from 1.0 to 7.5 with the step adapted down to
    # 1e-5: the walker turned bang-bang and fell. An absolute bound (--max-std 1) kept it
    # at 216-224 to 5M, never 234 (0.5: 234 by 0.97M, but Pendulum never reached its mark);
    # a std that may shrink freely but never grow back above its lowest (--std-regrowth 1)
    # let the walker's std fall to 0.37 and reach 235.7 by 1.49M.
    max_std: float = setting(
        0.0,
        help="Largest action std a Gaussian policy may reach (continuous actions span [-1, 1]; "
        "held there after every update; 0: no limit).",
        low=0,
        panel="PPO",
    )
    std_regrowth: float = setting(
        1.0,
        help="How far a Gaussian policy's action std may grow back above the lowest it has "
        "reached this session (1: never above it; 1.5: up to 1.5x; 0: no limit).",
        low=0,
        panel="PPO",
    )
    # A game may train best with another (games/*/entry.py train_defaults: the bundled
    # lander takes 32); 64 suits games with rewards that come late.
    n_steps: int = setting(
        64,
        help="Steps per env per rollout (rollout = n-steps x instances x agents; the bundled "
        "lander game's own default: 32).",
        low=1,
        resumable=True,
        panel="PPO",
    )
    batch_size: int | None = setting(
        None,
        help="PPO minibatch size (samples); by default the rollout split into --minibatches.",
        low=1,
        resumable=True,
        shown="rollout / minibatches",
        panel="PPO",
    )
    minibatches: int = setting(
        4,
        help="Minibatches per pass over a rollout, whole ones (when --batch-size is not given).",
        low=1,
        panel="PPO",
    )
    n_epochs: int = setting(
        10, help="Passes over each rollout.", low=1, resumable=True, panel="PPO"
    )
    # The defaults of gamma, GAE, the entropy bonus and normalization are for a game
    # nobody tuned lander for: chosen over Gymnasium's classics (CartPole, Acrobot,
    # Pendulum, LunarLander discrete and continuous, BipedalWalker) against RL Zoo's tuned
    # PPO (benchmarks/any_game.py; docs/performance.md, "Games nobody tuned lander for").
    # Normalized observations and rewards are what let one step size serve rewards of 1
    # and of 100 (LunarLander, Pendulum: no learning without; "What Matters In On-Policy
    # RL" finds the same over 250,000 agents); gamma 0.995 with GAE 0.98 reaches
    # LunarLanderContinuous's 200 where 0.99/0.95 peaked at 11, and Pendulum still
    # inside its 100,000 steps (0.999 took 129,000); an entropy bonus of 0.01 (on
    # normalized rewards) keeps a continuous policy from settling on hovering. The bundled
    # games keep what they were tuned with (games/*/entry.py train_defaults).
    gamma: float = setting(
        0.995, help="Discount factor.", low=0, high=1, resumable=True, panel="PPO"
    )
    gae_lambda: float = setting(
        0.98, help="GAE smoothing.", low=0, high=1, resumable=True, panel="PPO"
    )
    clip_range: float = setting(0.2, help="PPO ratio clip.", low=1e-9, resumable=True, panel="PPO")
    ent_coef: float = setting(
        0.01,
        help="Entropy bonus: higher keeps exploring.",
        low=0,
        resumable=True,
        panel="Exploration",
    )
    vf_coef: float = setting(0.5, help="Value loss weight.", low=0, resumable=True, panel="PPO")
    max_grad_norm: float = setting(
        0.5, help="Gradient clipping norm.", low=1e-9, resumable=True, panel="PPO"
    )
    net_width: int = setting(
        64, help="Units in each of the two hidden layers (policy and value).", low=1, panel="PPO"
    )
    camera_encoder: str = setting(
        "centroids",
        help="How the policy sees camera keys: 'centroids' (where things are: each of a few "
        "learned maps' centroid and mass; fast on a CPU), 'nature' (SB3's CNN, for "
        "textured scenes) or 'small' (two strided convolutions, a third of its work).",
        choices=CAMERA_ENCODERS,
        panel="PPO",
    )
    frame_stack: int = setting(
        1,
        help="Camera frames the policy sees at once: each camera key as its last N frames, "
        "oldest first (2 shows motion); the bot records N and its players keep the frames.",
        low=1,
        high=MAX_FRAMES,
        panel="PPO",
    )
    # A GRU between the observation and the MLPs (training/ppo/recurrent_policy.py): for
    # games where what matters left the observation (a target seen, then hidden).
    memory: int = setting(
        0,
        help="Units of memory the policy keeps per agent from step to step (a GRU under its "
        "MLPs, reset at each episode's start; 0: none). For games where what matters was seen "
        "before and is hidden now; the bot keeps the state too.",
        low=0,
        high=MAX_MEMORY,
        panel="PPO",
    )
    bc_epochs: int = setting(
        60,
        help="With --demos: passes of behaviour cloning over the demonstrations before PPO "
        "(the held-out episodes' best epoch is kept).",
        low=1,
        panel="PPO",
    )
    log_std_init: float = setting(
        0.0,
        help="Initial log of the action standard deviation (continuous actions).",
        panel="Exploration",
    )
    normalize_observations: bool = setting(
        True,
        help="Running mean/std normalisation of observations (saved beside checkpoints; "
        "--no-normalize-observations for none).",
        panel="PPO",
    )
    normalize_rewards: bool = setting(
        True,
        help="Scale rewards by the running spread of returns: for rewards far from 1 in size "
        "(a whole episode's score at its end).",
        panel="PPO",
    )
    device: str = setting(
        "auto",
        help="auto (CUDA only for image observations), cpu or cuda.",
        choices=("auto", "cpu", "cuda"),
        panel="Run",
    )
    verbose: bool = setting(
        False,
        help="Print more of what the session does (its start-up phases, from launch).",
        inherited=False,
        panel="Run",
    )
    collector: str = setting(
        "lean",
        help="Rollout loop: lean (one forward for all envs), async (lean, the next rollout "
        "played while PPO updates) or sb3 (SB3's own).",
        choices=("lean", "async", "sb3"),
        panel="Run",
    )
    torch_threads: int = setting(
        1,
        help="Torch CPU threads while collecting (games need the other cores).",
        low=1,
        panel="Run",
    )
    update_threads: int = setting(
        0,
        help="Torch CPU threads during the PPO update (0: every core; with --collector async, "
        "--torch-threads, the games playing on the other cores).",
        low=0,
        panel="Run",
    )
    # -- health (training/session/health.py; docs/operations.md "When a run goes wrong") -----
    health_std_low: float = setting(
        0.1,
        help="Action std below this for --health-rollouts rollouts: collapsed.",
        low=0,
        panel="Health",
    )
    health_std_high: float = setting(
        2.0,
        help="Action std above this for --health-rollouts rollouts: exploded.",
        low=0,
        panel="Health",
    )
    health_entropy_low: float = setting(
        0.05,
        help="Entropy of a discrete policy below this: no exploration left.",
        low=0,
        panel="Health",
    )
    health_kl_high: float = setting(
        0.1,
        help="approx_kl of an update above this: updates far larger than normal.",
        low=0,
        panel="Health",
    )
    health_clip_high: float = setting(
        0.4,
        help="Clip fraction of an update above this: updates far larger than normal.",
        low=0,
        panel="Health",
    )
    health_fps_drop: float = setting(
        0.5,
        help="fps below this fraction of the run's median: the run slowed.",
        low=0,
        high=1,
        panel="Health",
    )
    health_rollouts: int = setting(
        5, help="Rollouts in a row a band is crossed before it is reported.", low=1, panel="Health"
    )
    health_flat_steps: int = setting(
        2_000_000,
        help="Steps without a better mean reward before it is reported flat.",
        low=1,
        panel="Health",
    )
    health_restarts: int = setting(
        5,
        help="Game restarts within ten minutes reported as a restart storm.",
        low=1,
        panel="Health",
    )
    stop_at_score: float | None = setting(
        None,
        help="End the run cleanly once an evaluation reaches this normalized score (mean "
        "evaluation reward for a --game-bin game); evaluates every 50,000 steps unless "
        "--eval-every says otherwise.",
        shown="never",
        panel="Evaluation",
    )
    # -- run ---------------------------------------------------------------------------
    checkpoint_every: int = setting(
        100_000, help="Steps between rotating checkpoints.", low=1, panel="Run"
    )
    keep_checkpoints: int = setting(
        3, help="Rotating checkpoints kept (final.zip is extra).", low=1, panel="Run"
    )
    eval_every: int = setting(
        0, help="Steps between evaluations during training (0: none).", low=0, panel="Evaluation"
    )
    eval_episodes: int = setting(20, help="Episodes per evaluation.", low=1, panel="Evaluation")
    push_every: int = setting(
        0,
        help="Checkpoints between mid-run commits and pushes (0: only at the end).",
        low=0,
        panel="Git",
    )
    publish_every: int = setting(
        20_000,
        help="Steps between publishing the current bot for the live page (lander play --web; 0: never).",
        low=0,
        panel="Evaluation",
    )
    # -- self-play (games with sides) ----------------------------------------------
    self_play: bool = setting(
        False,
        help="Train one side of a game with sides (agent_policy_names) against frozen "
        "snapshots of itself (or --opponent); Elo ratings from the rounds' outcomes.",
        panel="Self-play",
    )
    snapshot_every: int = setting(
        20_000, help="With --self-play: steps between snapshots of the learner.", low=1,
        panel="Self-play",
    )  # fmt: skip
    snapshot_window: int = setting(
        10, help="With --self-play: the newest snapshots that may be the opponent (the run "
        "also keeps log-spaced milestones of its history).", low=1,
        panel="Self-play",
    )  # fmt: skip
    play_latest: float = setting(
        0.5,
        help="With --self-play: chance that a new opponent is the newest snapshot (else one "
        "of the window at random).",
        low=0.0,
        high=1.0,
        panel="Self-play",
    )
    swap_every: int = setting(
        10_000, help="With --self-play: steps between changes of opponent.", low=1,
        panel="Self-play",
    )  # fmt: skip
    team_change: int = setting(
        100_000,
        help="With --self-play on a game whose two sides have their own spaces (a model "
        "each): steps one side learns before the other side's turn.",
        low=1,
        panel="Self-play",
    )
    opponent: str | None = setting(
        None,
        help="With --self-play: a bot JSON that plays the other sides instead of snapshots.",
        shown="snapshots of the learner",
        panel="Self-play",
    )

    @property
    def num_envs(self) -> int:
        """Agents stepped together: instances x agents per instance."""
        return self.n_parallel * self.agents_per_instance

    def minibatch_size(self, num_envs: int) -> int:
        """``--batch-size``, else the rollout of ``num_envs`` envs cut into the whole
        minibatches nearest ``--minibatches`` (as CleanRL sizes them): no game, however
        few its agents, gets a truncated last minibatch."""
        if self.batch_size is not None:
            return self.batch_size
        rollout = self.n_steps * num_envs
        counts = [c for c in range(1, 2 * self.minibatches + 1) if rollout % c == 0]
        count = min(counts, key=lambda c: (abs(c - self.minibatches), c))
        return rollout // count

    @property
    def game_transport(self) -> str:
        """The transport the games are spoken to with: ``--transport``, else the game's own."""
        if self.transport is not None:
            return self.transport
        if self.game_url is not None:
            return "openenv"
        return "tcp" if self.game_bin is not None else game_entry(self.game).transport

    @property
    def own_game(self) -> str | None:
        """The user's game (``--game-bin`` or ``--game-url``), None for a bundled one."""
        return self.game_bin if self.game_bin is not None else self.game_url

    def validate(self) -> TrainConfig:
        """Check every setting against its declaration (finite, bounds, choices), then the
        settings that depend on each other; :class:`ConfigError` names the offender."""
        for item in fields(self):
            value, meta = getattr(self, item.name), item.metadata
            flag = item.name.replace("_", "-")
            if isinstance(value, float) and not math.isfinite(value):
                # nan passes every comparison below: a nan step size or timeout would
                # reach PPO or the socket code and fail far from the cause.
                raise ConfigError(f"{flag} must be a finite number, got {value}")
            if isinstance(value, int | float) and not isinstance(value, bool):
                if meta.get("low") is not None and value < meta["low"]:
                    low = meta["low"]
                    least = (
                        "0 or more" if low == 0 else "positive" if low < 1 else f"at least {low:g}"
                    )
                    raise ConfigError(f"{flag} must be {least}, got {value:g}")
                if meta.get("high") is not None and value > meta["high"]:
                    raise ConfigError(f"{flag} must be at most {meta['high']:,}, got {value:,}")
            if meta.get("choices") and value is not None and value not in meta["choices"]:
                raise ConfigError(
                    f"{flag} must be one of {', '.join(meta['choices'])}, got {value!r}"
                )
        if self.instances_per_node is not None and self.cluster is None:
            raise ConfigError(
                "--instances-per-node places games on a cluster: add --cluster ADDRESS"
            )
        if self.self_play and self.in_process:
            raise ConfigError(
                "--self-play plays a game's sides through the bridge: drop --in-process"
            )
        if self.self_play and self.collector == "async":
            raise ConfigError(
                "--collector async plays ahead of the update; self-play swaps opponents and "
                "sides between steps: use --collector lean"
            )
        if self.self_play and self.frame_stack > 1:
            raise ConfigError(
                "--frame-stack with --self-play: the other sides' snapshots play single "
                "frames; train a camera game's sides without stacking"
            )
        self._check_memory()
        if self.opponent is not None and not self.self_play:
            raise ConfigError("--opponent plays the other sides of --self-play: add --self-play")
        if self.cluster is not None and self.in_process:
            raise ConfigError("--in-process trains without games: it cannot use --cluster")
        if (self.game_url is not None) != (self.game_transport == "openenv"):
            raise ConfigError(
                "--transport openenv trains an OpenEnv server: give it with --game-url URL"
                if self.game_url is None
                else "--game-url is an OpenEnv server: its transport is openenv"
            )
        if self.game_url is not None and (self.game_bin is not None or self.cluster is not None):
            raise ConfigError("--game-url is a running server: drop --game-bin and --cluster")
        if self.game_url is not None:
            try:
                server_url(self.game_url)
            except ValueError as exc:
                raise ConfigError(f"--game-url: {exc}") from None
        if not is_game_name(self.game):
            raise ConfigError(f"game must be one of {GAME_NAMES}, got {self.game!r}")
        if self.own_game is None:
            check_bundled_game_args(self.game, self.game_args)
        if self.game_bin is not None and self.game != DEFAULT_GAME:
            raise ConfigError(
                f"--game {self.game} names a bundled game and --game-bin another: give one"
            )
        if self.cluster is not None and self.game_transport == "stdio":
            raise ConfigError("stdio games run on the trainer's machine: --cluster needs tcp")
        if self.port > 65535 - self.n_parallel:
            raise ConfigError(
                f"port must leave room for {self.n_parallel} instances below 65536, got {self.port}"
            )
        return self

    def _check_memory(self) -> None:
        """The settings a policy with memory cannot take yet, refused in one line each."""
        if not self.memory:
            return
        refused = {
            "--self-play": self.self_play,
            "--collector async": self.collector == "async",
            "--collector sb3": self.collector == "sb3",
            "--frame-stack": self.frame_stack > 1,
        }
        for flag, given in refused.items():
            if given:
                raise ConfigError(
                    f"--memory with {flag}: not supported yet; train the policy with memory "
                    f"without {flag}"
                )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every setting."""
        return asdict(self)


TUNED = ("n_parallel", "agents_per_instance", "speedup", "n_steps", "batch_size")
"""The settings ``lander tune`` races as lists of its own, not as single values."""
FIELD_NAMES = frozenset(f.name for f in fields(TrainConfig))
RESUMABLE_SETTINGS = tuple(f.name for f in fields(TrainConfig) if f.metadata["resumable"])
"""PPO settings a resume may change; the network's shape stays that of the checkpoint."""
SESSION_SETTINGS: dict[str, Any] = {
    f.name: getattr(TrainConfig(), f.name)
    for f in fields(TrainConfig)
    if not f.metadata["inherited"]
}
"""Settings a resume does not take from its parent run, with their defaults."""
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
    }.get(base, True)
    if not ok:
        raise ConfigError(f"{source}: {name} must be {kind}, got {value!r}")
    if base == "float":
        return float(value)
    if base == "dict[str, str]":
        return {str(k): str(v) for k, v in value.items()}
    return value


def check_bundled_game_args(game: str, game_args: dict[str, str]) -> None:
    """Refuse a ``--game-arg`` the bundled ``game`` does not know, or a value it cannot take,
    naming what it knows: silently ignored, it would train as if it had not been given.

    :raises ConfigError: naming the argument.
    """
    if game.startswith(GYM_PREFIX):
        try:
            check = game_entry(game).check_args
            if check is not None:
                check(game_args)
        except (UnknownGame, ValueError) as exc:
            raise ConfigError(str(exc)) from None
        return
    known = game_entry(game).game_args if game in BUNDLED_GAMES else {}
    for key, value in game_args.items():
        if key not in known:
            raise ConfigError(
                f"--game-arg {key}: the bundled {game} game knows only " + ", ".join(sorted(known))
            )
        choices = known[key]
        if choices is None:
            if not (value.isdigit() and 1 <= int(value) <= MAX_AGENTS):
                raise ConfigError(
                    f"--game-arg {key} must be a whole number from 1 to {MAX_AGENTS}, got {value!r}"
                )
        elif value not in choices:
            raise ConfigError(
                f"--game-arg {key} must be one of {', '.join(choices)}, got {value!r}"
            )


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
        name: dict(value) if isinstance(value, dict) else value
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
