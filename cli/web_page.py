"""``lander play --web``: the page where a bot flies the lander after your cursor.

Plain static files (``game_bridge/lander_game/web/``: the game's physics and the bot
runner in JavaScript, no build step, no CDN) and one dynamic address, ``/bot``: the
bot the page flies, read from disk at every request. For a run that is training, that
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

from game_bridge import lander_game
from training.local_state import live_bot_path
from training.run_paths import RunPaths

WEB_DIR = Path(lander_game.__file__).resolve().parent / "web"
STATIC = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/index.html": ("index.html", "text/html; charset=utf-8"),
    "/physics.js": ("physics.js", "text/javascript; charset=utf-8"),
    "/bot.js": ("bot.js", "text/javascript; charset=utf-8"),
    "/page.js": ("page.js", "text/javascript; charset=utf-8"),
}
DEFAULT_WEB_PORT = 6010


def bot_source(root: Path, target: str) -> Callable[[], Path]:
    """Where ``/bot`` reads from: a bot file, or a run's live bot (its exported bot when it
    publishes none)."""
    as_file = Path(target)
    if as_file.suffix == ".json" or as_file.is_file():
        return lambda: as_file
    paths = RunPaths(root, target)
    live = live_bot_path(root, paths.run)
    return lambda: live if live.exists() else paths.bot_json


def _handler(source: Callable[[], Path]) -> type[BaseHTTPRequestHandler]:
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
            elif path in STATIC:
                name, kind = STATIC[path]
                self._reply((WEB_DIR / name).read_bytes(), kind)
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


def serve_page(root: Path, target: str, host: str, port: int) -> ThreadingHTTPServer:
    """Start serving the page in a background thread; the caller stops it with ``shutdown``.

    :raises OSError: the address cannot be bound.
    """
    server = ThreadingHTTPServer((host, port), _handler(bot_source(root, target)))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server
