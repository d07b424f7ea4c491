"""A game instance over the OpenEnv transport: one WebSocket session (``/ws``) of an
OpenEnv environment server, spoken to as if it were a one-agent game of PROTOCOL.md.

The VecEnv sends this instance the protocol's messages and reads the protocol's
replies; here they become OpenEnv's (``{"type": "reset", "data": {}}``, ``{"type":
"step", "data": {fields}}``) and back. What the protocol has and OpenEnv lacks is made
here: ``env_info`` from the server's ``/schema`` (:mod:`game_bridge.openenv_schema`),
the game resetting a finished agent itself (a ``reset`` sent after ``done``, the last
observation kept as ``terminal_observation``), and a time limit (``max_episode_steps``:
OpenEnv has one ``done`` flag, so an episode lander ends is ``TimeLimit.truncated``).

Faults are the bridge's: a closed connection or a server that cannot be reached is
:class:`InstanceDied`, no reply in time :class:`InstanceTimeout`, an error frame
(``CAPACITY_REACHED`` and every other code) :class:`ServerRefused`, a reply that is not
what the schema says :class:`ProtocolViolation`; the VecEnv restarts the instance (a
new session) as it restarts a game.
"""

from __future__ import annotations

import contextlib
import json
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import deque
from pathlib import Path
from typing import Any

from game_bridge import protocol
from game_bridge.errors import BridgeError, InstanceDied, ProtocolViolation
from game_bridge.instance import POLL_SLICE_S, GameInstance
from game_bridge.openenv_schema import OpenEnvSpaces, SchemaError, finite_number, spaces_of

SCHEMA_TIMEOUT_S = 10.0
"""Seconds the server's ``/schema`` may take to answer."""


class ServerRefused(BridgeError):
    """An OpenEnv server answered with an error frame (its code and message)."""


_SPACE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")


def server_url(given: str) -> str:
    """The base URL of a server given as a URL or as a Hugging Face Space id
    (``OWNER/NAME``, served at ``https://owner-name.hf.space``: the Hub lowercases the id
    and turns every other character into ``-``).

    :raises ValueError: neither.
    """
    if given.startswith(("http://", "https://", "ws://", "wss://")):
        return given.rstrip("/")
    if _SPACE_ID.match(given):
        return f"https://{re.sub(r'[^a-z0-9]', '-', given.lower())}.hf.space"
    raise ValueError(
        f"an OpenEnv server is an http(s):// or ws(s):// URL or a Space id OWNER/NAME, not {given!r}"
    )


def websocket_url(base: str) -> str:
    """The ``/ws`` address of a server given by its HTTP(S) or WS(S) base URL."""
    parts = urllib.parse.urlsplit(base.rstrip("/"))
    scheme = {"http": "ws", "https": "wss"}.get(parts.scheme, parts.scheme)
    return urllib.parse.urlunsplit((scheme, parts.netloc, parts.path + "/ws", "", ""))


def http_url(base: str, route: str) -> str:
    """An HTTP route of a server given by its base URL."""
    parts = urllib.parse.urlsplit(base.rstrip("/"))
    scheme = {"ws": "http", "wss": "https"}.get(parts.scheme, parts.scheme)
    return urllib.parse.urlunsplit((scheme, parts.netloc, parts.path + route, "", ""))


MAX_SCHEMA_BYTES = 4 * 2**20
"""A ``/schema`` answer larger than this is a fault (a schema is a few KB)."""


def fetch_schema(base: str, index: int | None = None) -> Any:
    """The server's ``/schema`` answer.

    :raises InstanceDied: the server cannot be reached or answers no JSON.
    """
    url = http_url(base, "/schema")
    deadline = time.monotonic() + SCHEMA_TIMEOUT_S
    try:
        with urllib.request.urlopen(url, timeout=SCHEMA_TIMEOUT_S) as answer:
            body = b""
            # The whole answer within one deadline and one size: a server that trickles or
            # never ends is a named fault, not a hang or a MemoryError.
            while chunk := answer.read1(1 << 16):
                body += chunk
                if len(body) > MAX_SCHEMA_BYTES:
                    raise ValueError(f"an answer over {MAX_SCHEMA_BYTES:,} bytes")
                if time.monotonic() > deadline:
                    break
            if time.monotonic() > deadline:
                raise ValueError(f"an answer not done within {SCHEMA_TIMEOUT_S:g} s")
            return json.loads(body)
    except RecursionError:
        raise InstanceDied(index, f"the OpenEnv server's {url} is nested too deeply") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or exc
        raise InstanceDied(index, f"cannot read the OpenEnv server's {url}: {reason}") from None


