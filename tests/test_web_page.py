"""The live page in a real browser: Debian's chromium, headless, driven by Playwright
through its executable path. The page's physics and bot runner are checked against the
Python ones, then the bot flies after a synthetic cursor and is swapped live."""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from game_bridge.bot_runner import BotRunner
from games.lander.physics import LanderPhysics
from tests.conftest import lander, lander_server, wait_until
from training.runs.local_state import live_bot_path
from training.runs.run_record import write_bytes_atomic, write_json_atomic

sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed")
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
pytestmark = pytest.mark.skipif(
    not Path(CHROMIUM).exists(), reason="no chromium (apt-get install chromium)"
)
CHROMIUM_FLAGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        yield launched
        launched.close()


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A checkout with a trained run, ``web``, whose bot flies well enough to follow a cursor."""
    folder = tmp_path_factory.mktemp("web")
    trained = lander(
        folder, "train", "web", "--in-process", "--timesteps", "120000", "--no-git",
        "--publish-every", "0",
    )  # fmt: skip
    assert trained.returncode == 0, trained.stdout + trained.stderr
    return folder


@pytest.fixture(scope="module")
def page_url(home: Path) -> Iterator[str]:
    """``lander play --web web`` serving the page on loopback."""
    with serving(home, "web") as url:
        yield url


@contextmanager
def serving(home: Path, target: str, *extra: str) -> Iterator[str]:
    """``lander play --web TARGET`` in ``home``, serving on a free loopback port."""
    with lander_server(home, "play", "--web", target, *extra) as (port, _):
        yield f"http://127.0.0.1:{port}/"


def _trajectory(steps: int = 420) -> dict[str, Any]:
    """Python physics with random actions (some beyond [-1, 1]): what the page must replay."""
    physics = LanderPhysics(3, seed=11)
    rng = np.random.default_rng(3)

    def state() -> list[list[float]]:
        return [
            [*physics.pos[i], *physics.vel[i], *physics.target[i], float(physics.target_timer[i]),
             float(physics.ticks[i])]
            for i in range(3)
        ]  # fmt: skip

    record: dict[str, Any] = {"initial": state(), "steps": []}
    for _ in range(steps):
        # Agent 0 flails (beyond [-1, 1] too) and crashes; the others hover and live on
        # to the time limit.
        actions = np.vstack([rng.uniform(-1.3, 1.3, (1, 2)), rng.uniform(-0.2, 0.2, (2, 2))])
        result = physics.step(actions)
        entry = {
            "actions": actions.tolist(), "obs": result.obs.tolist(),
            "reward": result.reward.tolist(), "terminated": result.terminated.tolist(),
            "truncated": result.truncated.tolist(), "targets": physics.target.tolist(),
        }  # fmt: skip
        done = result.terminated | result.truncated
        if done.any():
            physics.reset_agents(done)
            entry["resets"] = {str(i): state()[i] for i in np.flatnonzero(done)}
        record["steps"].append(entry)
    return record


REPLAY = """(record) => {
  const targets = [];
  const world = new LanderWorld(3, { newTarget: (i) => targets[i] || { x: 10, y: 7 } });
  const load = (i, s) => Object.assign(world.agents[i],
    { px: s[0], py: s[1], vx: s[2], vy: s[3], tx: s[4], ty: s[5], timer: s[6], ticks: s[7] });
  record.initial.forEach((s, i) => load(i, s));
  return record.steps.map((entry) => {
    entry.targets.forEach((t, i) => { targets[i] = { x: t[0], y: t[1] }; });
    const out = entry.actions.map((action, i) => world.step(i, action));
    Object.entries(entry.resets || {}).forEach(([i, s]) => load(Number(i), s));
    return out;
  });
}"""


def test_the_pages_physics_and_bot_are_the_pythons(browser: Any, page_url: str, home: Path) -> None:
    page = browser.new_page()
    page.goto(page_url)
    record = _trajectory()
    replayed = page.evaluate(REPLAY, record)
    worst = 0.0
    crashes = truncations = 0
    for entry, steps in zip(record["steps"], replayed, strict=True):
        for i, step in enumerate(steps):
            worst = max(worst, float(np.max(np.abs(np.array(step["obs"]) - entry["obs"][i]))))
            worst = max(worst, abs(step["reward"] - entry["reward"][i]))
            assert step["terminated"] == entry["terminated"][i]
            assert step["truncated"] == entry["truncated"][i]
            crashes += entry["terminated"][i]
            truncations += entry["truncated"][i]
    assert worst <= 1e-5 and crashes > 0 and truncations > 0
    bot_path = home / "bots" / "web.json"
    observations = np.random.default_rng(0).uniform(-1, 1, (500, 7))
    in_page = page.evaluate(
        "([spec, obs]) => { const bot = new Bot(spec); return obs.map((o) => bot.act(o)); }",
        [json.loads(bot_path.read_text()), observations.tolist()],
    )
    assert np.abs(np.array(in_page) - BotRunner.from_file(bot_path).act(observations)).max() <= 1e-5
    page.close()


def _canvas_point(page: Any, x_m: float, y_m: float) -> tuple[float, float]:
    box = page.locator("#arena").bounding_box()
    return box["x"] + x_m / 20.0 * box["width"], box["y"] + (1 - y_m / 15.0) * box["height"]


def _distances(page: Any) -> list[float]:
    state = page.evaluate("window.lander")
    target = state["target"]
    return [float(np.hypot(p["x"] - target["x"], p["y"] - target["y"])) for p in state["landers"]]


def test_the_bot_follows_the_cursor_and_is_swapped_live(
    browser: Any, page_url: str, home: Path, tmp_path: Path
) -> None:
    page = browser.new_page(viewport={"width": 900, "height": 700})
    page.goto(page_url + "?speed=8&agents=3")
    wait_until(lambda: page.evaluate("window.lander.botVersion") >= 1, 10, "the bot to load")
    first = page.evaluate("window.lander")
    assert first["botRun"] == "web" and first["botSteps"] > 100000 and first["error"] == ""
    page.mouse.move(*_canvas_point(page, 6.0, 9.0))
    wait_until(
        lambda: _distances(page) and max(_distances(page)) < 1.5, 15, "every lander near the cursor"
    )
    target = page.evaluate("window.lander.target")
    assert abs(target["x"] - 6.0) < 0.1 and abs(target["y"] - 9.0) < 0.1
    page.mouse.move(*_canvas_point(page, 14.0, 5.0))  # moving the cursor moves the target
    wait_until(
        lambda: abs(page.evaluate("window.lander.target")["x"] - 14.0) < 0.1,
        5,
        "the target to move",
    )
    wait_until(lambda: max(_distances(page)) < 1.5, 15, "the landers to follow")
    screenshot = tmp_path / "page.png"
    page.screenshot(path=str(screenshot))
    shutil.copy(
        screenshot, Path(os.environ.get("LANDER_TEST_ARTIFACTS", tmp_path)) / "web-page.png"
    )
    assert screenshot.stat().st_size > 5000

    # A bot published mid-run is flown within 5 s, without a reload.
    live = live_bot_path(home, "web")
    spec = json.loads((home / "bots" / "web.json").read_text())
    spec["timesteps"] = first["botSteps"] + 4096
    write_json_atomic(live, spec)
    started = time.monotonic()
    wait_until(
        lambda: page.evaluate("window.lander.botSteps") == spec["timesteps"], 5, "the new bot"
    )
    assert time.monotonic() - started < 5.0
    version = page.evaluate("window.lander.botVersion")

    # A malformed bot: an error on the page, and the previous bot keeps flying.
    write_bytes_atomic(live, b'{"format": "lander-bot", "version": 1, "layers": [')
    wait_until(lambda: "not JSON" in page.evaluate("window.lander.error"), 5, "the error shown")
    assert "still flying the previous bot" in page.locator("#error").inner_text()
    before = page.evaluate("window.lander.steps")
    wait_until(lambda: page.evaluate("window.lander.steps") > before + 20, 5, "the game to go on")
    assert page.evaluate("window.lander.botVersion") == version
    assert page.evaluate("window.lander.botSteps") == spec["timesteps"]

    # Another bot file chosen on the page flies instead.
    chosen = tmp_path / "other.json"
    chosen.write_text(json.dumps({**spec, "run": "chosen", "timesteps": 1}))
    page.set_input_files("#file", str(chosen))
    wait_until(lambda: page.evaluate("window.lander.botRun") == "chosen", 5, "the chosen bot")
    assert page.locator("#run").inner_text() == "chosen"
    page.close()


def test_a_person_flies_blue_against_the_bot_on_the_duel_page(browser: Any, tmp_path: Path) -> None:
    """The duel's page: the bot flies red, the arrow keys fly blue, and rounds are scored."""
    trained = lander(
        tmp_path, "train", "duel1", "--game", "duel", "--in-process", "--timesteps", "2048",
        "--n-steps", "256", "--batch-size", "256", "--no-git", "--publish-every", "0",
    )  # fmt: skip
    assert trained.returncode == 0, trained.stdout + trained.stderr
    with serving(tmp_path, str(tmp_path / "bots" / "duel1.json")) as url:
        page = browser.new_page(viewport={"width": 900, "height": 700})
        page.goto(url + "?speed=4")
        wait_until(lambda: page.evaluate("window.duel.botVersion") >= 1, 10, "the bot to load")
        assert page.evaluate("window.duel.botRun") == "duel1"
        assert page.evaluate("window.duel.error") == ""
        wait_until(lambda: len(page.evaluate("window.duel.landers")) == 2, 5, "both landers")
        low = page.evaluate("window.duel.landers[1].y")
        page.keyboard.down("ArrowUp")  # the main engine at full: blue climbs, then hits the roof
        wait_until(
            lambda: page.evaluate("window.duel.landers[1].y") > low + 1.0, 5, "blue to climb"
        )
        assert "ArrowUp" in page.evaluate("window.duel.keys")
        wait_until(lambda: page.evaluate("window.duel.rounds") >= 1, 20, "a round to end")
        page.keyboard.up("ArrowUp")
        tally = page.evaluate("window.duel.tally")
        assert sum(tally.values()) == page.evaluate("window.duel.rounds") and tally["bot"] >= 1
        assert page.locator("#botWins").inner_text() == str(tally["bot"])
        page.close()


