"""The Godot RL Agents wire protocol: framing and message builders, lander's opt-in
binary step encoding, and the stdio transport's JSON lines.

Every message is a 4-byte little-endian length followed by that many bytes of
ASCII JSON. This module is shared by the trainer side (the bridge) and the game
side (the bundled lander game), so it depends on nothing but the standard
library and numpy; it uses orjson, several times faster at both ends of every
message, where it is installed (lander's own environment always has it).

The binary encodings (``FAST_ENCODING`` for a vector, ``PICTURE_ENCODING`` for a
picture) are an extension negotiated in the handshake: the trainer offers them
(``"lander_encodings"`` in its handshake, which the Godot plugin ignores) and a game
that speaks one says which in its ``env_info`` reply (``"lander_encoding"``). Only
then do ``action`` and ``step`` travel as binary frames: the same length prefix, a
body starting with a NUL byte (which no JSON text starts with), a kind byte, then
little-endian arrays. Everything else
stays JSON, and a game that does not answer the offer is spoken to in JSON.
"""

from __future__ import annotations

import json
import socket
import struct
from collections.abc import Callable
from typing import Any

import numpy as np

try:
    import orjson
except ImportError:  # the bundled game shipped alone, without lander's dependencies
    orjson = None  # type: ignore[assignment]

MAJOR_VERSION = "0"
MINOR_VERSION = "7"
DEFAULT_PORT = 11008
DEFAULT_MAX_FRAME_BYTES = 64 * 1024 * 1024
"""A frame larger than this is a protocol violation, not a reason to allocate gigabytes."""

_RECV_CHUNK = 1 << 16
_HEADER = struct.Struct("<I")
FAST_ENCODING = "lander-f32-v2"
"""Binary actions and step replies for one box observation and one action key; since v2 a
step also carries a finished game's raw score and a lost life (:data:`SCORED`,
:data:`GOES_ON`), which v1 dropped: an Atari game seen through its RAM logged each life's
clipped return as a game."""
PICTURE_ENCODING = "lander-u8-v2"
"""The same frames for one picture observation (a camera key): observations and terminal
observations as their uint8 bytes in the declared shape's order instead of float32. The
plugin's JSON carries a picture as hex text, two characters a byte that the trainer must
parse back (about 8% of a Breakout trainer's time)."""
ENCODINGS = (FAST_ENCODING, PICTURE_ENCODING)
"""Every binary encoding the trainer offers, each for the layout its docstring names."""
_OBS_DTYPES = {FAST_ENCODING: "<f4", PICTURE_ENCODING: "u1"}
_BINARY = b"\x00"
_ACTION_KIND = b"A"
_STEP_KIND = b"S"
_STEP_HEADER = struct.Struct("<HH")  # agents, agents that finished this step
DONE, TRUNCATED, SUCCESS, FAILURE, SCORED, GOES_ON = 1, 2, 4, 8, 16, 32
"""Bits of the per-agent flags byte of a binary step reply. SUCCESS or FAILURE is set on a
finished episode the game judged (``is_success`` true or false); neither where the game
has no notion of success, which then shows no success rate. SCORED: the step ended a game
whose raw score (:data:`SCORE`) follows the terminal observations, one float32 per such
agent in agent order; GOES_ON: the learner's episode ended but the game goes on
(:data:`GAME_OVER` false)."""


SCORE = "score"
"""A step's info key (lander's, beside the plugin's): the game's whole raw score, on the
step that ends a game whose learner sees shaped rewards (an Atari game's, clipped)."""
GAME_OVER = "game_over"
"""A step's info key on an ended episode: false where the learner's episode ended but the
game goes on (an Atari life lost), so its return is no game's score."""


IDLE = "lander_idle"
"""A step's info key (lander's): true where the step did not use the agent's action (not
its turn in a turn-based game); its reward still counts. The trainer learns nothing from
the action (``training/envs/game_monitor.py``)."""
GONE = "lander_gone"
"""A step's info key (lander's): true while an agent that left its game mid-episode waits
for the others (a PettingZoo agent that died): its episode ended on the step it left;
these steps are no one's, and neither their rewards nor their actions count."""


def game_score(info: dict[str, Any], episode_return: float) -> float | None:
    """The score to print and log for an episode that just ended: the game's raw
    :data:`SCORE` where it sends one, None where only the learner's episode ended
    (:data:`GAME_OVER` false: the game goes on), else the episode's return."""
    if SCORE in info:
        return float(info[SCORE])
    if info.get(GAME_OVER) is False:
        return None
    return float(episode_return)


