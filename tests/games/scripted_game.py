"""A protocol game that answers each action with the next reply of a script, for
property-based tests of the bridge. ``--script=FILE`` holds a JSON list of
replies, each ``{"kind": ..., "value": ...}``:

- valid: a correct step reply (rewards ``value``)
- nonfinite: a step reply whose observation holds ``value`` ("nan", "inf", "-inf"
  or a number too large for float32), written as JSON allows (1e999 is infinity)
- truncated: a length prefix, then only part of the body, then silence
- slow: a correct reply sent one byte at a time, ``value`` seconds apart
- garbage: ``value`` as raw bytes after a matching length prefix

After the script it answers validly.
"""

import json
import socket
import struct
import time

from wire import arg, messages, send, send_small_env_info

AGENTS = 2


def step_body(observation, reward):
    obs = [{"obs": [observation, 0.5]} for _ in range(AGENTS)]
    reply = {
        "type": "step",
        "obs": obs,
        "reward": [reward] * AGENTS,
        "done": [False] * AGENTS,
        "info": [{}] * AGENTS,
    }
    return json.dumps(reply).encode()


def main():
    with open(arg("script", "")) as handle:
        script = json.load(handle)
    sock = socket.create_connection(("127.0.0.1", int(arg("port", "11008"))))
    for message in messages(sock):
        kind = message["type"]
        if kind == "close":
            return
        if kind == "env_info":
            send_small_env_info(sock, AGENTS)
        elif kind == "reset":
            send(
                sock,
                {"type": "reset", "obs": [{"obs": [0.0, 0.0]}] * AGENTS, "info": [{}] * AGENTS},
            )
        elif kind == "action":
            reply = script.pop(0) if script else {"kind": "valid", "value": 1.0}
            what, value = reply["kind"], reply.get("value")
            if what == "valid":
                body = step_body(0.25, value)
                sock.sendall(struct.pack("<I", len(body)) + body)
            elif what == "nonfinite":
                token = {"nan": "NaN", "inf": "1e999", "-inf": "-1e999"}.get(str(value), str(value))
                body = step_body(0.0, 1.0).replace(b"0.0, 0.5", token.encode() + b", 0.5", 1)
                sock.sendall(struct.pack("<I", len(body)) + body)
            elif what == "truncated":
                body = step_body(0.25, 1.0)
                sock.sendall(struct.pack("<I", len(body)) + body[: len(body) // 2])
                time.sleep(600)
            elif what == "slow":
                body = step_body(0.25, 1.0)
                for byte in struct.pack("<I", len(body)) + body:
                    sock.sendall(bytes([byte]))
                    time.sleep(float(value))
            elif what == "garbage":
                body = bytes(value)
                sock.sendall(struct.pack("<I", len(body)) + body)


if __name__ == "__main__":
    main()
