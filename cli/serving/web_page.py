"""``lander play --web``: the page where a bot plays its game after your cursor.

Plain static files (the game's ``web_files``, ``games/lander/web/`` for the lander: the
game's physics and the bot runner in JavaScript, no build step, no CDN) and one dynamic
address, ``/bot``: the bot the page flies, read from disk at every request. For a run that is training, that
is the bot it publishes every ``--publish-every`` steps (``.lander/live/RUN.json``),
so the page switches to each new one without a reload.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlparse

from game_bridge.bot_runner import MAX_BOT_BYTES
from game_bridge.file_input import read_bounded
from games.spec import GameEntry
from training.demos.files import MAX_DEMO_BYTES, DemoError, load_demos
from training.runs.local_state import live_bot_path
from training.runs.run_paths import RunPaths
from training.runs.run_record import write_bytes_atomic

_KINDS = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
}


def static_files(game: GameEntry) -> dict[str, Path]:
    """The page's addresses and their files: ``/`` is the first of the game's web files."""
    if not game.web_files:
        return {}
    return {"/": game.web_files[0], **{f"/{path.name}": path for path in game.web_files}}


def bot_source(root: Path, target: str) -> Callable[[], Path]:
    """Where ``/bot`` reads from: a bot file, or a run's live bot (its exported bot when it
    publishes none)."""
    as_file = Path(target)
    if as_file.suffix == ".json" or as_file.is_file():
        return lambda: as_file
    paths = RunPaths(root, target)
    live = live_bot_path(root, paths.run)
    return lambda: live if live.exists() else paths.bot_json


def save_demo(body: bytes, destination: Path) -> str:
    """Keep a demo file the page recorded (a person flying with the keyboard) at
    ``destination``, if it is one: checked as ``lander train --demos`` would read it,
    then renamed into place, so a bad upload never replaces a good file.

    :raises DemoError: the body is not a sound lander demo file.
    """
    temporary = destination.with_name(f".{destination.name}.upload")
    write_bytes_atomic(temporary, body)
    try:
        load_demos(temporary)
        temporary.replace(destination)
    finally:
        temporary.unlink(missing_ok=True)
    return str(destination)


def _handler(
    source: Callable[[], Path], static: dict[str, Path], record_demo: Path | None
) -> type[BaseHTTPRequestHandler]:
    class PageHandler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            if urlparse(self.path).path != "/demo" or record_demo is None:
                self.send_error(404, "this page saves no demos (play --web --record-demo FILE)")
                return
            try:
                length = int(self.headers.get("Content-Length") or 0)
            except ValueError:
                length = 0  # not a number: no demo this handler reads
            if not 0 < length <= MAX_DEMO_BYTES:
                self.send_error(413, "no demo, or one too large")
                return
            try:
                saved = save_demo(self.rfile.read(length), record_demo)
            except DemoError as exc:
                self.send_error(400, str(exc)[:300])
                return
            self._reply(saved.encode(), "text/plain; charset=utf-8")

        def do_GET(self) -> None:
            path = urlparse(self.path).path
            if path == "/bot":
                try:
                    body = read_bounded(source(), MAX_BOT_BYTES)
                except OSError:  # none yet, or no regular file (a link to /dev/zero)
                    self.send_error(404, "no bot yet")
                    return
                self._reply(body, "application/json")
            elif path in static:
                file = static[path]
                self._reply(file.read_bytes(), _KINDS.get(file.suffix, "application/octet-stream"))
            else:
                self.send_error(404)

        def _reply(self, body: bytes, kind: str) -> None:
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass  # a request a second from every open page: not worth a line each

    return PageHandler


def serve_page(
    root: Path,
    target: str,
    host: str,
    port: int,
    game: GameEntry,
    record_demo: Path | None = None,
) -> ThreadingHTTPServer:
    """Start serving ``game``'s page in a background thread; the caller stops it with
    ``shutdown``.

    :param record_demo: where the demos a person records on the page are saved (``POST
        /demo``; None: the page only offers them as a download).
    :raises OSError: the address cannot be bound.
    """
    handler = _handler(bot_source(root, target), static_files(game), record_demo)
    server = ThreadingHTTPServer((host, port), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server
