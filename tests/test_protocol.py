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
        reader = protocol.FrameReader(right.recv)
        protocol.send_message(left, {"type": "env_info"})
        # Two frames in one write come back as two messages, then one split in two writes.
        left.sendall(protocol.encode_message({"type": "reset"}) * 2)
        frame = protocol.encode_message({"type": "close"})
        left.sendall(frame[:3])
        assert reader.message() == {"type": "env_info"}
        assert [reader.message(), reader.message()] == [{"type": "reset"}] * 2
        left.sendall(frame[3:])
        assert reader.message() == {"type": "close"}
        left.close()
        with pytest.raises(protocol.FrameError) as caught:
            reader.message()
        assert caught.value.kind == "eof"


def test_binary_step_round_trip_and_refusal_of_a_wrong_size() -> None:
    import numpy as np

    obs = np.arange(21, dtype=np.float32).reshape(3, 7) / 10
    reward = np.array([1.5, -2.0, 0.25], dtype=np.float32)
    flags = np.array(
        [0, protocol.DONE | protocol.TRUNCATED, protocol.DONE | protocol.SUCCESS], dtype=np.uint8
    )
    terminal = np.ones((2, 7), dtype=np.float32)
    frame = protocol.encode_binary_step(obs, reward, flags, terminal)
    body = frame[4:]
    assert protocol.is_binary(body) and not protocol.is_binary(
        protocol.encode_message({"type": "step"})[4:]
    )
    got = protocol.decode_binary_step(body, 3, 7)
    for expected, actual in zip((obs, reward, flags, terminal, np.zeros(0)), got, strict=True):
        assert np.array_equal(expected, actual)
    with pytest.raises(protocol.FrameError, match="bytes, expected"):
        protocol.decode_binary_step(body[:-3], 3, 7)
    with pytest.raises(protocol.FrameError, match="cut short"):
        protocol.decode_binary_step(body[:30], 3, 7)
    # A game's score follows the terminal observations for each agent flagged SCORED.
    flags[1] |= protocol.SCORED
    flags[2] |= protocol.SCORED | protocol.GOES_ON
    scores = np.array([410.0, 35.0], dtype=np.float32)
    scored = protocol.encode_binary_step(obs, reward, flags, terminal, scores)[4:]
    assert np.array_equal(protocol.decode_binary_step(scored, 3, 7)[4], scores)
    with pytest.raises(protocol.FrameError, match="bytes, expected"):
        protocol.decode_binary_step(scored[:-4], 3, 7)
    with pytest.raises(protocol.FrameError, match="expected 4"):
        protocol.decode_binary_step(body, 4, 7)
    # Pictures travel as their bytes, a quarter of the floats' size, and come back uint8.
    pictures = np.arange(3 * 2 * 5 * 5, dtype=np.uint8).reshape(3, 50)
    picture = protocol.encode_binary_step(
        pictures, reward, flags, pictures[1:], scores, protocol.PICTURE_ENCODING
    )[4:]
    got = protocol.decode_binary_step(picture, 3, 50, protocol.PICTURE_ENCODING)
    for expected, actual in zip((pictures, reward, flags, pictures[1:], scores), got, strict=True):
        assert np.array_equal(expected, actual) and expected.dtype == actual.dtype
    with pytest.raises(protocol.FrameError, match="cut short"):  # read as floats
        protocol.decode_binary_step(picture, 3, 50)
    actions = np.array([[0.5, -1.0], [0.25, 1.0]], dtype=np.float32)
    (frame,) = protocol.encode_binary_actions(actions, discrete=False)
    sent = frame[4:]
    assert np.array_equal(protocol.decode_binary_actions(sent, 2, 2, discrete=False), actions)
    with pytest.raises(protocol.FrameError):
        protocol.decode_binary_actions(sent, 3, 2, discrete=False)
    # A batch cut into one frame per instance: each frame holds its own rows.
    frames = protocol.encode_binary_actions(actions, discrete=False, parts=2)
    for row, part in zip(actions, frames, strict=True):
        assert np.array_equal(protocol.decode_binary_actions(part[4:], 1, 2, False), row[None])
    choices = protocol.encode_binary_actions(np.array([3, 1, 0, 2]), discrete=True, parts=2)
    assert [protocol.decode_binary_actions(f[4:], 2, 1, True).tolist() for f in choices] == [
        [3, 1],
        [0, 2],
    ]
