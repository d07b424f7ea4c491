"""Any gymnasium environment served as an OpenEnv environment server (``lander serve``).

It speaks what the ``openenv`` package's server speaks (read from its
``core/env_server/http_server.py``): one environment per WebSocket session at ``/ws``,
messages ``{"type": "reset"|"step"|"state"|"close", "data": {...}}``, replies
``{"type": "observation", "data": {"observation": {...}, "reward", "done", "metadata"}}``,
``{"type": "state", ...}`` or ``{"type": "error", "data": {"message", "code"}}`` with the
package's codes, a session past ``max_sessions`` refused with ``CAPACITY_REACHED`` and
closed; and over HTTP ``GET /health``, ``/schema`` (the action, observation and state
models as JSON Schema) and ``/metadata``. So the package's own client (and lander's,
``--game-url``) plays it unchanged.

The models are the spaces': the action is one field ``action`` (a fixed-length array of
bounded numbers for a Box, a bounded integer for Discrete), the observation one field
``obs`` (a fixed-length array, flattened). OpenEnv has one ``done`` flag: a time limit's
end is ``done`` with ``metadata.truncated`` true. HTTP ``POST /reset`` and ``/step``
(which keep no episode in the package either) are not served: the server is websockets',
which reads GET requests only; episodes are played over ``/ws``. A request it does not
serve (another method, a line that is no HTTP) is answered 405 or 400 and closed, and
noted in one log line per peer and minute at most: a stranger cannot fill the log.

Strangers on the network (:mod:`game_bridge.local_names`): a request for a name that is
not this machine's (a page elsewhere rebinding its DNS here) is refused 421 before any
session opens; a connection must send its request within :data:`OPENING_DEADLINE_S`, and
past :data:`MAX_OPENING` such connections the oldest is closed, so idle sockets cannot
keep a person out.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces

from game_bridge.errors import LanderError
from game_bridge.local_names import LocalNames

EnvFactory = Callable[[], gymnasium.Env[Any, Any]]
REFUSALS_LOGGED_EVERY_S = 60.0
"""A peer's refused requests are noted once in this many seconds at most."""
OPENING_DEADLINE_S = 10.0
"""Seconds a connection may take to send its request (HTTP or a session's opening): an
idle or drip-fed one is closed after it."""
MAX_OPENING = 256
"""Connections still sending their request, at most; one more closes the oldest of them."""


class ServeError(LanderError, ValueError):
    """An environment that cannot be served (spaces with no OpenEnv model)."""


def _bounded(low: float, high: float, kind: str) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": kind}
    if math.isfinite(low):
        schema["minimum"] = low
    if math.isfinite(high):
        schema["maximum"] = high
    return schema


def _array(space: spaces.Box) -> dict[str, Any]:
    size = int(np.prod(space.shape))
    kind = "integer" if np.issubdtype(space.dtype, np.integer) else "number"
    low, high = float(np.min(space.low)), float(np.max(space.high))
    return {"type": "array", "items": _bounded(low, high, kind), "minItems": size, "maxItems": size}


def action_schema(space: spaces.Space[Any], title: str) -> dict[str, Any]:
    """The action model: one field ``action``.

    :raises ServeError: a space with no OpenEnv model here.
    """
    if isinstance(space, spaces.Box):
        action = _array(space)
    elif isinstance(space, spaces.Discrete):
        first = int(space.start)
        action = {"type": "integer", "minimum": first, "maximum": first + int(space.n) - 1}
    else:
        raise ServeError(f"cannot serve an action space {space}: Box or Discrete only")
    return {
        "title": f"{title}Action",
        "type": "object",
        "properties": {"action": action},
        "required": ["action"],
    }


