"""The wire helpers of the test games, written from the protocol text alone (not
from lander's code), so the games check lander rather than agree with it:
`--key=value` arguments, and frames of a 4-byte little-endian length plus JSON."""

import json
import struct
import sys


def arg(name, default):
    for item in sys.argv[1:]:
        if item.startswith(f"--{name}="):
            return item.split("=", 1)[1]
    return default


def send(sock, message, compact=False):
    separators = (",", ":") if compact else None
    body = json.dumps(message, separators=separators).encode("ascii")
    sock.sendall(struct.pack("<I", len(body)) + body)


def send_compact(sock, message):
    """As Godot's JSON.stringify writes it: no spaces."""
    send(sock, message, compact=True)


def recv_exact(sock, size):
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return data


def recv(sock):
    (length,) = struct.unpack("<I", recv_exact(sock, 4))
    return json.loads(recv_exact(sock, length))


def messages(sock):
    """The trainer's messages until it goes away; the handshake is consumed here."""
    while True:
        try:
            message = recv(sock)
        except (EOFError, OSError):
            return
        if message["type"] != "handshake":
            yield message


def send_small_env_info(sock, agents):
    """The layout of the small test games: a 2-float observation, one continuous action."""
    send(
        sock,
        {
            "type": "env_info",
            "observation_space": {"obs": {"size": [2], "space": "box"}},
            "action_space": {"move": {"size": 1, "action_type": "continuous"}},
            "n_agents": agents,
        },
    )
