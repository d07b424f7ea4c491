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

from games.spec import GameEntry
from training.local_state import live_bot_path
from training.run_paths import RunPaths

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


def _handler(source: Callable[[], Path], static: dict[str, Path]) -> type[BaseHTTPRequestHandler]:
    class PageHandler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = urlparse(self.path).path
            if path == "/bot":
                try:
                    body = source().read_bytes()
                except OSError:
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
    root: Path, target: str, host: str, port: int, game: GameEntry
) -> ThreadingHTTPServer:
    """Start serving ``game``'s page in a background thread; the caller stops it with
    ``shutdown``.

    :raises OSError: the address cannot be bound.
    """
    handler = _handler(bot_source(root, target), static_files(game))
    server = ThreadingHTTPServer((host, port), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server
