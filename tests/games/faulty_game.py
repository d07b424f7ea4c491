"""A protocol game that misbehaves on purpose after ``--after`` good steps, over either
transport: TCP frames on ``--port`` (the default), or JSON lines on stdin and stdout
when the trainer passes ``--transport=stdio``. Written from the protocol text alone.

``--fault=`` one of: eof (closes its end), die (exits with code 3), hang (stops
answering), oversize (a frame past any limit: a 2 GB length prefix, or a 300,000-byte
line), badjson (a message that is not JSON), wrongtype (replies with type "reset" to an
action), wrongcount (replies for one agent too few), trickle (a valid reply one byte
every 0.2 s), huge (finite in JSON, infinite as float32), badimage and nothex (with ``--camera=1``: a
camera frame one byte short, or not hex), noconnect (exits with code 4
before connecting, or before answering env_info on stdio), none (behaves).
``--ignore_close=1`` ignores the close message. ``--once_marker=DIR`` makes each
instance (by its seed) fault only once: a restarted game behaves.
"""

import json
import os
import socket
import struct
import sys
import time

from wire import arg, messages, send

AGENTS = 2
GARBAGE = b"debug: the player jumped"


class Tcp:
    """Frames of a 4-byte little-endian length and JSON, on a connection to the trainer."""

    def __init__(self):
        self.sock = socket.create_connection(("127.0.0.1", int(arg("port", "11008"))))

    def messages(self):
        return messages(self.sock)

    def send(self, message):
        send(self.sock, message)

    def raw(self, data):
        self.sock.sendall(data)

    def frame(self, body):
        return struct.pack("<I", len(body)) + body

    def oversize(self):
        self.raw(struct.pack("<I", 2_000_000_000))

    def close(self):
        self.sock.close()


class Stdio:
    """One JSON message a line: the trainer's on stdin, the game's on stdout."""

    def messages(self):
        for line in sys.stdin:
            message = json.loads(line)
            if message["type"] != "handshake":
                yield message

    def send(self, message):
        self.raw((json.dumps(message) + "\n").encode())

    def raw(self, data):
        sys.stdout.buffer.write(data)
        sys.stdout.flush()

    def frame(self, body):
        return body + b"\n"

    def oversize(self):
        self.raw(b"x" * 300_000)

    def close(self):
        sys.stdout.close()
        os.close(1)


CAMERA = arg("camera", "0") == "1"
"""``--camera=1``: each agent also sees a 3 x 2 x 2 camera frame (key ``camera_2d``)."""
FRAME = "7f" * 12


def observation(value=0.0, frame=FRAME):
    seen = {"obs": [value, value]}
    if CAMERA:
        seen["camera_2d"] = frame
    return seen


def step_reply(agents=AGENTS, value=0.0, frame=FRAME):
    return {
        "type": "step",
        "obs": [observation(value, frame) for _ in range(agents)],
        "reward": [value] * agents,
        "done": [False] * agents,
        "info": [{}] * agents,
    }


def inject(channel, fault):
    """Misbehave in the way ``fault`` names, then linger (or end) as a broken game would."""
    print(f"injecting fault {fault}", file=sys.stderr, flush=True)
    if fault == "die":
        os._exit(3)
    if fault == "eof":
        channel.close()
    elif fault == "oversize":
        channel.oversize()
    elif fault == "badjson":
        channel.raw(channel.frame(GARBAGE))
    elif fault == "wrongtype":
        channel.send({"type": "reset", "obs": step_reply()["obs"], "info": [{}] * AGENTS})
    elif fault == "wrongcount":
        channel.send(step_reply(AGENTS - 1))
    elif fault == "huge":
        channel.send(step_reply(value=1e300))
    elif fault == "badimage":  # a camera frame one byte short
        channel.send(step_reply(frame=FRAME[:-2]))
    elif fault == "nothex":
        channel.send(step_reply(frame="not a picture"))
    elif fault == "trickle":
        for byte in channel.frame(json.dumps(step_reply()).encode()):
            channel.raw(bytes([byte]))
            time.sleep(0.2)
    time.sleep(600 if fault == "hang" else 60)


def main():
    fault = arg("fault", "none")
    after = int(arg("after", "3"))
    stdio = arg("transport", "tcp") == "stdio"
    marker_dir = arg("once_marker", "")
    marker = os.path.join(marker_dir, arg("env_seed", "0")) if marker_dir else ""
    if marker and os.path.exists(marker):
        fault = "none"  # this instance already failed once: behave now
    if fault == "noconnect" and not stdio:
        print("giving up before connecting", file=sys.stderr, flush=True)
        sys.exit(4)
    channel = Stdio() if stdio else Tcp()
    good_steps = 0
    for message in channel.messages():
        kind = message["type"]
        if kind == "close":
            if arg("ignore_close", "0") == "1":
                time.sleep(600)
            return
        if kind == "env_info":
            if fault == "noconnect":
                print("giving up before env_info", file=sys.stderr, flush=True)
                sys.exit(4)
            channel.send(
                {
                    "type": "env_info",
                    "observation_space": {
                        "obs": {"size": [2], "space": "box"},
                        **({"camera_2d": {"size": [3, 2, 2], "space": "box"}} if CAMERA else {}),
                    },
                    "action_space": {"move": {"size": 1, "action_type": "continuous"}},
                    "n_agents": AGENTS,
                }
            )
        elif kind == "reset":
            channel.send({"type": "reset", "obs": step_reply()["obs"], "info": [{}] * AGENTS})
        elif kind == "action":
            if good_steps >= after and fault != "none":
                if marker:
                    open(marker, "w").close()
                inject(channel, fault)
                return
            good_steps += 1
            channel.send(step_reply())


if __name__ == "__main__":
    main()
