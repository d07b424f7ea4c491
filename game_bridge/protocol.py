"""The Godot RL Agents wire protocol: framing and message builders.

Every message is a 4-byte little-endian length followed by that many bytes of
ASCII JSON. This module is shared by the trainer side (the bridge) and the game
side (the bundled lander game), so it depends on nothing but the standard library.
"""

from __future__ import annotations

import json
import socket
import struct
from typing import Any

MAJOR_VERSION = "0"
MINOR_VERSION = "7"
DEFAULT_PORT = 11008
DEFAULT_MAX_FRAME_BYTES = 64 * 1024 * 1024
"""A frame larger than this is a protocol violation, not a reason to allocate gigabytes."""

_HEADER = struct.Struct("<I")


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
    body = json.dumps(message, ensure_ascii=True, separators=(",", ":")).encode("ascii")
    return _HEADER.pack(len(body)) + body


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
        message = json.loads(bytes(body))
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


def recv_exact(sock: socket.socket, size: int) -> bytearray:
    """Read exactly ``size`` bytes from a blocking socket.

    :raises FrameError: with kind ``"eof"`` when the peer closes first.
    """
    buffer = bytearray(size)
    view = memoryview(buffer)
    received = 0
    while received < size:
        count = sock.recv_into(view[received:], size - received)
        if count == 0:
            raise FrameError("eof", f"connection closed after {received} of {size} bytes")
        received += count
    return buffer


def recv_message(sock: socket.socket, max_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> dict[str, Any]:
    """Read one framed message from a blocking socket (the game side's reader)."""
    length = frame_length(bytes(recv_exact(sock, _HEADER.size)), max_bytes)
    return decode_body(recv_exact(sock, length))


def send_message(sock: socket.socket, message: dict[str, Any]) -> None:
    """Write one framed message."""
    sock.sendall(encode_message(message))


def handshake_message() -> dict[str, Any]:
    """The first message the trainer sends after accepting a game."""
    return {"type": "handshake", "major_version": MAJOR_VERSION, "minor_version": MINOR_VERSION}