class FrameError(Exception):
    """A frame could not be read or decoded.

    :param kind: one of ``"eof"``, ``"too_large"``, ``"bad_json"``, ``"not_object"``.
    """

    def __init__(self, kind: str, message: str) -> None:
        self.kind = kind
        super().__init__(message)


def encode_message(message: dict[str, Any]) -> bytes:
    """Frame a message: length prefix plus compact ASCII JSON.

    :param message: a JSON-serialisable dict with a ``type`` key.
    :return: the bytes to write to the socket.
    """
    body = encode_json(message)
    return _HEADER.pack(len(body)) + body


def encode_json(value: Any) -> bytes:
    """Compact ASCII JSON of ``value``; numpy arrays are written as lists.

    orjson writes float32 arrays with the shortest digits that read back to the
    same float32 (at most 9), and is several times faster than :mod:`json`; text
    it would write as UTF-8 (a non-ASCII method name) goes through :mod:`json`,
    which escapes it, as the protocol asks.
    """
    if orjson is not None:
        body: bytes = orjson.dumps(value, option=orjson.OPT_SERIALIZE_NUMPY)
        if body.isascii():
            return body
    return json.dumps(
        value, ensure_ascii=True, separators=(",", ":"), default=_json_default
    ).encode("ascii")


WIRE_DECIMALS = 6
"""Without orjson, floats travel rounded to 1e-6: far below any game's sensitivity,
and half the JSON of a float's 17-digit repr, so both ends work half as much."""


def wire_floats(values: np.ndarray) -> Any:
    """Floats ready for :func:`encode_json`, iterable by rows: a float32 array, which
    orjson writes with at most 9 digits and no Python list in between, or without
    orjson a list rounded to :data:`WIRE_DECIMALS`."""
    if orjson is not None:
        return np.asarray(values, dtype=np.float32)
    return np.round(np.asarray(values, dtype=np.float64), WIRE_DECIMALS).tolist()


