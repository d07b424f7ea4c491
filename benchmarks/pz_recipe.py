"""PettingZoo's games at equal wall time: lander against the field's recipe.

Per game, per seed, the two sides alternate (the order flips every seed), each given the
same wall-clock budget from launch to its bot:

- **recipe**: what PettingZoo's own SB3 tutorials write. A parallel game: SuperSuit's
  ``pettingzoo_env_to_vec_env_v1`` and ``concat_vec_envs_v1`` (8 copies), one shared SB3
  ``PPO("MlpPolicy", learning_rate=1e-3, batch_size=256)``. A turn-based game with masked
  moves: the tutorial's ``SB3ActionMaskWrapper`` (one policy plays every turn of both
  players) and sb3-contrib's ``MaskablePPO`` with its ``ActionMasker``. Trained in a child
  process until the budget, then saved.
- **lander**: ``lander train RUN --game pz:MODULE`` with nothing else set (``--self-play``
  for a game of two rivals), stopped with Ctrl-C at the budget (its final checkpoint and
  export are part of its time, as a user's would be).

Both bots are then scored the same way (``games/pz/scoring.py``): a cooperative game by
the mean return of all agents over 100 tables; a game of two rivals by the bot's return
against uniformly random legal moves over 200 games, first on half and second on the
other half. The table gives each side's median and lander - recipe.

    .venv/bin/python benchmarks/pz_recipe.py --setup          # once: supersuit, sb3-contrib
    .venv/bin/python benchmarks/pz_recipe.py                  # both games, 3 seeds, 120 s
    .venv/bin/python benchmarks/pz_recipe.py --games mpe2.simple_spread_v3 --budget 60
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from measure import free_base_port
from rich.console import Console
from rich.table import Table

from game_bridge.bot_runner import BotRunner
from games.pz.client import MASK_KEY
from games.pz.scoring import PettingZooScorer

ROOT = Path(__file__).resolve().parent.parent
GAMES = ("mpe2.simple_spread_v3", "pettingzoo.classic.tictactoe_v3")
console = Console(width=150)

RECIPE = r'''
import sys, time, importlib
import numpy as np
module, seed, budget, out = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
started = float(sys.argv[5])
game = importlib.import_module(module)
from stable_baselines3.common.callbacks import BaseCallback

class Budget(BaseCallback):
    def _on_step(self):
        return time.time() - started < budget

if hasattr(game, "parallel_env"):
    import supersuit as ss
    from stable_baselines3 import PPO
    env = ss.pettingzoo_env_to_vec_env_v1(game.parallel_env())
    env = ss.concat_vec_envs_v1(env, 8, num_cpus=1, base_class="stable_baselines3")
    from stable_baselines3.common.utils import set_random_seed
    set_random_seed(seed)  # SuperSuit's vector env takes no seed of its own
    model = PPO("MlpPolicy", env, learning_rate=1e-3, batch_size=256, verbose=0)
else:
    import gymnasium
    import pettingzoo.utils
    from sb3_contrib import MaskablePPO
    from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy
    from sb3_contrib.common.wrappers import ActionMasker

    class SB3ActionMaskWrapper(pettingzoo.utils.BaseWrapper, gymnasium.Env):
        """PettingZoo's tutorial wrapper: one policy plays every turn, as a Gymnasium env."""
        def reset(self, seed=None, options=None):
            super().reset(seed, options)
            self.observation_space = super().observation_space(self.possible_agents[0])["observation"]
            self.action_space = super().action_space(self.possible_agents[0])
            return self.observe(self.agent_selection), {}
        def step(self, action):
            current_agent = self.agent_selection
            super().step(action)
            next_agent = self.agent_selection
            return (self.observe(next_agent), self._cumulative_rewards[current_agent],
                    self.terminations[current_agent], self.truncations[current_agent],
                    self.infos[current_agent])
        def observe(self, agent):
            return super().observe(agent)["observation"]
        def action_mask(self):
            return super().observe(self.agent_selection)["action_mask"]

    env = SB3ActionMaskWrapper(game.env())
    env.reset(seed=seed)
    env = ActionMasker(env, lambda e: e.action_mask())
    model = MaskablePPO(MaskableActorCriticPolicy, env, seed=seed, verbose=0)