def _steps_pass(page: Any, count: int) -> None:
    """Wait until the page has stepped its world ``count`` more times."""
    until = page.evaluate("window.lander.steps") + count
    wait_until(lambda: page.evaluate("window.lander.steps") >= until, 10, "the page's steps")


def test_a_person_flying_with_the_keyboard_records_demos_that_train_a_run(
    browser: Any, home: Path, tmp_path: Path
) -> None:
    saved = tmp_path / "keyboard.json"
    with serving(home, "web", "--record-demo", str(saved)) as url:
        page = browser.new_page(accept_downloads=True)
        page.goto(url + "?speed=20")
        wait_until(lambda: page.evaluate("window.lander.steps") > 5, 30, "the page to run")
        page.keyboard.press("k")
        assert page.evaluate("window.lander.flying") is True
        deadline = time.monotonic() + 60
        while page.evaluate("window.lander.demoEpisodes") < 3:
            assert time.monotonic() < deadline, "three episodes flown by hand"
            # Climb, drift, let go: a person's uneven flying (a crash ends an episode too).
            # Each phase lasts a few of the page's steps, not a fixed time: a loaded machine
            # draws frames seldom, and a sleep could then see only the climbs.
            for key, steps in (("ArrowUp", 30), ("ArrowRight", 20), ("ArrowLeft", 20), ("", 20)):
                if key:
                    page.keyboard.down(key)
                _steps_pass(page, steps)
                if key:
                    page.keyboard.up(key)
        with page.expect_download() as download:
            page.click("#save")
        downloaded = tmp_path / "downloaded.json"
        download.value.save_as(downloaded)
        wait_until(saved.exists, 10, "the server to save the demos")
        page.close()
    document = json.loads(downloaded.read_text())
    assert document["recorded_by"] == "keyboard" and len(document["episodes"]) >= 3
    actions = np.concatenate([np.asarray(e["actions"]) for e in document["episodes"]])
    assert {1.0, 0.0} <= set(actions[:, 0].tolist()), "the main engine fired and rested"
    assert json.loads(saved.read_text())["episodes"] == document["episodes"]
    trained = lander(
        tmp_path, "train", "byhand", "--no-git", "--in-process", "--timesteps", "1024",
        "--demos", str(saved),
    )  # fmt: skip
    assert trained.returncode == 0, trained.stdout + trained.stderr
    assert "behaviour cloning:" in trained.stdout


