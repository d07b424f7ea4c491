"""Packages that register Gymnasium ids when they are imported (``--gym-package minigrid``).

Gymnasium 1.x loads no plugins by itself: MiniGrid, highway-env, ViZDoom, gymnasium-robotics
and the like register their ids as a side effect of ``import``. The user names them; lander
imports exactly those, in the trainer and in every game process (``--gym_package=NAME``
arguments), before an id is made. A name read from a bot file or a record made elsewhere
is never imported on its own: importing runs a package's code, and such a file may come
from anyone (the caller decides where names come from; this module only imports).

Imports only the standard library, so the game process stays light.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterable

from game_bridge.errors import LanderError

PACKAGE_ARGUMENT = "gym_package"
"""The game process's argument naming one package (``--gym_package=minigrid``, repeated
as ``--gym_package=a,b`` for several)."""
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
"""A module path (``minigrid``, ``shimmy.dm_control_compat``): no file path, no ``:``."""
_IMPORTED: list[str] = []


class GymPackageError(LanderError, ValueError):
    """A package name that is not a module path, not installed, or failed to import."""


def check_package_name(name: str) -> str:
    """``name`` if it is a module path.

    :raises GymPackageError: naming it and what a package name looks like.
    """
    if not _NAME.fullmatch(name):
        raise GymPackageError(
            f"--gym-package {name[:60]!r} is not a package name: give the module a user "
            "imports (minigrid, highway_env)"
        )
    return name


def pip_name(package: str) -> str:
    """The distribution most packages are published as: the top module, ``_`` as ``-``
    (``highway_env`` is ``pip install highway-env``)."""
    return package.split(".")[0].replace("_", "-")


def import_packages(names: Iterable[str]) -> None:
    """Import each package (once per process), so the ids it registers exist.

    :raises GymPackageError: a bad name, a package that is not installed (with what to
        ``pip install`` into ``.venv``), or one whose import failed (its own error's first
        line).
    """
    for name in names:
        check_package_name(name)
        if name in _IMPORTED:
            continue
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name is not None and name.split(".")[0] != exc.name.split(".")[0]:
                raise GymPackageError(
                    f"--gym-package {name}: it needs {exc.name}, which is not installed "
                    f"(.venv/bin/pip install {pip_name(exc.name)})"
                ) from None
            raise GymPackageError(
                f"--gym-package {name} is not installed: .venv/bin/pip install {pip_name(name)}"
            ) from None
        except Exception as exc:  # a package's import runs its own code: any error is its
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise GymPackageError(f"--gym-package {name}: importing it failed: {first}") from None
        _IMPORTED.append(name)


def imported_packages() -> tuple[str, ...]:
    """The packages this process imported through :func:`import_packages`, in order."""
    return tuple(_IMPORTED)


def package_arguments(names: Iterable[str]) -> list[str]:
    """The game process's arguments that import ``names`` before it makes its copies."""
    listed = [check_package_name(name) for name in names]
    return [f"--{PACKAGE_ARGUMENT}={','.join(listed)}"] if listed else []


def packages_of(value: str | None) -> list[str]:
    """The names a game process's :data:`PACKAGE_ARGUMENT` carries."""
    return [name for name in (value or "").split(",") if name]
