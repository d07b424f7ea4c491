"""What a fresh clone weighs after N runs: plain git against Git LFS, each with and without
``lander prune`` of every finished run.

For each way, a temporary checkout with a bare remote trains N real runs in-process (the
default network, so each checkpoint is a real one), each pushing every checkpoint as it
is made (``--push-every 1``) while only two rotate on in the folder, as a long run does.
Then a fresh clone is made the way a second machine makes one (with LFS: a clone, then
``lander setup`` fetches the current files), and its size is measured: what git
fetched (``.git``) and what it holds on disk (with the work tree).

    .venv/bin/python benchmarks/clone_weight.py [--runs 10] [--timesteps 32768]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

from measure import run_checked
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
LANDER = ROOT / ".venv" / "bin" / "lander"
WAYS = (("plain git", False, False), ("plain git + prune", False, True),
        ("Git LFS", True, False), ("Git LFS + prune", True, True))  # fmt: skip
console = Console()


def _lander(home: Path, *args: str) -> str:
    return run_checked(home, str(LANDER), *args, env={"LANDER_HOME": str(home)})


def _size(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def measure(
    folder: Path, runs: int, timesteps: int, lfs: bool, prune: bool
) -> tuple[int, int, int, int]:
    """Train ``runs`` runs in a checkout of a bare remote, clone it afresh, and return the
    clone's ``.git`` size and its whole size in bytes, the model zips its history holds,
    and the mean size of a run's ``final.zip``."""
    remote, work = folder / "remote.git", folder / "work"
    run_checked(folder, "git", "init", "-q", "--bare", "-b", "main", str(remote))
    run_checked(folder, "git", "init", "-q", "-b", "main", str(work))
    shutil.copy(ROOT / ".gitignore", work / ".gitignore")
    run_checked(work, "git", "add", "-A")
    run_checked(work, "git", "commit", "-q", "-m", "init")
    run_checked(work, "git", "remote", "add", "origin", str(remote))
    run_checked(work, "git", "push", "-q", "-u", "origin", "main")
    if lfs:
        _lander(work, "setup", "--lfs")
    every = max(64, timesteps // 8)
    for index in range(runs):
        run = f"run{index:02d}"
        _lander(
            work, "train", run, "--in-process", "--timesteps", str(timesteps),
            "--checkpoint-every", str(every), "--keep-checkpoints", "2", "--push-every", "1",
            "--eval-episodes", "2",
        )  # fmt: skip
        if prune:
            _lander(work, "prune", run)
    clone = folder / "clone"
    run_checked(
        folder, "git", "clone", "-q", str(remote), str(clone), env={"GIT_LFS_SKIP_SMUDGE": "1"}
    )
    if lfs:
        _lander(clone, "setup")  # the repository uses LFS: setup fetches the current files
    objects = run_checked(clone, "git", "rev-list", "--objects", "--all").splitlines()
    versions = sum(line.endswith(".zip") for line in objects)
    finals = [path.stat().st_size for path in clone.glob("checkpoints/*/final.zip")]
    return _size(clone / ".git"), _size(clone), versions, sum(finals) // max(1, len(finals))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--timesteps", type=int, default=32768)
    args = parser.parse_args()
    if shutil.which("git-lfs") is None:
        raise SystemExit("git-lfs is missing: ./lander setup --dev installs it")
    table = Table(title=f"a fresh clone after {args.runs} runs of {args.timesteps:,} steps")
    columns = ("way", "model zips in history", "final.zip", "fetched (.git)", "on disk",
               "fetched vs plain git")  # fmt: skip
    for column in columns:
        table.add_column(column, justify="left" if column == "way" else "right")
    results = []
    for name, lfs, prune in WAYS:
        with tempfile.TemporaryDirectory(prefix="lander-clone-") as folder:
            console.print(f"{name}: training {args.runs} runs ...")
            results.append((name, *measure(Path(folder), args.runs, args.timesteps, lfs, prune)))
    plain = results[0][1]
    for name, fetched, disk, versions, final in results:
        table.add_row(name, str(versions), f"{final / 2**10:.0f} KB", f"{fetched / 2**20:.1f} MB",
                      f"{disk / 2**20:.1f} MB", f"{fetched / plain:.2f}")  # fmt: skip
    console.print(table)


if __name__ == "__main__":
    main()
