"""Results that stop growing: checkpoints and bots in Git LFS (``setup --lfs``) against a
bare remote in a temporary folder (git-lfs's standalone transfer for local paths), a
clone that gets pointers until its own setup fetches the files, and ``lander prune``."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import find_free_port_block, git, lander

pytestmark = pytest.mark.skipif(
    shutil.which("git-lfs") is None, reason="no git-lfs (./lander setup --dev installs it)"
)
TINY = [
    "--in-process", "--n-parallel", "1", "--agents-per-instance", "4", "--n-steps", "32",
    "--batch-size", "64", "--n-epochs", "1", "--eval-episodes", "2", "--timesteps", "2048",
    "--checkpoint-every", "256", "--keep-checkpoints", "2", "--push-every", "1",
]  # fmt: skip
"""A run of eight checkpoints, each pushed, of which two stay: six rotate into history."""


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def history_blobs(repository: Path, suffix: str) -> dict[str, int]:
    """Every blob whose path ends in ``suffix`` in the repository's whole history, with
    its size in git (a pointer's size under LFS)."""
    listed = git(repository, "rev-list", "--objects", "--all").splitlines()
    blobs = {}
    for line in listed:
        sha, _, path = line.partition(" ")
        if path.endswith(suffix):
            blobs[path] = int(git(repository, "cat-file", "-s", sha).strip())
    return blobs


def test_lfs_keeps_checkpoints_out_of_history_and_a_clone_fetches_only_what_it_needs(
    checkout: tuple[Path, Path], tmp_path: Path
) -> None:
    work, remote = checkout
    set_up = ok(lander(work, "setup", "--lfs", "--port", str(find_free_port_block(1))))
    assert ".gitattributes committed and pushed" in set_up, set_up
    ok(lander(work, "train", "r1", *TINY, timeout=300))
    zips = history_blobs(remote, ".zip")
    rotated = [path for path in zips if "/ckpt_" in path]
    assert len(rotated) >= 6, zips
    assert all(size < 1024 for size in zips.values()), f"history holds pointers only: {zips}"
    assert history_blobs(remote, "bots/r1.onnx")["bots/r1.onnx"] < 1024
    stored = [path for path in (remote / "lfs" / "objects").rglob("*") if path.is_file()]
    assert len(stored) >= len(zips), "the remote's LFS store holds every version"

    laptop = tmp_path / "laptop"
    skip_smudge = {**os.environ, "GIT_LFS_SKIP_SMUDGE": "1"}  # a clone without git-lfs
    subprocess.run(["git", "clone", "-q", str(remote), str(laptop)], env=skip_smudge, check=True)
    assert (laptop / "bots" / "r1.json").stat().st_size < 1024
    played = lander(laptop, "play", "r1", "--seconds", "2")
    assert played.returncode == 1 and "is a Git LFS pointer" in played.stderr, played.stderr
    assert "setup --lfs" in played.stderr and "Traceback" not in played.stderr
    resumed = lander(laptop, "train", "r1b", "--resume", "r1", *TINY)
    assert resumed.returncode == 1 and "Git LFS pointers" in resumed.stderr, resumed.stderr
    assert not (laptop / "checkpoints" / "r1b").exists()

    fetched = ok(lander(laptop, "setup", "--port", str(find_free_port_block(1))))
    assert "git lfs" in fetched and "Git LFS" in fetched, fetched
    assert (laptop / "checkpoints" / "r1" / "final.zip").stat().st_size > 10_000
    assert "episode(s): mean_reward=" in ok(lander(laptop, "play", "r1", "--seconds", "25"))
    ok(lander(laptop, "train", "r2", "--resume", "r1", *TINY, timeout=300))
    git(work, "pull", "-q")
    assert all(size < 1024 for size in history_blobs(remote, ".zip").values())
    assert (work / "checkpoints" / "r2" / "final.zip").stat().st_size > 10_000, (
        "the box fetches the laptop's files on pull"
    )


def test_prune_drops_a_finished_runs_intermediate_checkpoints_and_keeps_what_resumes(
    checkout: tuple[Path, Path], tmp_path: Path
) -> None:
    work, remote = checkout
    ok(lander(work, "train", "p1", *TINY, timeout=300))
    before = set(git(work, "ls-files", "checkpoints/p1").split())
    assert any("/ckpt_" in path for path in before), before
    pruned = ok(lander(work, "prune", "p1"))
    assert "pruned 2 intermediate checkpoint(s) of p1" in pruned and "pushed" in pruned, pruned
    after = set(git(work, "ls-files", "checkpoints/p1").split())
    assert not any("/ckpt_" in path for path in after), after
    kept = {"checkpoints/p1/final.zip", "checkpoints/p1/run.json"}
    assert kept | {"checkpoints/p1/evaluations.jsonl"} <= after
    assert git(work, "ls-files", "bots/p1.json", "bots/p1.onnx").split() == [
        "bots/p1.json",
        "bots/p1.onnx",
    ]
    assert git(work, "rev-parse", "HEAD") == git(remote, "rev-parse", "main")
    assert "nothing to prune" in ok(lander(work, "prune", "p1"))
    ok(lander(work, "train", "p2", "--resume", "p1", *TINY, timeout=300))

    laptop = tmp_path / "laptop"
    git(tmp_path, "clone", "-q", str(remote), str(laptop))
    theirs = lander(laptop, "prune", "p2")
    assert theirs.returncode == 1 and "trained in another checkout" in theirs.stderr
    unknown = lander(laptop, "prune", "nothing")
    assert unknown.returncode == 1 and "does not exist" in unknown.stderr
    assert (laptop / "checkpoints" / "p2").is_dir() and list(
        (laptop / "checkpoints" / "p2").glob("ckpt_*.zip")
    ), "a refused prune removes nothing"
