"""One typed configuration for a training run: every setting declared once, with its default.

Built from defaults (or, on a resume, the parent run's saved settings), then a
config file, then command-line flags; saved in ``checkpoints/<run>/run.json`` and
read back on resume. Nothing else parses these settings.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from game_bridge import TRANSPORTS
from game_bridge.frame_stack import MAX_FRAMES
from game_bridge.protocol import DEFAULT_PORT
from games import DEFAULT_GAME, EDITOR_GAME, GYM_PREFIX, REGISTRY, game_entry
from training.config.declare import (
    CAMERA_ENCODERS,
    MAX_ACTION_REPEAT,
    MAX_MEMORY,
    MAX_SPEEDUP,
    MAX_TIMESTEPS,
    setting,
)


@dataclass
class TrainConfig:
    """Every setting of a training run, with its default: the one place a setting is declared."""

    # -- games -------------------------------------------------------------------
    n_parallel: int = setting(
        4, help="Game instances (processes), each on its own port.", low=1, panel="Games"
    )
    # Where lander launches the game it asks for this many agents (a binary declares its own).
    # 4 instances of 4 (rollouts of 1,024; of 8: in parentheses): Pendulum at its mark on 3 seeds
    # of 3 (1), BipedalWalker 234 by 501k (1.49M), LunarLanderContinuous 12.7 s (21.6). Bundled: 8.
    agents_per_instance: int = setting(
        4,
        help="Agents in each instance, where lander launches the game (a game binary declares "
        "its own; at most what this machine's memory holds).",
        low=1,
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
        help="The game's own steps (physics ticks, frames) one step of the policy holds its "
        "action for. A gym: game's own: 4 frames for Atari, 2 for another game of pictures, "
        "1 for vectors.",
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
        f"are its keyword arguments); or {EDITOR_GAME}: wait for the game a person starts in "
        "the Godot editor (press Play).",
        panel="Games",
    )
    game_bin: str | None = setting(
        None,
        help="A game executable speaking the Godot RL Agents protocol (instead of --game).",
        shown="the bundled game",
        panel="Games",
    )
    game_project: str | None = setting(
        None,
        help="A Godot project folder (with project.godot): each instance is the engine on "
        "it, headless, with the plugin's arguments (instead of --game).",
        shown="none",
        panel="Godot",
    )
    scene: str | None = setting(
        None,
        help="With --game-project: the scene to run (res://training.tscn).",
        shown="the project's main scene",
        panel="Godot",
    )
    engine_args: list[str] = setting(
        help="With --game-project: an argument for the engine itself, before the plugin's "
        "(repeatable: --engine-arg=--verbose).",
        factory=list,
        panel="Godot",
    )
    export_preset: str | None = setting(
        None,
        help="With --game-project: train a build exported from this preset of "
        "export_presets.cfg, exported again whenever the project's tracked files change.",
        shown="none: from source",
        panel="Godot",
    )
    editor_wait: float = setting(
        300.0,
        help="With --game editor: seconds to wait for the game a person starts in the editor.",
        low=1.0,
        panel="Godot",
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
    gym_packages: list[str] = setting(
        help=f"With --game {GYM_PREFIX}ENV_ID: a package that registers its ids when imported "
        "(repeatable: --gym-package minigrid), imported in the trainer and every game. A run "
        "records it; a bot file or a record from another checkout never imports it by itself.",
        factory=list,
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
    # (benchmarks/time_to_skill.py); a game that does not accept it is spoken to in JSON.
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
    # Chosen by time to a good bot, not fps (benchmarks/time_to_skill.py): many updates a sample.
    learning_rate: float = setting(
        2e-3,
        help="Adam step size (with --adaptive-kl: where it starts).",
        low=1e-12,
        resumable=True,
        panel="PPO",
    )
    # rsl_rl's adaptive rule, bounded above by the learning rate. A constant 0.002 let a
    # sharpening policy move further each update (BipedalWalker: approx_kl 0.02 early, 0.1-0.7
    # by 1.5M, the reward 215 to 130); held near 0.01 (the std's regrowth bounded, below) the
    # walker reached 235.7 by 1.49M, LunarLander its 200 by 164k steps where the constant step
    # took 584k (docs/performance.md, "BipedalWalker-v3, the sixth").
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
        help="Steps per env per rollout (rollout = n-steps x instances x agents).",
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
        64,
        help="Units in each of the two hidden layers (policy and value); 0: none, the heads "
        "read the features as they are.",
        low=0,
        shape=True,
        panel="PPO",
    )
    camera_encoder: str = setting(
        "centroids",
        help="How the policy sees camera keys: 'centroids' (where things are: each of a few "
        "learned maps' centroid and mass; fast on a CPU), 'nature' (SB3's CNN, for "
        "textured scenes), 'small' (two strided convolutions, a third of its work) or 'narrow' "
        "(the Nature CNN's three at half its maps: its depth for the small one's work).",
        choices=CAMERA_ENCODERS,
        shape=True,
        panel="PPO",
    )
    cnn_features: int = setting(
        256,
        help="Features a CNN camera encoder ('small', 'narrow', 'nature') hands the policy's heads "
        "(SB3's NatureCNN: 512); fixed when a run starts.",
        low=1,
        high=4096,
        shape=True,
        panel="PPO",
    )
    normalize_pixels: bool = setting(  # Sample Factory's normalize_input: PixelNormalization
        False,
        help="A CNN reads each pixel of a lone camera's frames less its running mean, over its "
        "running spread (what stands still goes to 0); fixed when a run starts.",
        shape=True,
        panel="PPO",
    )
    normalize_returns: bool = setting(  # Sample Factory's normalize_returns: ReturnScale
        False,
        help="A CNN's values learn returns over their running spread; fixed when a run starts.",
        shape=True,
        panel="PPO",
    )
    frame_stack: int = setting(
        1,
        help="Camera frames the policy sees at once: each camera key as its last N frames, "
        "oldest first (2 shows motion); the bot records N and its players keep the frames.",
        low=1,
        high=MAX_FRAMES,
        shape=True,
        panel="PPO",
    )
    memory: int = setting(
        0,
        help="Units of memory the policy keeps per agent from step to step (a GRU under its "
        "MLPs, reset at each episode's start; 0: none). For games where what matters was seen "
        "before and is hidden now; the bot keeps the state too.",
        low=0,
        high=MAX_MEMORY,
        shape=True,
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
        help="Rollout loop: lean (one forward for all envs; a CNN picture run's games in "
        "two halves, one half stepping while the other's actions are computed), async (lean, "
        "the next rollout played while PPO updates) or sb3 (SB3's own).",
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
        if self.game_bin is not None or self.game_project is not None or self.game == EDITOR_GAME:
            return "tcp"
        return game_entry(self.game).transport

    @property
    def own_game(self) -> str | None:
        """The user's game (``--game-bin``, ``--game-url``, ``--game-project`` or the game in
        the editor), None for a bundled one."""
        for own in (self.game_bin, self.game_url, self.game_project):
            if own is not None:
                return own
        return EDITOR_GAME if self.game == EDITOR_GAME else None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every setting."""
        return asdict(self)


TUNED = ("n_parallel", "agents_per_instance", "speedup", "n_steps", "batch_size")
"""The settings ``lander tune`` races as lists of its own, not as single values."""
FIELD_NAMES = frozenset(f.name for f in fields(TrainConfig))
RESUMABLE_SETTINGS = tuple(f.name for f in fields(TrainConfig) if f.metadata["resumable"])
"""PPO settings a resume may change; the network's shape stays that of the checkpoint."""
SHAPE_SETTINGS = tuple(f.name for f in fields(TrainConfig) if f.metadata["shape"])
"""The policy network's shape: a resume that names other values than its run's is refused."""
SESSION_SETTINGS: dict[str, Any] = {
    f.name: getattr(TrainConfig(), f.name)
    for f in fields(TrainConfig)
    if not f.metadata["inherited"]
}
"""Settings a resume does not take from its parent run, with their defaults."""
