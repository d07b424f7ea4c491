"""A protocol game that misbehaves on purpose after ``--after`` good steps.

``--fault=`` one of: eof (closes the socket), die (exits with code 3),
hang (stops answering), oversize (announces a 2 GB frame), badjson (sends
bytes that are not JSON), wrongtype (replies with type "reset" to an action),
wrongcount (replies for one agent too few), noconnect (exits before connecting),
none (behaves). ``--ignore_close=1`` makes it ignore the close message.
``--once_marker=DIR`` makes each port fault only once (a restarted game behaves).
"""

import json
import os
import socket
import struct
import sys
import time

from wire import arg, messages, send, send_small_env_info


def main():
    fault = arg("fault", "eof")
    after = int(arg("after", "3"))
    agents = 2
    if fault == "noconnect":
        print("giving up before connecting", flush=True)
        sys.exit(4)
    sock = socket.create_connection(("127.0.0.1", int(arg("port", "11008"))))
    good_steps = 0
    obs = [{"obs": [0.0, 0.0]} for _ in range(agents)]
    for message in messages(sock):
        kind = message["type"]
        if kind == "close":
            if arg("ignore_close", "0") == "1":
                time.sleep(600)
            return
        if kind == "env_info":
            send_small_env_info(sock, agents)
        elif kind == "reset":
            send(sock, {"type": "reset", "obs": obs, "info": [{}] * agents})
        elif kind == "action":
            marker = arg("once_marker", "")
            if marker and os.path.exists(os.path.join(marker, arg("port", "0"))):
                fault = "none"  # this port already failed once: behave now
            if good_steps >= after and fault != "none":
                if marker:
                    open(os.path.join(marker, arg("port", "0")), "w").close()
                print(f"injecting fault {fault}", flush=True)
                if fault == "eof":
                    sock.close()
                    time.sleep(60)
                    return
                if fault == "die":
                    os._exit(3)
                if fault == "hang":
                    time.sleep(600)
                    return
                if fault == "oversize":
                    sock.sendall(struct.pack("<I", 2_000_000_000))
                    time.sleep(60)
                    return
                if fault == "badjson":
                    body = b"{not json at all"
                    sock.sendall(struct.pack("<I", len(body)) + body)
                    time.sleep(60)
                    return
                if fault == "wrongtype":
                    send(sock, {"type": "reset", "obs": obs, "info": [{}] * agents})
                    time.sleep(60)
                    return
                if fault == "trickle":  # a valid reply, one byte every 0.2 s
                    body = json.dumps(
                        {"type": "step", "obs": obs, "reward": [0.0] * agents,
                         "done": [False] * agents, "info": [{}] * agents}
                    ).encode()  # fmt: skip
                    for byte in struct.pack("<I", len(body)) + body:
                        sock.sendall(bytes([byte]))
                        time.sleep(0.2)
                    time.sleep(60)
                    return
                if fault == "huge":  # finite in JSON, infinite as the float32 PPO trains on
                    send(
                        sock,
                        {
                            "type": "step",
                            "obs": [{"obs": [1e300] * len(o["obs"])} for o in obs],
                            "reward": [1e300] * agents,
                            "done": [False] * agents,
                            "info": [{}] * agents,
                        },
                    )
                    time.sleep(60)
                    return
                if fault == "wrongcount":
                    send(
                        sock,
                        {
                            "type": "step",
                            "obs": obs[:1],
                            "reward": [0.0],
                            "done": [False],
                            "info": [{}],
                        },
                    )
                    time.sleep(60)
                    return
            good_steps += 1
            send(
                sock,
                {
                    "type": "step",
                    "obs": obs,
                    "reward": [0.0] * agents,
                    "done": [False] * agents,
                    "info": [{}] * agents,
                },
            )


if __name__ == "__main__":
    main()
