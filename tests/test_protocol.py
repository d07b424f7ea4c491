"""Framing: length-prefixed ASCII JSON, both directions."""

from __future__ import annotations

import socket
import struct

import pytest

from game_bridge import protocol


def test_frame_round_trip_keeps_message_and_counts_bytes() -> None:
    message = {"type": "step", "obs": [{"obs": [0.5, -1.0]}], "reward": [1.0], "text": "café ☃"}
    frame = protocol.encode_message(message)
    (length,) = struct.unpack("<I", frame[:4])
    assert length == len(frame) - 4
    assert frame[4:].isascii()
    assert protocol.decode_frames(frame) == [message]


def test_several_frames_back_to_back_decode_in_order() -> None:
    messages = [{"type": "reset"}, {"type": "action", "action": [{"a": 1}]}, {"type": "close"}]
    data = b"".join(protocol.encode_message(m) for m in messages)
    assert protocol.decode_frames(data) == messages


def test_frame_over_limit_is_refused_before_reading_it() -> None:
    with pytest.raises(protocol.FrameError) as caught:
        protocol.frame_length(struct.pack("<I", 10_000), max_bytes=1_000)
    assert caught.value.kind == "too_large"


@pytest.mark.parametrize(
    ("body", "kind"), [(b"{oops", "bad_json"), (b"[1, 2]", "not_object"), (b"\xff\xfe", "bad_json")]
)
def test_bad_bodies_raise_frame_errors(body: bytes, kind: str) -> None:
    with pytest.raises(protocol.FrameError) as caught:
        protocol.decode_body(body)
    assert caught.value.kind == kind


def test_truncated_frame_is_an_error() -> None:
    frame = protocol.encode_message({"type": "reset"})
    with pytest.raises(protocol.FrameError):
        protocol.decode_frames(frame[:-1])


def test_socket_send_and_receive_over_a_real_connection() -> None:
    left, right = socket.socketpair()
    with left, right:
        protocol.send_message(left, {"type": "env_info"})
        assert protocol.recv_message(right) == {"type": "env_info"}
        left.close()
        with pytest.raises(protocol.FrameError) as caught:
            protocol.recv_message(right)
        assert caught.value.kind == "eof"