model.learn(10**9, callback=Budget())
model.save(out)
print(model.num_timesteps)
'''


def run_recipe(module: str, seed: int, budget: float, folder: Path) -> tuple[Any, int]:
    """The recipe trained for ``budget`` seconds from launch; its model and steps."""
    launched = time.time()
    out = folder / "recipe"
    done = subprocess.run(
        [sys.executable, "-c", RECIPE, module, str(seed), str(budget), str(out), str(launched)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"the recipe failed on {module}:\n{done.stderr[-2000:]}")
    steps = int(done.stdout.split()[-1])
    if hasattr(__import__(module, fromlist=["_"]), "parallel_env"):
        from stable_baselines3 import PPO

        model: Any = PPO.load(str(out), device="cpu")

        def policy(obs: Any) -> np.ndarray:
            return np.asarray(model.predict(obs, deterministic=True)[0])

        return policy, steps
    from sb3_contrib import MaskablePPO

    masked = MaskablePPO.load(str(out), device="cpu")

    def masked_policy(obs: Any) -> np.ndarray:
        cells = np.asarray(obs["observation"]).reshape(len(obs[MASK_KEY]), 3, 3, 2)
        masks = np.asarray(obs[MASK_KEY]) > 0.5
        return np.asarray(masked.predict(cells, action_masks=masks, deterministic=True)[0])

    return masked_policy, steps


def run_lander(module: str, seed: int, budget: float, folder: Path) -> tuple[Any, int]:
    """``lander train`` with its defaults, Ctrl-C at ``budget`` seconds; its bot and steps."""
    home = folder / "home"
    home.mkdir()
    subprocess.run(["git", "init", "-q", str(home)], check=True)
    two = PettingZooScorer(module, ()).rivals()
    command = [
        str(ROOT / ".venv" / "bin" / "lander"), "train", "pz", "--game", f"pz:{module}",
        "--timesteps", "100000000", "--seed", str(seed), "--no-git",
        "--port", str(free_base_port(8)), *(["--self-play"] if two else []),
    ]  # fmt: skip
    env = {**os.environ, "LANDER_HOME": str(home)}
    launched = time.time()
    process = subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    time.sleep(max(0.0, budget - (time.time() - launched)))
    process.send_signal(signal.SIGINT)
    output, _ = process.communicate(timeout=300)
    bot = home / "bots" / "pz.json"
    if not bot.exists():
        raise SystemExit(f"lander left no bot on {module}:\n{output[-2000:]}")
    spec = json.loads(bot.read_text())
    return BotRunner(spec).policy(), int(spec.get("timesteps") or 0)


def score(module: str, policy: Any, seed: int) -> float:
    """The same score for both sides (see the module's docstring)."""
    scorer = PettingZooScorer(module, ())
    games = 200 if scorer.rivals() else 100
    returns, _ = scorer.play(policy, games, 10_000 + seed)
    return float(np.mean(returns))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--setup", action="store_true", help="install the recipe's libraries")
    parser.add_argument("--games", default=",".join(GAMES), help="comma-separated modules")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--budget", type=float, default=120.0, help="seconds a side trains")
    args = parser.parse_args()
    if args.setup:
        pip = [sys.executable, "-m", "pip", "install", "--quiet"]
        subprocess.run([*pip, "supersuit>=3.9,<4", "sb3-contrib>=2.4,<3"], check=True)
        return
    table = Table(title=f"PettingZoo at {args.budget:.0f} s of wall time a side (median of seeds)")
    for column in ("game", "recipe", "lander", "lander - recipe", "steps recipe", "steps lander"):
        table.add_column(column)
    for module in args.games.split(","):
        scores: dict[str, list[float]] = {"recipe": [], "lander": []}
        steps: dict[str, list[int]] = {"recipe": [], "lander": []}
        for seed in range(args.seeds):
            order = ("recipe", "lander") if seed % 2 == 0 else ("lander", "recipe")
            for side in order:
                with tempfile.TemporaryDirectory(prefix=f"pz-{side}-") as folder:
                    run = run_recipe if side == "recipe" else run_lander
                    policy, taken = run(module, seed, args.budget, Path(folder))
                    result = score(module, policy, seed)
                scores[side].append(result)
                steps[side].append(taken)
                console.print(f"  {module} seed {seed} {side}: {result:.3f} after {taken:,} steps")
        recipe, lander = (statistics.median(scores[s]) for s in ("recipe", "lander"))
        table.add_row(
            module, f"{recipe:.3f}", f"{lander:.3f}", f"{lander - recipe:+.3f}",
            f"{statistics.median(steps['recipe']):,.0f}", f"{statistics.median(steps['lander']):,.0f}",
        )  # fmt: skip
    console.print(table)


if __name__ == "__main__":
    main()
