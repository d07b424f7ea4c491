"""A stdio protocol game that misbehaves on purpose after ``--after`` good steps, written
from the protocol text alone: one JSON message a line on stdin (the trainer's) and
stdout (the game's), complaints on stderr.

``--fault=`` one of: eof (closes stdout, stays alive), die (exits with code 3), hang
(stops answering), oversize (a line of 300,000 bytes), garbage (a line that is not
JSON), wrongcount (replies for one agent too few), trickle (a valid reply one byte
every 0.2 s), silent (exits with code 4 before answering env_info), none (behaves).
``--ignore_close=1`` ignores the close message. ``--once_marker=DIR`` makes the fault
happen once per instance seed (a restarted game behaves).
"""

import json
import os
import sys
import time

from wire import arg

AGENTS = 2


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def step_reply(agents=AGENTS):
    return {
        "type": "step",
        "obs": [{"obs": [0.0, 0.0]} for _ in range(agents)],
        "reward": [0.0] * agents,
        "done": [False] * agents,
        "info": [{}] * agents,
    }


def inject(fault):
    print(f"injecting fault {fault}", file=sys.stderr, flush=True)
    if fault == "eof":
        sys.stdout.close()
        os.close(1)
        time.sleep(60)
    elif fault == "die":
        os._exit(3)
    elif fault == "hang":
        time.sleep(600)
    elif fault == "oversize":
        sys.stdout.write("x" * 300_000)
        sys.stdout.flush()
        time.sleep(60)
    elif fault == "garbage":
        sys.stdout.write("debug: the player jumped\n")
        sys.stdout.flush()
        time.sleep(60)
    elif fault == "wrongcount":
        send(step_reply(AGENTS - 1))
        time.sleep(60)
    elif fault == "trickle":
        for char in json.dumps(step_reply()) + "\n":
            sys.stdout.write(char)
            sys.stdout.flush()
            time.sleep(0.2)
        time.sleep(60)


def main():
    fault = arg("fault", "none")
    after = int(arg("after", "3"))
    marker_dir = arg("once_marker", "")
    marker = os.path.join(marker_dir, arg("env_seed", "0")) if marker_dir else ""
    if marker and os.path.exists(marker):
        fault = "none"  # this instance already failed once: behave now
    good_steps = 0
    for line in sys.stdin:
        message = json.loads(line)
        kind = message["type"]
        if kind == "close":
            if arg("ignore_close", "0") == "1":
                time.sleep(600)
            return
        if kind == "env_info":
            if fault == "silent":
                print("giving up before env_info", file=sys.stderr, flush=True)
                sys.exit(4)
            send(
                {
                    "type": "env_info",
                    "observation_space": {"obs": {"size": [2], "space": "box"}},
                    "action_space": {"move": {"size": 1, "action_type": "continuous"}},
                    "n_agents": AGENTS,
                }
            )
        elif kind == "reset":
            send({"type": "reset", "obs": [{"obs": [0.0, 0.0]}] * AGENTS, "info": [{}] * AGENTS})
        elif kind == "action":
            if good_steps >= after and fault != "none":
                if marker:
                    open(marker, "w").close()
                inject(fault)
                return
            good_steps += 1
            send(step_reply())


if __name__ == "__main__":
    main()