def observation_schema(space: spaces.Space[Any], title: str) -> dict[str, Any]:
    """The observation model: ``obs`` and the protocol's ``done``, ``reward``, ``metadata``."""
    if not isinstance(space, spaces.Box):
        raise ServeError(f"cannot serve an observation space {space}: Box only")
    return {
        "title": f"{title}Observation",
        "type": "object",
        "properties": {
            "obs": _array(space),
            "done": {"type": "boolean", "default": False},
            "reward": {"anyOf": [{"type": "number"}, {"type": "null"}], "default": None},
            "metadata": {"type": "object", "additionalProperties": True},
        },
    }


STATE_SCHEMA = {
    "title": "State",
    "type": "object",
    "properties": {"episode_id": {"type": "string"}, "step_count": {"type": "integer"}},
}


def _error(message: str, code: str) -> str:
    return json.dumps({"type": "error", "data": {"message": message, "code": code}})


@dataclass
class _Session:
    """One session's environment and its episode."""

    env: gymnasium.Env[Any, Any]
    episode_id: str = ""
    step_count: int = 0
    over: bool = True


class OpenEnvServer:
    """Serve environments made by ``factory`` as an OpenEnv server.

    :param factory: makes one environment (one per session).
    :param name: the environment's name (``/metadata``, the models' titles).
    :param max_sessions: sessions at once; one more is refused with ``CAPACITY_REACHED``.
    """

    def __init__(
        self,
        factory: EnvFactory,
        name: str,
        max_sessions: int = 8,
        log: Callable[[str], None] = print,
    ) -> None:
        self.factory = factory
        self.name = name
        self.max_sessions = max_sessions
        self.log = log
        self._refusals: dict[str, float] = {}
        self._opening: dict[Any, float] = {}  # connection -> when it opened
        self.names = LocalNames("127.0.0.1")  # until serve() says where it serves
        probe = factory()
        try:
            title = name.title().replace("-", "").replace("_", "")
            self.action_space = probe.action_space
            self.observation_space = probe.observation_space
            self.schemas = {
                "action": action_schema(probe.action_space, title),
                "observation": observation_schema(probe.observation_space, title),
                "state": STATE_SCHEMA,
            }
        finally:
            probe.close()
        self.sessions = 0

    # -- HTTP ------------------------------------------------------------------

    def _http(self, connection: Any, request: Any) -> Any:
        """websockets' ``process_request``: answer the GET routes, let ``/ws`` through."""
        from websockets.datastructures import Headers
        from websockets.http11 import Response

        host = request.headers.get("Host")
        if not self.names.allows(host):
            why = self.names.refusal(host)
            self.refused(_peer(connection), why)
            text = why.encode()
            return Response(
                HTTPStatus.MISDIRECTED_REQUEST.value,
                HTTPStatus.MISDIRECTED_REQUEST.phrase,
                Headers([("Content-Type", "text/plain"), ("Content-Length", str(len(text)))]),
                text,
            )
        path = request.path.split("?", 1)[0]
        if path == "/ws":
            return None
        bodies: dict[str, Any] = {
            "/health": {"status": "healthy"},
            "/schema": self.schemas,
            "/metadata": {
                "name": self.name,
                "description": f"lander's bundled game {self.name!r}, served by lander serve",
            },
        }
        if path not in bodies:
            status, body = HTTPStatus.NOT_FOUND, {"detail": "Not Found"}
        else:
            status, body = HTTPStatus.OK, bodies[path]
        data = json.dumps(body).encode()
        headers = Headers(
            [("Content-Type", "application/json"), ("Content-Length", str(len(data)))]
        )
        return Response(status.value, status.phrase, headers, data)

    # -- WebSocket -----------------------------------------------------------------

    async def _session(self, connection: Any) -> None:
        """One client's environment, for as long as its connection lasts."""
        from websockets.exceptions import ConnectionClosed

        if self.sessions >= self.max_sessions:
            await connection.send(
                _error(
                    f"the server is at capacity ({self.sessions}/{self.max_sessions} sessions)",
                    "CAPACITY_REACHED",
                )
            )
            await connection.close()
            return
        self.sessions += 1
        session = _Session(self.factory())
        try:
            async for raw in connection:
                reply = self._answer(session, raw)
                if reply is None:
                    break
                await connection.send(reply)
        except ConnectionClosed:
            pass
        finally:
            self.sessions -= 1
            session.env.close()

    def _answer(self, session: _Session, raw: Any) -> str | None:
        """The reply to one message (None: the client closes the session)."""
        try:
            message = json.loads(raw)
        except (TypeError, ValueError) as exc:
            return _error(f"Invalid JSON: {exc}", "INVALID_JSON")
        except RecursionError:
            return _error("Invalid JSON: nested too deeply", "INVALID_JSON")
        if not isinstance(message, dict):
            return _error("a message is a JSON object", "INVALID_JSON")
        kind = message.get("type", "")
        data = message.get("data") or {}
        try:
            if kind == "reset":
                return self._reset(session, data)
            if kind == "step":
                return self._step(session, data)
            if kind == "state":
                state = {"episode_id": session.episode_id, "step_count": session.step_count}
                return json.dumps({"type": "state", "data": state})
            if kind == "close":
                return None
        except _Invalid as exc:
            return _error(str(exc), "VALIDATION_ERROR")
        except Exception as exc:  # the package answers any failure of the environment so
            return _error(str(exc), "EXECUTION_ERROR")
        return _error(f"Unknown message type: {kind}", "UNKNOWN_TYPE")

    def _reset(self, session: _Session, data: dict[str, Any]) -> str:
        seed = data.get("seed") if isinstance(data, dict) else None
        if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool) or seed < 0):
            raise _Invalid(f"seed must be a whole number of 0 or more, got {seed!r}")
        obs, _ = session.env.reset(seed=seed)
        session.episode_id = str(data.get("episode_id") or uuid.uuid4())
        session.step_count = 0
        session.over = False
        return self._observation(obs, None, False, {})

    def _step(self, session: _Session, data: dict[str, Any]) -> str:
        if session.over:
            raise RuntimeError("the episode is over: send reset first")
        action = self._action(data)
        obs, reward, terminated, truncated, info = session.env.step(action)
        session.step_count += 1
        done = bool(terminated or truncated)
        session.over = done
        metadata: dict[str, Any] = {"truncated": bool(truncated and not terminated)}
        if "is_success" in info:
            metadata["is_success"] = bool(info["is_success"])
        return self._observation(obs, float(reward), done, metadata)

    def _action(self, data: dict[str, Any]) -> Any:
        """The action field as the environment takes it, checked against its schema."""
        if not isinstance(data, dict) or "action" not in data:
            raise _Invalid("the action has one field, 'action'")
        value = data["action"]
        space = self.action_space
        if isinstance(space, spaces.Discrete):
            first = int(space.start)
            if (
                not isinstance(value, int)
                or isinstance(value, bool)
                or not (first <= value < first + int(space.n))
            ):
                raise _Invalid(f"action must be an integer from {first} to {first + space.n - 1}")
            return value
        assert isinstance(space, spaces.Box)
        size = int(np.prod(space.shape))
        if (
            not isinstance(value, list)
            or len(value) != size
            or not all(
                isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
                for v in value
            )
        ):
            raise _Invalid(f"action must be a list of {size} finite numbers")
        array = np.asarray(value, dtype=space.dtype).reshape(space.shape)
        if not space.contains(array):
            raise _Invalid(f"action {value} is outside its bounds")
        return array

    @staticmethod
    def _observation(obs: Any, reward: float | None, done: bool, metadata: dict[str, Any]) -> str:
        values = np.asarray(obs).reshape(-1).tolist()
        return json.dumps(
            {
                "type": "observation",
                "data": {
                    "observation": {"obs": values},
                    "reward": reward,
                    "done": done,
                    "metadata": metadata,
                },
            }
        )

    def opened(self, connection: Any) -> None:
        """Count a new connection among those sending their request; past
        :data:`MAX_OPENING`, close the one that has waited longest (an idle or drip-fed
        socket), so a person's request always gets in."""
        while len(self._opening) >= MAX_OPENING:
            oldest = min(self._opening, key=self._opening.__getitem__)
            del self._opening[oldest]
            oldest.transport.abort()
        self._opening[connection] = time.monotonic()

    def done_opening(self, connection: Any) -> None:
        """The connection sent its request (or left)."""
        self._opening.pop(connection, None)

    def refused(self, peer: str, why: str) -> None:
        """Note a refused request: once per peer and :data:`REFUSALS_LOGGED_EVERY_S`."""
        now = time.monotonic()
        if now - self._refusals.get(peer, -math.inf) < REFUSALS_LOGGED_EVERY_S:
            return
        if len(self._refusals) > 4096:  # many peers: forget the oldest notes
            self._refusals.clear()
        self._refusals[peer] = now
        self.log(f"refused a request from {peer}: {why} (more from it this minute unlogged)")

    async def serve(self, host: str, port: int, ready: Callable[[], None] | None = None) -> None:
        """Serve until cancelled; ``ready`` is called once the port listens."""
        from websockets.asyncio.server import serve

        self.names = LocalNames(host)
        async with serve(
            self._session,
            host,
            port,
            process_request=self._http,
            max_size=2**24,
            open_timeout=OPENING_DEADLINE_S,
            create_connection=_refusing_connection(self),
        ):
            if ready is not None:
                ready()
            await asyncio.Future()