class OpenEnvInstance(GameInstance):
    """One session of an OpenEnv server, as a one-agent game.

    :param index: 0-based instance number (used in every error message).
    :param url: the server's base URL (``http://127.0.0.1:8000``).
    :param read_timeout: seconds a reply may take before :class:`InstanceTimeout`.
    :param max_frame_bytes: the largest message accepted from the server.
    :param max_episode_steps: steps after which lander ends an episode itself.
    :param schema_override: replaces fields of the server's schemas (:func:`spaces_of`).
    :param seed: sent with the session's first reset (later episodes go on from it).
    """

    def __init__(
        self,
        index: int,
        url: str,
        read_timeout: float = 30.0,
        max_frame_bytes: int = protocol.DEFAULT_MAX_FRAME_BYTES,
        max_episode_steps: int = 1000,
        schema_override: dict[str, Any] | None = None,
        seed: int | None = None,
    ) -> None:
        super().__init__(index, 0, "", read_timeout, max_frame_bytes)
        self.url = server_url(url)
        self.max_episode_steps = max_episode_steps
        self.schema_override = schema_override
        self.spaces: OpenEnvSpaces | None = None
        self._socket: Any = None  # websockets.sync.client.ClientConnection
        self._replies: deque[dict[str, Any]] = deque()  # made here, not read from the server
        self._pending: deque[str] = deque()  # what each server reply awaited answers
        self._steps = 0
        self._seed = seed

    def _open_listener(self, host: str, port: int) -> None:
        return None  # lander connects to the server: nothing listens here

    @property
    def connected(self) -> bool:
        return self._socket is not None

    def try_accept(self) -> bool:
        return self.connected

    def start(self, command: list[str], output_path: Path) -> None:
        """Open this instance's session: a WebSocket to the server's ``/ws``.

        :raises InstanceDied: the server cannot be reached, or it closes the connection
            during the opening handshake (a server that is going down accepts, then
            breaks the pipe: websockets reports that as ``ConnectionClosed``).
        """
        from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidURI
        from websockets.sync.client import connect

        self.output_path = output_path
        address = websocket_url(self.url)
        try:
            self._socket = connect(
                address, open_timeout=self.read_timeout, max_size=self.max_frame_bytes
            )
        except (OSError, TimeoutError, ConnectionClosed, InvalidHandshake, InvalidURI) as exc:
            raise InstanceDied(self.index, f"cannot open a session at {address}: {exc}") from None

    def start_forked(self, main_module: str, argv: list[str], output_path: Path) -> None:
        self.start([], output_path)

    def exit_code(self) -> int | None:
        return None  # no process of ours

    # -- the protocol's messages, translated ---------------------------------

    def send_bytes(self, data: bytes) -> None:
        """A message the VecEnv framed (numpy values made JSON there): translated."""
        self.send(protocol.decode_body(data[4:]))

    def send(self, message: dict[str, Any]) -> None:
        kind = message.get("type")
        if kind == "handshake":
            return
        if kind == "env_info":
            try:
                self.spaces = spaces_of(fetch_schema(self.url, self.index), self.schema_override)
            except SchemaError as exc:
                raise ProtocolViolation(self.index, str(exc)) from None
            self._replies.append(self.spaces.env_info())
        elif kind == "reset":
            seed, self._seed = self._seed, None
            self._send_json({"type": "reset", "data": {} if seed is None else {"seed": seed}})
            self._pending.append("reset")
        elif kind == "action":
            assert self.spaces is not None  # env_info comes first
            (keyed,) = message["action"]
            self._send_json({"type": "step", "data": self.spaces.action(keyed)})
            self._pending.append("step")
        elif kind == "call":
            self._replies.append({"type": "call", "returns": [None]})
        elif kind == "close":
            self._say_goodbye()
        else:
            raise ProtocolViolation(self.index, f"no OpenEnv message for {kind!r}")

    def _receive(self, expected_type: str | None = None) -> dict[str, Any]:
        if self._replies:
            reply = self._replies.popleft()
        else:
            if not self._pending:
                raise ProtocolViolation(self.index, "a reply was awaited with no request sent")
            awaited = self._pending.popleft()
            reply = self._reset_reply() if awaited == "reset" else self._step_reply()
        if expected_type is not None and reply.get("type") != expected_type:
            raise ProtocolViolation(
                self.index, f"expected a {expected_type!r} message, got {reply.get('type')!r}"
            )
        return reply

    def _reset_reply(self) -> dict[str, Any]:
        self._steps = 0
        observation = self._observation(self._read_observation())
        return {"type": "reset", "obs": [{"obs": observation}], "info": [{}]}

    def _step_reply(self) -> dict[str, Any]:
        data = self._read_observation()
        observation = self._observation(data)
        reward = data.get("reward")
        if reward is not None and not finite_number(reward):
            raise ProtocolViolation(self.index, f"the reward is not a number: {reward!r:.80}")
        self._steps += 1
        ended = bool(data.get("done"))
        timed_out = not ended and self._steps >= self.max_episode_steps
        info: dict[str, Any] = {}
        if ended or timed_out:
            # The protocol's game resets a finished agent itself: so does this instance.
            info = {"terminal_observation": observation, "TimeLimit.truncated": timed_out}
            self._send_json({"type": "reset", "data": {}})
            observation = self._reset_reply()["obs"][0]["obs"]
        return {
            "type": "step",
            "obs": [{"obs": observation}],
            "reward": [float(reward or 0.0)],
            "done": [ended or timed_out],
            "info": [info],
        }

    def _observation(self, data: dict[str, Any]) -> list[float]:
        assert self.spaces is not None
        try:
            return self.spaces.observation(data.get("observation"))
        except SchemaError as exc:
            raise ProtocolViolation(self.index, str(exc)) from None

    def _read_observation(self) -> dict[str, Any]:
        """The next ``observation`` frame's data.

        :raises ServerRefused: an error frame.
        """
        message = self._read_json()
        kind = message.get("type")
        data = message.get("data")
        if kind == "error":
            raise self._refused(data if isinstance(data, dict) else {})
        if kind != "observation" or not isinstance(data, dict):
            raise ProtocolViolation(
                self.index, f"expected an 'observation' message, got type {kind!r}"
            )
        return data

    # -- the WebSocket -----------------------------------------------------------

    def _send_json(self, message: dict[str, Any]) -> None:
        from websockets.exceptions import ConnectionClosed

        if self._socket is None:
            raise InstanceDied(self.index, "not connected")
        try:
            self._socket.send(json.dumps(message))
        except (ConnectionClosed, OSError) as exc:
            raise self._closed(exc) from None

    def _read_json(self) -> dict[str, Any]:
        """One text frame as JSON, waiting in slices for a stop or the deadline."""
        from websockets.exceptions import ConnectionClosed, PayloadTooBig

        if self._socket is None:
            raise InstanceDied(self.index, "not connected")
        self._deadline = time.monotonic() + self.read_timeout
        while True:
            self._check_deadline()
            try:
                text = self._socket.recv(timeout=POLL_SLICE_S)
                break
            except TimeoutError:
                self._check_interrupt()
            except PayloadTooBig as exc:
                raise ProtocolViolation(self.index, f"a message too large: {exc}") from None
            except (ConnectionClosed, OSError) as exc:
                raise self._closed(exc) from None
        try:
            message = json.loads(text)
        except (TypeError, ValueError):
            raise ProtocolViolation(
                self.index, f"a message that is not JSON: {text!r:.80}"
            ) from None
        except RecursionError:
            raise ProtocolViolation(self.index, "a message nested too deeply") from None
        if not isinstance(message, dict):
            raise ProtocolViolation(self.index, f"a message that is not an object: {text!r:.80}")
        return message

    def _closed(self, exc: Exception) -> BridgeError:
        """The fault of a session the server closed: the error frame it sent before
        closing, if one waits unread (a server at capacity says so, then closes), else
        :class:`InstanceDied`."""
        with contextlib.suppress(Exception):
            while True:
                message = json.loads(self._socket.recv(timeout=0))
                data = message.get("data") if isinstance(message, dict) else None
                if message.get("type") == "error" and isinstance(data, dict):
                    return self._refused(data)
        return InstanceDied(self.index, f"the OpenEnv session closed ({exc})")

    def _refused(self, details: dict[str, Any]) -> ServerRefused:
        code = details.get("code", "no code")
        return ServerRefused(
            self.index, f"the OpenEnv server refused: {code}: {details.get('message', '')}"[:300]
        )

    def _say_goodbye(self) -> None:
        if self._socket is not None:
            # A session that is gone needs no goodbye (whatever the library raises then).
            with contextlib.suppress(Exception):
                self._socket.send(json.dumps({"type": "close"}))
            self._socket.close()
            self._socket = None

    def close(self, grace_s: float = 3.0) -> None:
        self._say_goodbye()
