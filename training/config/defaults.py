"""Defaults by kind of input, over the general ones that :class:`TrainConfig` declares and
under a game's own (``GameEntry.train_defaults``): each setting with the evidence that chose
it, measured over a suite of games, never per game id."""

from __future__ import annotations

from typing import Any

PICTURE_DEFAULTS: dict[str, Any] = {
    # The Nature CNN's three convolutions at half its maps (``narrow``), 512 features read
    # by linear heads, rewards unscaled (the zoo's network but its width). The small CNN (the
    # first DQN's two convolutions) learned Breakout slowly per sample: at 2 to 3 until 200k
    # samples over three seeds where the zoo is at 7.8 to 9.1, and behind the zoo at 10 and 20
    # minutes on their median ("Games that see, sixteenth part"). The narrow CNN runs at its
    # pace (746 samples/s against 639 on Breakout) and learns per sample near the zoo; at 40
    # minutes, seed 0, Breakout at 11.8 / 17.0 / 23.6 / 30.3 at 10 / 20 / 30 / 40 minutes
    # against the small CNN's 4.4 / 11.8 / 17.1 / 21.0 and the zoo's 6.1 / 12.7 / 14.1 / 18.2,
    # at the zoo's 40-minute reward in 1,260 s (1.90x sooner; the small CNN 1.12x). Ahead of
    # the zoo at every mark on SpaceInvaders and Pong too, but later to its 40-minute reward
    # than the small CNN there (1.79x against 2.11x; Pong 1.60x against 1.96x, 4.5 against
    # 17.1 at 30 minutes): the suite's median 1.85x against 2.04x, its slowest game 1.60x
    # against 1.12x, and never behind the zoo ("seventeenth part", one seed a game). With
    # the games stepping the emulator directly (games/gym/ale_frames.py: the same rewards at
    # every sample count, sooner) Breakout 2.16x, SpaceInvaders 1.91x, Pong 1.89x, the
    # median 2.04x ("twentieth part"). The zoo's own network (the Nature CNN) runs at 0.6x
    # its pace. Why a CNN at all: the centroids, made for a few sprites on a dark field,
    # cannot tell Breakout's ball from its bricks (a map is a mix of grey frames; 2.3 in 4
    # minutes, random play 1.4: docs/performance.md, "Games that see").
    "camera_encoder": "narrow",
    "cnn_features": 512,
    "net_width": 0,
    "normalize_rewards": False,
    # The field's settings for a CNN (the PPO paper's Atari table, CleanRL's ppo_atari, RL
    # Zoo's atari entry): 128-step rollouts, 4 epochs, a step of 2.5e-4, a clip of 0.1,
    # gamma 0.99 and GAE 0.95, a constant step (no schedule, no adaptive KL: the CNN's
    # minibatch KL is not the MLP's). With them the small CNN ran 400 samples/s on Breakout.
    # Half the epochs on twice the minibatches (the same gradient steps for half the
    # update's work) left the zoo's network through lander far behind per sample on Pong
    # (-16.4 against -0.4 at 800k samples) for 1.14x the samples a second: "twelfth part".
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
    # Eight minibatches of 128 learned Breakout per sample as the zoo does, but SpaceInvaders
    # fell behind the zoo at 10 minutes and Pong was no sooner ("eighteenth part").
    "agents_per_instance": 2,
    # Each pixel of the stacked frames less its running mean, over its running spread,
    # clipped at 5 (Sample Factory's normalize_input, on in its Atari defaults): what stands
    # still goes to 0 and what moves stands out. Seed 0, 10 minutes, against the frames scaled
    # to [0, 1]: Qbert (not in the suite) 990 / 2,366 at 5 / 10 minutes against 329 / 390
    # (Sample Factory 466 / 656, CleanRL 332 / 434), 1,180 at 280k samples against 332;
    # Breakout 12.7 / 19.4 at 200k / 400k samples against 6.0 / 11.3; SpaceInvaders 211 / 318
    # against 257 / 272 ("Games that see against the fastest peers, second part").
    "normalize_pixels": True,
    # Its value head learns returns less their running mean, over their running spread
    # (Sample Factory's normalize_returns, also on in its Atari defaults). With clipped
    # rewards a sparse game's returns are a few tenths, a dense one's several units: the head
    # learns both at one scale. Seed 0, 10 minutes, against these defaults without it, by
    # equal samples: Pong 18.1 / 19.6 at 300k / 480k against 8.3 / 17.7 and -5.0 / 9.9 (two
    # runs; 19.6 at 10 minutes); BattleZone 5,195 / 8,630 at 100k / 200k against 3,520 /
    # 4,980; DoubleDunk -15.2 at 350k against -17.1 (ahead of the three peers at 5 and 10
    # minutes, where without it it was behind two); SpaceInvaders 275 at 200k against 211,
    # 284 / 341 at 5 / 10 minutes against 249 / 299; Breakout level (12.9 / 16.4 at 200k /
    # 400k against 12.7 / 19.4); Qbert behind (545 / 919 at 150k / 280k against 645 / 1,180,
    # and the two runs without it differ as much): "Games that see against the fastest
    # peers, fifth part".
    "normalize_returns": True,
}
"""The settings a new run starts from where its game sends pictures (a camera key), over
the general ones below and under the game's own (the bundled camera modes keep theirs)."""

