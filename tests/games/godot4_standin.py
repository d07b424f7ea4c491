"""A stand-in for a Godot 4 engine (no Godot 4 is on the registries here): it records
every command line it is given, holds it to Godot 4's documented command line, and acts
as the engine would where lander needs it to.

- ``--version`` prints a Godot 4.3 version line.
- ``--headless --path DIR --import`` makes the project's ``.godot/`` cache.
- ``--headless --path DIR --export-release|--export-pack PRESET FILE`` writes FILE: a pack,
  or a whole game that runs as the engine on it would (a preset named ``broken`` fails with
  an engine-style ``ERROR:`` line).
- ``--headless --path DIR [--scene res://...]`` or ``--headless --main-pack FILE`` runs
  the bundled lander game with the plugin's ``--key=value`` arguments, as a Godot game
  with the plugin would.

A command line Godot 4 would not take the same way (Godot 3's ``--no-window``,
``--export``, a positional scene; an export or import without ``--headless``) exits 2 with
the reason, so the test that launches it fails. Every call is one JSON line in
``$STANDIN_LOG``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

VERSION = "4.3.stable.official.77dcf97d8"
ENGINE_FLAGS_WITH_VALUE = {"--path", "--scene", "--main-pack", "--export-release",
                           "--export-pack", "--export-debug"}  # fmt: skip
GODOT3_ONLY = {"--no-window", "--export"}


def refuse(reason: str) -> None:
    print(f"godot4 stand-in: {reason}", file=sys.stderr)
    sys.exit(2)


def main(argv: list[str]) -> None:
    log = os.environ.get("STANDIN_LOG")
    if log:
        with open(log, "a") as out:
            out.write(json.dumps(argv) + "\n")
    if argv == ["--version"]:
        print(VERSION)
        return
    for flag in GODOT3_ONLY:
        if flag in argv:
            refuse(f"{flag} is Godot 3's; Godot 4 has no such option")
    if "--headless" not in argv:
        refuse("no --headless: Godot 4 would open a window")
    values: dict[str, list[str]] = {}
    plugin: list[str] = []
    switches: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg in ("--export-release", "--export-pack", "--export-debug"):
            values[arg] = argv[i + 1 : i + 3]
            i += 3
            continue
        if arg in ENGINE_FLAGS_WITH_VALUE:
            values[arg] = argv[i + 1 : i + 2]
            i += 2
            continue
        if arg.startswith("--") and "=" in arg:
            plugin.append(arg)
        elif arg.startswith("-"):
            switches.append(arg)
        else:
            refuse(f"a positional argument {arg!r}: Godot 4 takes the scene with --scene")
        i += 1
    project = Path(values["--path"][0]) if "--path" in values else None
    if project is not None and not (project / "project.godot").is_file():
        refuse(f"--path {project} has no project.godot")
    if "--import" in switches:
        if project is None:
            refuse("--import without --path")
        (project / ".godot").mkdir(exist_ok=True)
        (project / ".godot" / "imported.txt").write_text("imported\n")
        return
    for flag in ("--export-release", "--export-pack"):
        if flag in values:
            preset, output = values[flag]
            if project is None:
                refuse(f"{flag} without --path")
            if preset == "broken":
                print(f'ERROR: Cannot export project with preset "{preset}" due to '
                      "configuration errors: the stand-in refuses it.", file=sys.stderr)  # fmt: skip
                sys.exit(1)
            if flag == "--export-pack":
                Path(output).write_text(json.dumps({"project": str(project), "preset": preset}))
                return
            # A whole game: an executable that runs as this engine on its own pack would.
            me = Path(__file__).resolve()
            Path(output).write_text(
                f"#!/bin/sh\nexec '{sys.executable}' '{me}' --main-pack \"$0\" \"$@\"\n"
            )
            Path(output).chmod(0o755)
            return
    scene = values.get("--scene", [None])[0]
    if scene is not None and not scene.startswith("res://"):
        refuse(f"--scene {scene}: a scene is a res:// path")
    if project is None and "--main-pack" not in values:
        refuse("nothing to run: no --path and no --main-pack")
    os.execv(sys.executable, [sys.executable, "-m", "games.lander", *plugin])


if __name__ == "__main__":
    main(sys.argv[1:])
