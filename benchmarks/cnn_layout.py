"""A CNN camera encoder's update as lander feeds it (frames channels last, read as bytes by
its first convolution) against what it replaced (frames channels first, then channels last,
scaled by SB3's ``obs.float() / 255``), rounds alternating in one run.

Each round is PPO's inner work on a minibatch of Atari-sized frames (84 x 84 x 4, uint8 as
the rollout buffer hands them over: channels last where the CNN runs so): the conversion to
floats, the encoder, a linear head, the backward pass and an Adam step, over the real
:class:`CameraExtractor`, on the threads the trainer uses (2 here).

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

FEEDS = {
    "channels first, scaled": (False, False),
    "channels last, scaled": (True, False),
    "channels last, bytes": (True, True),
}
"""Each way of feeding the CNN: (frames channels last, the first convolution reads bytes)."""


def samples_per_second(encoder: str, feed: tuple[bool, bool], batch: int, steps: int) -> float:
    """Minibatch samples a second through ``steps`` updates of a fresh extractor."""
    channels_last, byte_frames = feed
    torch.manual_seed(0)
    space = spaces.Box(0, 255, (4, 84, 84), np.uint8)
    extractor = CameraExtractor(space, encoder, frames=4, features=256, byte_frames=byte_frames)
    extractor.channels_last = channels_last
    head = torch.nn.Linear(extractor.features_dim, 5)
    optimizer = torch.optim.Adam([*extractor.parameters(), *head.parameters()])
    frames = torch.randint(0, 256, (batch, 4, 84, 84), dtype=torch.uint8)
    if channels_last:  # as the rollout buffer hands a CNN its minibatch
        frames = frames.contiguous(memory_format=torch.channels_last)

    def update() -> None:
        floats = frames.float() if byte_frames else frames.float() / 255.0
        loss = head(extractor(floats)).square().mean()
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
    table.add_column("encoder")
    for name in FEEDS:
        table.add_column(name, justify="right")
    table.add_column("bytes / scaled, last", justify="right")
    table.add_column("bytes / first", justify="right")
    for encoder in CNN_ENCODERS:
        rates: dict[str, list[float]] = {name: [] for name in FEEDS}
        for _ in range(args.rounds):
            for name, feed in FEEDS.items():
                rates[name].append(samples_per_second(encoder, feed, args.batch, args.steps))
        first, last, raw = (statistics.median(rates[name]) for name in FEEDS)
        table.add_row(
            encoder,
            *(f"{rate:,.0f}" for rate in (first, last, raw)),
            f"{raw / last:.2f}x",
            f"{raw / first:.2f}x",
        )
    console.print(table)


if __name__ == "__main__":
    main()