def _json_default(value: Any) -> Any:
    """What :mod:`json` cannot write itself: numpy arrays and scalars."""
    if isinstance(value, np.ndarray | np.generic):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def frame_length(header: bytes, max_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> int:
    """Read the body length from a 4-byte header, refusing absurd sizes.

    :param header: exactly 4 bytes.
    :param max_bytes: the largest body accepted.
    :raises FrameError: when the length exceeds ``max_bytes``.
    """
    (length,) = _HEADER.unpack(header)
    if length > max_bytes:
        raise FrameError(
            "too_large", f"frame of {length} bytes announced, limit is {max_bytes} bytes"
        )
    return length


def decode_body(body: bytes | bytearray | memoryview) -> dict[str, Any]:
    """Parse a frame body as a JSON object.

    :raises FrameError: when the body is not JSON or not a JSON object.
    """
    try:
        message = orjson.loads(body) if orjson is not None else json.loads(bytes(body))
    except (UnicodeDecodeError, ValueError) as exc:
        preview = bytes(body[:80]).decode("ascii", "replace")
        raise FrameError("bad_json", f"malformed JSON ({exc}): {preview!r}") from None
    if not isinstance(message, dict):
        raise FrameError("not_object", f"expected a JSON object, got {type(message).__name__}")
    return message


def decode_frames(data: bytes, max_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> list[dict[str, Any]]:
    """Decode a byte string holding whole frames back to back.

    :raises FrameError: on a truncated frame or any fault of :func:`decode_body`.
    """
    messages: list[dict[str, Any]] = []
    offset = 0
    while offset < len(data):
        if len(data) - offset < _HEADER.size:
            raise FrameError("eof", "truncated frame header")
        length = frame_length(data[offset : offset + _HEADER.size], max_bytes)
        offset += _HEADER.size
        if len(data) - offset < length:
            raise FrameError("eof", f"truncated frame: {len(data) - offset} of {length} bytes")
        messages.append(decode_body(data[offset : offset + length]))
        offset += length
    return messages


class FrameReader:
    """Reads frames from a byte stream: the game's socket, or the trainer's view of one game.

    It reads whatever has arrived into a buffer, so a message costs one read in the
    common case instead of one for the length and one for the body: a system call
    saved per step of every game.

    :param recv: reads up to the given number of bytes, b"" at the end of the stream
        (``socket.recv`` of a blocking socket, or a reader with its own deadlines).
    :param max_bytes: the largest frame accepted.
    """

    def __init__(
        self, recv: Callable[[int], bytes], max_bytes: int = DEFAULT_MAX_FRAME_BYTES
    ) -> None:
        self._recv = recv
        self._max_bytes = max_bytes
        self._buffer = bytearray()

    def _fill(self, size: int) -> None:
        while len(self._buffer) < size:
            chunk = self._recv(max(_RECV_CHUNK, size - len(self._buffer)))
            if not chunk:
                raise FrameError(
                    "eof", f"connection closed with {len(self._buffer)} of {size} bytes read"
                )
            self._buffer += chunk

    def body(self) -> bytes:
        """The next frame's body (JSON or binary).

        :raises FrameError: kind ``"eof"`` when the stream ends first, ``"too_large"``
            for a length beyond ``max_bytes``.
        """
        self._fill(_HEADER.size)
        length = frame_length(bytes(self._buffer[: _HEADER.size]), self._max_bytes)
        end = _HEADER.size + length
        self._fill(end)
        body = bytes(self._buffer[_HEADER.size : end])
        del self._buffer[:end]
        return body

    def message(self) -> dict[str, Any]:
        """The next frame as a JSON message."""
        return decode_body(self.body())


def encode_line(message: dict[str, Any]) -> bytes:
    """One message of the stdio transport: compact ASCII JSON (which holds no newline) and
    a newline."""
    return encode_json(message) + b"\n"


class LineReader(FrameReader):
    """Reads the stdio transport's messages, one JSON text per line, from a byte stream
    (a game's standard output, or a game's view of its standard input). Blank lines are
    skipped; a line longer than ``max_bytes`` is refused before it is all read.

    :param recv: as for :class:`FrameReader`.
    :param max_bytes: the longest line accepted, without its newline.
    """

    _scanned = 0  # bytes at the buffer's start known to hold no newline

    def body(self) -> bytes:
        """The next non-blank line, without its line ending.

        :raises FrameError: kind ``"eof"`` when the stream ends first, ``"too_large"``
            for a line beyond ``max_bytes``.
        """
        while True:
            end = self._buffer.find(b"\n", self._scanned)
            if end < 0:
                self._scanned = len(self._buffer)
                if self._scanned > self._max_bytes:
                    raise FrameError(
                        "too_large",
                        f"a line of more than {self._max_bytes} bytes, limit is {self._max_bytes} bytes",
                    )
                chunk = self._recv(_RECV_CHUNK)
                if not chunk:
                    raise FrameError(
                        "eof", f"stream closed with {len(self._buffer)} bytes of a line read"
                    )
                self._buffer += chunk
                continue
            line = bytes(self._buffer[:end]).strip()
            del self._buffer[: end + 1]
            self._scanned = 0
            if end > self._max_bytes:
                raise FrameError(
                    "too_large", f"a line of {end} bytes, limit is {self._max_bytes} bytes"
                )
            if line:
                return line


def send_message(sock: socket.socket, message: dict[str, Any]) -> None:
    """Write one framed message."""
    sock.sendall(encode_message(message))


def send_bytes(sock: socket.socket, frame: bytes) -> None:
    """Write an already framed message (binary replies)."""
    sock.sendall(frame)


def handshake_message(offer_fast: bool = False) -> dict[str, Any]:
    """The first message the trainer sends after accepting a game (offering the
    binary encoding when asked to)."""
    message: dict[str, Any] = {
        "type": "handshake",
        "major_version": MAJOR_VERSION,
        "minor_version": MINOR_VERSION,
    }
    if offer_fast:
        message["lander_encodings"] = list(ENCODINGS)
    return message


def is_binary(body: bytes | bytearray) -> bool:
    """True for a frame body in the binary encoding."""
    return body[:1] == _BINARY


def encode_binary_actions(actions: np.ndarray, discrete: bool, parts: int = 1) -> list[bytes]:
    """Binary ``action`` frames: float32 (K, width) or int32 (K,) for one discrete key.

    :param actions: the actions of ``parts`` instances, instance-major.
    :param parts: how many equal frames to cut the batch into (one per instance);
        the batch is converted once, not once per instance.
    """
    raw = np.ascontiguousarray(actions, dtype="<i4" if discrete else "<f4").tobytes()
    size = len(raw) // parts
    prefix = _HEADER.pack(size + 2) + _BINARY + _ACTION_KIND
    return [prefix + raw[i * size : (i + 1) * size] for i in range(parts)]


def decode_binary_actions(body: bytes, n_agents: int, width: int, discrete: bool) -> np.ndarray:
    """The actions of a binary ``action`` body.

    :raises FrameError: with kind ``"bad_binary"`` when the size does not fit.
    """
    if body[1:2] != _ACTION_KIND:
        raise FrameError("bad_binary", f"expected a binary action, got kind {body[1:2]!r}")
    dtype, shape = ("<i4", (n_agents,)) if discrete else ("<f4", (n_agents, width))
    expected = 4 * (n_agents if discrete else n_agents * width)
    if len(body) - 2 != expected:
        raise FrameError(
            "bad_binary", f"binary action of {len(body) - 2} bytes, expected {expected}"
        )
    return np.frombuffer(body, dtype=dtype, offset=2).reshape(shape)


def encode_binary_step(
    obs: np.ndarray,
    reward: np.ndarray,
    flags: np.ndarray,
    terminal_obs: np.ndarray,
    scores: np.ndarray | None = None,
    encoding: str = FAST_ENCODING,
) -> bytes:
    """A binary ``step`` frame.

    :param obs: (K, D) observations after the game's own resets (K pictures of D bytes
        under :data:`PICTURE_ENCODING`).
    :param reward: (K,) rewards.
    :param flags: (K,) uint8 of DONE | TRUNCATED | SUCCESS | FAILURE | SCORED | GOES_ON bits.
    :param terminal_obs: (n_done, D) observations before the reset, in agent order.
    :param scores: the raw scores of the agents flagged SCORED, in agent order (none: no
        game ended with a score).
    :param encoding: which of :data:`ENCODINGS` the observations travel in.
    """
    k, n_done = len(reward), len(terminal_obs)
    scored = np.zeros(0) if scores is None else scores
    obs_dtype = _OBS_DTYPES[encoding]
    parts = [
        _BINARY,
        _STEP_KIND,
        _STEP_HEADER.pack(k, n_done),
        np.ascontiguousarray(obs, dtype=obs_dtype).tobytes(),
        np.ascontiguousarray(reward, dtype="<f4").tobytes(),
        np.ascontiguousarray(flags, dtype=np.uint8).tobytes(),
        np.ascontiguousarray(terminal_obs, dtype=obs_dtype).tobytes(),
        np.ascontiguousarray(scored, dtype="<f4").tobytes(),
    ]
    body = b"".join(parts)
    return _HEADER.pack(len(body)) + body


def decode_binary_step(
    body: bytes, n_agents: int, obs_size: int, encoding: str = FAST_ENCODING
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(obs, reward, flags, terminal_obs, scores) of a binary ``step`` body (``scores``: one
    per agent flagged SCORED, in agent order); ``obs_size`` values an observation, float32
    or (:data:`PICTURE_ENCODING`) uint8.

    :raises FrameError: with kind ``"bad_binary"`` when the kind, agent count or size is wrong.
    """
    if body[1:2] != _STEP_KIND or len(body) < 2 + _STEP_HEADER.size:
        raise FrameError("bad_binary", f"expected a binary step reply, got {bytes(body[:8])!r}")
    k, n_done = _STEP_HEADER.unpack_from(body, 2)
    if k != n_agents or n_done > k:
        raise FrameError(
            "bad_binary", f"binary step reply for {k} agents ({n_done} done), expected {n_agents}"
        )
    obs_dtype = np.dtype(_OBS_DTYPES[encoding])
    obs_bytes = obs_dtype.itemsize * obs_size
    offset = 2 + _STEP_HEADER.size
    flags_at = offset + obs_bytes * k + 4 * k
    if len(body) < flags_at + k:
        raise FrameError("bad_binary", f"binary step reply of {len(body)} bytes is cut short")
    flags = np.frombuffer(body, np.uint8, k, flags_at)
    n_scored = int(np.count_nonzero(flags & SCORED))
    expected = flags_at + k + obs_bytes * n_done + 4 * n_scored
    if len(body) != expected:
        raise FrameError(
            "bad_binary", f"binary step reply of {len(body)} bytes, expected {expected}"
        )
    obs = np.frombuffer(body, obs_dtype, k * obs_size, offset).reshape(k, obs_size)
    reward = np.frombuffer(body, "<f4", k, offset + obs_bytes * k)
    offset = flags_at + k
    terminal = np.frombuffer(body, obs_dtype, n_done * obs_size, offset).reshape(n_done, obs_size)
    offset += obs_bytes * n_done
    return obs, reward, flags, terminal, np.frombuffer(body, "<f4", n_scored, offset)


def step_message(
    key: str, obs: np.ndarray, reward: np.ndarray, done: np.ndarray, infos: list[dict[str, Any]]
) -> dict[str, Any]:
    """A game's ``step`` reply for agents with one observation ``key``: what every Python
    game sends (its observations and rewards as wire floats)."""
    return {
        "type": "step",
        "obs": [{key: row} for row in wire_floats(obs)],
        "reward": wire_floats(reward),
        "done": np.asarray(done).tolist(),
        "info": infos,
    }