def test_the_page_flies_a_bot_with_memory_keeping_each_landers_state(
    browser: Any, tmp_path: Path
) -> None:
    """A bot with memory: the page's runner keeps each lander's state as the numpy runner
    does (reset where that lander's episode starts), and the page flies it."""
    from game_bridge.frame_stack import start_episodes
    from tests.memory_bots import export_memory_bot

    (tmp_path / "bots").mkdir()
    bot_path = export_memory_bot(tmp_path / "bots")
    spec = json.loads(bot_path.read_text())
    rng = np.random.default_rng(5)
    observations = rng.uniform(-1, 1, (120, 3, 7))
    starts = rng.random((120, 3)) < 0.05
    starts[0] = True
    player = BotRunner.from_file(bot_path).policy()
    expected = []
    for obs, started in zip(observations, starts, strict=True):
        start_episodes(player, started)
        expected.append(player(obs))
    with serving(tmp_path, str(bot_path)) as url:
        page = browser.new_page()
        page.goto(url + "?speed=8&agents=3")
        in_page = page.evaluate(
            """([spec, steps, starts]) => {
              const bot = new Bot(spec);
              return steps.map((obs, t) => obs.map((o, i) => {
                if (starts[t][i]) bot.startEpisode(i);
                return bot.act(o, i);
              }));
            }""",
            [spec, observations.tolist(), starts.tolist()],
        )
        assert np.abs(np.array(in_page) - np.array(expected)).max() <= 1e-5
        wait_until(lambda: page.evaluate("window.lander.botVersion") >= 1, 10, "the bot to load")
        assert page.evaluate("window.lander.botMemory") == 6
        assert page.evaluate("window.lander.error") == ""
        first = page.evaluate("window.lander.landers")
        wait_until(
            lambda: page.evaluate("window.lander.episodesStarted") >= 1, 30, "an episode to end"
        )
        moved = page.evaluate("window.lander.landers")
        assert any(
            abs(a["x"] - b["x"]) + abs(a["y"] - b["y"]) > 0.1
            for a, b in zip(first, moved, strict=True)
        )
        page.close()
