"""Each training setting is declared once (``training.config``) and every command that
trains offers it: the declarations and the commands' options are the same set, and
every option changes the setting it names."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from cli.app import app
from cli.common.train_flags import option_name
from cli.runs import run_flow
from games import DEFAULT_GAME, game_entry
from training.config import (
    CONTINUOUS_PICTURE_DEFAULTS,
    MANY_AGENT_DEFAULTS,
    PICTURE_DEFAULTS,
    TUNED,
    TrainConfig,
)
from training.session.trainer import TrainRequest, plan_training

DECLARED = {option_name(item.name) for item in fields(TrainConfig)}
EXCLUDED = {"sweep": {"push_every"}, "tune": set(TUNED)}


def _options(command: str) -> set[str]:
    group = typer.main.get_command(app)
    commands = group.commands  # type: ignore[attr-defined]
    return {
        name
        for param in commands[command].params
        if param.param_type_name == "option"
        for name in param.opts  # the --no-x of a --x/--no-x pair is its secondary name
    }


@pytest.mark.parametrize("command", ["train", "start", "resume", "next", "sweep", "tune"])
def test_every_training_command_offers_every_declared_setting(command: str) -> None:
    wanted = DECLARED - {option_name(name) for name in EXCLUDED.get(command, set())}
    assert wanted <= _options(command)


def test_train_options_are_the_declared_settings_and_the_session_options() -> None:
    session = {
        "--config", "--resume", "--reset-std", "--force", "--git", "--no-git", "--help",
        "--auto-resume", "--no-auto-resume", "--until-steps", "--demos",
    }  # fmt: skip
    assert _options("train") - session == DECLARED


def test_a_mistyped_option_is_never_offered_a_hidden_one() -> None:
    result = CliRunner().invoke(app, ["train", "x", "--steps", "5"])
    assert result.exit_code == 2 and "--timesteps" in result.output, result.output
    assert "--until-steps" not in result.output, "an internal option is no suggestion"


def test_help_shows_a_port_as_a_port_and_a_count_grouped() -> None:
    shown = CliRunner().invoke(app, ["train", "--help"], terminal_width=200).output
    assert "[default: 11008]" in shown and "11,008" not in shown
    assert "[default: 600,000]" in shown, "step counts read grouped"


GODOT_PROJECT = Path(__file__).resolve().parent.parent / "examples" / "godot_lander"
NEEDS: dict[str, dict[str, str | None]] = {
    "instances_per_node": {"cluster": "10.0.0.5:6379"},
    "opponent": {"self_play": None},  # None: a flag without a value
    "scene": {"game_project": str(GODOT_PROJECT)},
    "engine_args": {"game_project": str(GODOT_PROJECT)},
    "export_preset": {"game_project": str(GODOT_PROJECT)},
    "gym_packages": {"game": "gym:CartPole-v1"},
}
A_BOT = Path(__file__).resolve().parent / "fixtures" / "old_layout" / "bots" / "old1.json"


def _changed(item_name: str, default: Any, tmp_path: Path) -> tuple[list[str], Any]:
    """A value other than the default for a setting, as typed and as expected."""
    flag = option_name(item_name)
    if item_name == "game_args":
        return [flag, "difficulty=2"], {"difficulty": "2"}
    if item_name == "game_bin":
        game = tmp_path / "game.x86_64"
        game.write_text("#!/bin/sh\n")
        game.chmod(0o755)
        return [flag, str(game)], str(game.resolve())
    if item_name == "game_project":
        return [flag, str(GODOT_PROJECT)], str(GODOT_PROJECT)
    if item_name == "scene":
        return [flag, "res://training.tscn"], "res://training.tscn"
    if item_name == "engine_args":  # one token: the engine's own flag as the option's value
        return [f"{flag}=--verbose"], ["--verbose"]
    if item_name == "export_preset":
        return [flag, "training"], "training"
    if item_name == "gym_packages":  # a module every Python has: importing it does nothing
        return [flag, "json"], ["json"]
    if item_name == "editor_wait":
        return [flag, "30"], 30.0
    if item_name == "device":
        return [flag, "cpu"], "cpu"
    if item_name == "collector":
        return [flag, "sb3"], "sb3"
    if item_name == "game_url":
        return [flag, "http://127.0.0.1:8000"], "http://127.0.0.1:8000"
    if item_name == "openenv_schema":
        return [flag, "fields.json"], "fields.json"
    if item_name == "camera_encoder":
        return [flag, "nature"], "nature"
    if item_name == "batch_size":
        return [flag, "96"], 96
    if item_name == "game":
        return [flag, "stroke"], "stroke"
    if item_name == "transport":
        return [flag, "stdio"], "stdio"
    if item_name == "cluster":
        return [flag, "10.0.0.5:6379"], "10.0.0.5:6379"
    if item_name == "instances_per_node":
        return [flag, "2"], 2
    if item_name == "opponent":
        return [flag, str(A_BOT)], str(A_BOT)
    if isinstance(default, bool):
        return [flag if not default else f"--no-{flag[2:]}"], not default
    if item_name in ("gamma", "gae_lambda"):
        return [flag, "0.5"], 0.5
    if default is None or isinstance(default, float):
        value = 2.5 if item_name == "speedup" else 3 if item_name == "action_repeat" else 0.25
        return [flag, str(value)], value
    return [flag, str(default + 1)], default + 1


def test_every_option_changes_the_setting_it_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    requests: list[TrainRequest] = []
    monkeypatch.setattr(
        run_flow, "run_training", lambda request, _git: requests.append(request) or 0
    )
    defaults = TrainConfig()
    plain = plan_training(TrainRequest(tmp_path, "x", {})).config  # the lander's own defaults in
    tuned = set(game_entry(DEFAULT_GAME).train_defaults)
    for item in fields(TrainConfig):
        argv, expected = _changed(item.name, getattr(defaults, item.name), tmp_path)
        needs = NEEDS.get(item.name, {})  # a setting that only applies beside another
        for name, value in needs.items():
            argv += [option_name(name)] if value is None else [option_name(name), value]
        result = CliRunner().invoke(app, ["train", "x", *argv], env={"LANDER_HOME": str(tmp_path)})
        assert result.exit_code == 0, (argv, result.output)
        config = plan_training(requests[-1]).config
        assert getattr(config, item.name) == expected, item.name
        others = {f.name for f in fields(TrainConfig)} - {item.name, *needs}
        if item.name in ("game", "game_bin", "game_url", "game_project") or (
            needs.get("game_project") or needs.get("game")
        ):
            others -= tuned  # another game starts from its own settings
        if item.name == "memory":  # and its own rollouts (the test after this one)
            others -= {"n_steps", "n_epochs"}
        assert all(getattr(config, name) == getattr(plain, name) for name in others), argv


def test_a_new_run_starts_from_its_games_tuned_settings(tmp_path: Path) -> None:
    """The bundled lander trains with 32-step rollouts unless told otherwise; the stroke
    game (rewards that come late) and a game binary keep the general 64; a config file or
    a flag wins over the game's own (a resume keeps what its run recorded:
    tests/test_lean_ppo.py resumes a 64-step run of the lander as 64)."""
    config_file = tmp_path / "plan.toml"
    config_file.write_text("n_steps = 16\n")

    def planned(**request: Any) -> int:
        return plan_training(TrainRequest(tmp_path, "tuned", **request)).config.n_steps

    assert planned(overrides={}) == 32
    assert planned(overrides={"n_steps": 48}) == 48
    assert planned(overrides={}, config_file=config_file) == 16
    assert planned(overrides={"game": "stroke"}) == 64
    assert planned(overrides={"game_bin": "/bin/true"}) == 64
    assert planned(overrides={"game_project": "/srv/game"}) == 64  # a Godot project: general
    editor = plan_training(TrainRequest(tmp_path, "ed", overrides={"game": "editor"})).config
    assert editor.n_parallel == 1 and editor.n_steps == 64  # one game, the person's
    assert TrainConfig().n_steps == 64

    def rate(**overrides: Any) -> float:
        return plan_training(
            TrainRequest(tmp_path, "eyes", overrides=overrides)
        ).config.learning_rate

    # The lander in glimpses learns with its own step (games/lander/entry.py); through its
    # camera, whitened, with the general one, as a game binary's camera does.
    glimpse = {"game_args": {"observation": "glimpse"}}
    assert rate(**glimpse) == 1e-3 and rate() == TrainConfig().learning_rate == 2e-3
    assert rate(**glimpse, learning_rate=3e-4) == 3e-4
    assert rate(game_args={"observation": "pixels"}) == 2e-3
    assert rate(game_args={"observation": "vector"}) == 2e-3

    # A game nobody tuned lander for gets 4 agents an instance; the bundled games their 8.
    def agents(**overrides: Any) -> int:
        return plan_training(
            TrainRequest(tmp_path, "agents", overrides=overrides)
        ).config.agents_per_instance

    assert agents(game="gym:CartPole-v1") == TrainConfig().agents_per_instance == 4
    assert agents() == agents(game="stroke") == 8
    assert agents(agents_per_instance=2) == 2


def test_a_run_recorded_before_the_adaptive_step_size_resumes_with_a_constant_one() -> None:
    from training.config import TrainConfig, from_dict

    saved = TrainConfig().to_dict()
    del saved["adaptive_kl"]
    assert from_dict(saved, "run.json").adaptive_kl == 0.0
    adaptive = TrainConfig(adaptive_kl=0.03).to_dict()
    assert from_dict(adaptive, "run.json").adaptive_kl == 0.03  # a run that chose it keeps it
    del saved["std_regrowth"], saved["max_std"]
    older = from_dict(saved, "run.json")
    assert older.std_regrowth == 0.0 and older.max_std == 0.0  # as it trained
    assert TrainConfig().std_regrowth == 1.0 and TrainConfig().adaptive_kl == 0.01


def test_a_policy_with_memory_plans_long_sequences_and_fewer_passes(tmp_path: Path) -> None:
    """``--memory`` raises a run's rollout to 128 steps an agent and halves PPO's passes
    (its update replays every sequence through the GRU); flags still decide."""

    def plan(**overrides: Any) -> Any:
        return plan_training(TrainRequest(tmp_path, "recall", overrides=overrides)).config

    glimpse = {"game_args": {"observation": "glimpse"}}
    remembering = plan(memory=64, **glimpse)
    assert (remembering.n_steps, remembering.n_epochs) == (128, 5)
    assert remembering.learning_rate == 1e-3, "the glimpse mode's own step"
    plain = plan(**glimpse)
    assert (plain.n_steps, plain.n_epochs) == (32, 10), "no memory: the lander's own"
    chosen = plan(memory=64, n_steps=512, n_epochs=7)
    assert (chosen.n_steps, chosen.n_epochs) == (512, 7)
    general = plan(memory=16, game="gym:CartPole-v1")
    assert (general.n_steps, general.n_epochs) == (128, 5)


def test_a_game_that_sends_pictures_starts_from_the_defaults_for_pictures(
    tmp_path: Path,
) -> None:
    """A ``gym:`` game whose observation is a picture (Atari, CarRacing) starts from the
    defaults for pictures, a game of numbers from the general ones, a flag wins over both;
    the bundled camera modes keep what they were measured with, whatever the defaults for
    pictures say (a default is chosen per kind of input, never per game id)."""
    assert PICTURE_DEFAULTS, "the defaults for pictures are declared"

    def planned(**overrides: Any) -> TrainConfig:
        return plan_training(TrainRequest(tmp_path, "seen", overrides=overrides)).config

    general = TrainConfig()
    continuous = {**PICTURE_DEFAULTS, **CONTINUOUS_PICTURE_DEFAULTS}
    for game, expected in (
        ("gym:PongNoFrameskip-v4", PICTURE_DEFAULTS),
        ("gym:CarRacing-v3", continuous),
    ):
        config = planned(game=game)
        assert {name: getattr(config, name) for name in expected} == expected, game
    pong = planned(game="gym:PongNoFrameskip-v4")
    assert pong.log_std_init == general.log_std_init and pong.n_steps == PICTURE_DEFAULTS["n_steps"]
    numbers = planned(game="gym:CartPole-v1")
    assert all(getattr(numbers, name) == getattr(general, name) for name in PICTURE_DEFAULTS)
    name, value = next(iter(PICTURE_DEFAULTS.items()))
    other = {"camera_encoder": "nature"} if name == "camera_encoder" else {name: value * 2}
    assert getattr(planned(game="gym:PongNoFrameskip-v4", **other), name) == other[name]
    for game in ("lander", "stroke"):
        vector = planned(game=game)
        camera = planned(game=game, game_args={"observation": "pixels"})
        for setting in continuous:
            assert getattr(camera, setting) == getattr(vector, setting), (game, setting)


def test_a_pettingzoo_game_starts_from_the_defaults_for_many_agents(tmp_path: Path) -> None:
    """A ``pz:`` game starts from the defaults for many agents (chosen over a suite of
    PettingZoo games), a ``gym:`` game of numbers from the general ones; a flag wins."""
    assert MANY_AGENT_DEFAULTS, "the defaults for many agents are declared"

    def planned(**overrides: Any) -> TrainConfig:
        return plan_training(TrainRequest(tmp_path, "many", overrides=overrides)).config

    spread = planned(game="pz:mpe2.simple_spread_v3")
    assert {name: getattr(spread, name) for name in MANY_AGENT_DEFAULTS} == MANY_AGENT_DEFAULTS
    numbers = planned(game="gym:CartPole-v1")
    general = TrainConfig()
    assert all(getattr(numbers, n) == getattr(general, n) for n in MANY_AGENT_DEFAULTS)
    assert planned(game="pz:mpe2.simple_spread_v3", n_steps=96).n_steps == 96


def test_a_gym_games_settings_decide_its_kind_of_input(tmp_path: Path) -> None:
    """The defaults follow what the game sends and takes with the run's ``--game-arg``
    settings, not with its id's own: CarRacing with ``continuous=False`` acts with five
    keys (the defaults for pictures, not for a wheel), Pong with ``obs_type=ram`` sends 128
    numbers (the general defaults)."""

    def planned(game: str, game_args: dict[str, str]) -> TrainConfig:
        request = TrainRequest(tmp_path, "kind", overrides={"game": game, "game_args": game_args})
        return plan_training(request).config

    general = TrainConfig()
    keys = planned("gym:CarRacing-v3", {"continuous": "False"})
    assert {name: getattr(keys, name) for name in PICTURE_DEFAULTS} == PICTURE_DEFAULTS
    assert keys.log_std_init == general.log_std_init
    assert keys.learning_rate == PICTURE_DEFAULTS["learning_rate"]
    ram = planned("gym:ALE/Pong-v5", {"obs_type": "ram"})
    assert all(getattr(ram, name) == getattr(general, name) for name in PICTURE_DEFAULTS)
