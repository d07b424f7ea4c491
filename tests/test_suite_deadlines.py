"""Every deadline a test sets lies inside the suite's own: on a busy machine a test's
subprocess may take long, and the one that must give up first is the test's own
deadline (which says what it waited for), never pytest's timeout killing it midway.

Read from the tests' source: each ``timeout=N`` and each ``wait_until(..., N, ...)``
in a test (or in a helper, against the global limit) must be below the limit that
applies to it (its ``@pytest.mark.timeout`` or the suite's in ``pyproject.toml``).
"""

from __future__ import annotations

import ast
import tomllib

from tests.conftest import REPO_ROOT, TESTS_DIR

MARGIN_S = 60
"""What a test needs beyond its longest single wait: its set-up and the steps around it."""


def _suite_limit() -> float:
    config = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    return float(config["tool"]["pytest"]["ini_options"]["timeout"])


def _mark_limit(function: ast.FunctionDef) -> float | None:
    for decorator in function.decorator_list:
        if (
            isinstance(decorator, ast.Call)
            and ast.unparse(decorator.func) == "pytest.mark.timeout"
            and decorator.args
            and isinstance(decorator.args[0], ast.Constant)
        ):
            return float(decorator.args[0].value)
    return None


def _deadlines(node: ast.AST) -> list[tuple[int, float]]:
    """(line, seconds) of each literal deadline set under ``node``."""
    found = []
    for call in ast.walk(node):
        if not isinstance(call, ast.Call):
            continue
        for keyword in call.keywords:
            value = keyword.value
            literal = isinstance(value, ast.Constant) and isinstance(value.value, int | float)
            if keyword.arg == "timeout" and literal:
                found.append((call.lineno, float(value.value)))  # type: ignore[attr-defined]
        name = ast.unparse(call.func)
        if name == "wait_until" and len(call.args) >= 2 and isinstance(call.args[1], ast.Constant):
            found.append((call.lineno, float(call.args[1].value)))
    if isinstance(node, ast.FunctionDef):
        defaults = node.args.defaults + [d for d in node.args.kw_defaults if d is not None]
        names = (
            [a.arg for a in node.args.args[-len(node.args.defaults) :]]
            if node.args.defaults
            else []
        )
        names += [
            a.arg for a, d in zip(node.args.kwonlyargs, node.args.kw_defaults, strict=True) if d
        ]
        for arg, default in zip(names, defaults, strict=False):
            if "timeout" in arg and isinstance(default, ast.Constant):
                found.append((node.lineno, float(default.value)))
    return found


def test_every_deadline_in_the_tests_is_inside_the_suite_timeout() -> None:
    suite = _suite_limit()
    too_long = []
    for path in sorted(TESTS_DIR.glob("*.py")):
        tree = ast.parse(path.read_text())
        # Top-level functions: a function nested in a test is held to that test's limit.
        for function in [n for n in tree.body if isinstance(n, ast.FunctionDef)]:
            limit = _mark_limit(function) or suite
            if not function.name.startswith("test_"):
                limit = suite  # a helper may be called from any test
            for line, seconds in _deadlines(function):
                if seconds > limit - MARGIN_S:
                    too_long.append(f"{path.name}:{line}: {seconds:g} s within a {limit:g} s limit")
    assert not too_long, "deadlines that pytest's timeout would cut: " + "; ".join(too_long)