def _refusing_connection(server: OpenEnvServer) -> Any:
    """websockets' connection class, answering a request that is no GET (a POST, a HEAD, a
    line that is no HTTP) with 405 or 400 before websockets parses it, and noting any
    failed handshake in one rate-limited line, where websockets would log a traceback for
    each and close without a word."""
    from websockets.asyncio.server import ServerConnection

    class RefusingConnection(ServerConnection):
        _head = b""
        _checked = False
        _refused = False

        def connection_made(self, transport: Any) -> None:
            server.opened(self)
            super().connection_made(transport)

        def connection_lost(self, exc: Exception | None) -> None:
            server.done_opening(self)
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            if not self._checked:
                self._head += data
                if len(self._head) < 4 and b"\n" not in self._head:
                    return  # the method's first bytes are still on their way
                self._checked, data, self._head = True, self._head, b""
                if not data.startswith(b"GET "):
                    self._refuse(data)
                    return
            super().data_received(data)

        def _refuse(self, data: bytes) -> None:
            method = data.split(b" ", 1)[0][:16]
            is_method = method.isalpha() and method.isupper()
            status = HTTPStatus.METHOD_NOT_ALLOWED if is_method else HTTPStatus.BAD_REQUEST
            allow = "Allow: GET\r\n" if is_method else ""
            self.transport.write(
                f"HTTP/1.1 {status.value} {status.phrase}\r\n{allow}Content-Length: 0\r\n"
                "Connection: close\r\n\r\n".encode()
            )
            self.transport.close()  # after the answer is written (abort would drop it)
            self._refused = True
            shown = method.decode() if is_method else "a request that is no HTTP"
            server.refused(_peer(self), f"{shown} (only GET and WebSocket sessions are served)")

        async def handshake(self, *args: Any, **kwargs: Any) -> None:
            try:
                await super().handshake(*args, **kwargs)
            except Exception as exc:
                if not self._refused:
                    cause = str(exc.__cause__ or exc).splitlines()
                    server.refused(_peer(self), cause[0][:200] if cause else type(exc).__name__)
            finally:
                server.done_opening(self)

    return RefusingConnection


def _peer(connection: Any) -> str:
    """The address a connection comes from."""
    address = connection.transport.get_extra_info("peername") if connection.transport else None
    return str(address[0]) if address else "?"


class _Invalid(ValueError):
    """A message that does not fit the schema (the package's ``VALIDATION_ERROR``)."""
