"""A CNN camera encoder's update with its frames channels last (what lander's extractor
does) against the frames' own channels-first layout, rounds alternating in one run.

Each round is PPO's inner work on a minibatch of Atari-sized frames (84 x 84 x 4, uint8
scaled as SB3 scales them): the encoder, a linear head, the backward pass and an Adam
step, over the real :class:`CameraExtractor`, on the threads the trainer uses (2 here).

    .venv/bin/python benchmarks/cnn_layout.py [--batch 256] [--rounds 5] [--steps 10]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch
from gymnasium import spaces
from rich.console import Console
from rich.table import Table

from training.ppo.camera_policy import CNN_ENCODERS, CameraExtractor

console = Console()


def samples_per_second(encoder: str, channels_last: bool, batch: int, steps: int) -> float:
    """Minibatch samples a second through ``steps`` updates of a fresh extractor."""
    torch.manual_seed(0)
    space = spaces.Box(0, 255, (4, 84, 84), np.uint8)
    extractor = CameraExtractor(space, encoder, frames=4, features=256)
    extractor.channels_last = channels_last
    head = torch.nn.Linear(extractor.features_dim, 5)
    optimizer = torch.optim.Adam([*extractor.parameters(), *head.parameters()])
    frames = torch.randint(0, 256, (batch, 4, 84, 84), dtype=torch.uint8)

    def update() -> None:
        loss = head(extractor(frames.float() / 255.0)).square().mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    update()  # the first call builds oneDNN's kernels
    started = time.perf_counter()
    for _ in range(steps):
        update()
    return batch * steps / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=256, help="frames a minibatch")
    parser.add_argument("--rounds", type=int, default=5, help="alternations per encoder")
    parser.add_argument("--steps", type=int, default=10, help="updates a measurement")
    parser.add_argument("--threads", type=int, default=2, help="torch threads")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    table = Table(title="CNN update, samples/s (median of rounds, alternating)")
    for column in ("encoder", "channels first", "channels last", "ratio"):
        table.add_column(column, justify="right")
    for encoder in CNN_ENCODERS:
        rates: dict[bool, list[float]] = {False: [], True: []}
        for _ in range(args.rounds):
            for layout in (False, True):
                rates[layout].append(samples_per_second(encoder, layout, args.batch, args.steps))
        first, last = (statistics.median(rates[layout]) for layout in (False, True))
        table.add_row(encoder, f"{first:,.0f}", f"{last:,.0f}", f"{last / first:.2f}x")
    console.print(table)


if __name__ == "__main__":
    main()