CONTINUOUS_PICTURE_DEFAULTS: dict[str, Any] = {
    # Continuous actions from pictures (CarRacing-v3 in the suite), over PICTURE_DEFAULTS.
    # RL Zoo's CarRacing-v3 entry but its rollouts' length: a small first std, and more,
    # smaller, slower steps. At the picture defaults (std 1) a fresh policy steers at random
    # over the whole range, spins off the road, and in 10 minutes the run fell from -35 to
    # -55 (-41 at best: the zoo 157); a std of 0.37 alone reached -33 in 6 minutes; with all
    # of these the same run climbed to 40 by 7 minutes and was still climbing by 17 a rollout
    # (docs/performance.md, "Games that see, third part").
    "log_std_init": -2.0,
    # Rollouts of 128 steps (1,024 samples, 8 minibatches of 128) where the zoo plays 512:
    # the same minibatch and gradient steps a sample, four times the updates an hour. With
    # 512 a run sat near -30 for its first 350 s (likely: at a small std a clipped update
    # moves the gas by a few hundredths) and climbed about 25 a rollout; with 128, at 10 minutes
    # over seeds 0 to 2: 281.7 / 196.5 / 225.5 against 58.5 / 93.0 / 115.4 (the zoo: 201.1 /
    # -53.6 / -77.8); at 40 minutes, seed 0, alternated with the zoo, at its 417.6 in 824 s
    # against its 2,290 s (2.78x): "Games that see, fourteenth part".
    "n_steps": 128,
    "n_epochs": 10,
    "minibatches": 8,
    "learning_rate": 1e-4,
    "clip_range": 0.2,
    # The small CNN, 256 features read by two tanh layers of 64, rewards scaled: what every
    # CarRacing figure above was measured with. The ALE games' narrow CNN with linear heads
    # and unscaled rewards is not measured on a wheel yet (CarRacing's -0.1 a frame and
    # +1000/N a tile are far from 1 in size: the zoo scales them too).
    "camera_encoder": "small",
    "cnn_features": 256,
    "net_width": 64,
    "normalize_rewards": True,
    # Frames scaled to [0, 1] and values in returns, as every CarRacing figure was measured
    # (pixels and returns normalized by their running statistics are measured on the ALE
    # games only).
    "normalize_pixels": False,
    "normalize_returns": False,
}
"""The settings a new run starts from where its game sends pictures and acts with continuous
actions, over :data:`PICTURE_DEFAULTS` (the gym games; the bundled camera modes keep
theirs)."""

MANY_AGENT_DEFAULTS: dict[str, Any] = {
    # PettingZoo's games (``--game pz:MODULE``), over the general defaults and under those for
    # pictures: chosen over a suite of a cooperative game of three agents alike
    # (mpe2.simple_spread_v3, 300k steps) and two turn-based games of rivals with masked
    # moves trained by self-play (tic-tac-toe, 60k steps; connect four, 150k steps), two
    # seeds each, scored as `lander eval` scores them (benchmarks/many_agents.py;
    # docs/performance.md, "Many agents"). With the general defaults simple_spread's bots
    # fell below random play (-32.6 and -27.9; random -25.3): rewards scaled by the running
    # spread of a discounted return that, with episodes cut at 25 steps and bootstrapped
    # through a discount of 0.995, stands for 200 steps that never come; with these, -18.5
    # and -19.5. Against random legal moves, tic-tac-toe 0.79 and 0.76 (general: 0.51 and
    # 0.80), connect four 0.76 and 0.88 (general: 0.60 and 0.94): the medians 0.78 and 0.82
    # against 0.66 and 0.77.
    "gamma": 0.99,
    "normalize_rewards": False,
    # Rollouts of 512 steps: every agent of every table is a row, so a rollout holds many
    # short games; 64 steps made the update chase a few dozen of them (simple_spread with
    # gamma 0.99 and unscaled rewards: -22.1 and -24.8 at 64 steps, -18.5 and -19.5 at 512).
    "n_steps": 512,
}
"""The settings a new run of a PettingZoo game starts from (``games/pz/``), over the general
ones and under the defaults for pictures where its agents see pictures."""
