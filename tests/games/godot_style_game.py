"""A Godot-style protocol game written independently of lander's own code.

It behaves the way Godot's JSON does: every number it sends is a float, and it
accepts discrete actions sent as 1.0 as well as 1. It declares a mixed action
dict in non-alphabetical order ("steer" continuous, then "boost" discrete) and
echoes the last actions back in its observation, so a test can prove each value
reached the right key. It does not send terminal_observation or truncation, like
today's plugin, nor is_success. Agents end an episode every ``--episode_len`` steps.

Observation per agent (size 4): [steer[0], steer[1], boost, step / episode_len].
Reward: steer[0] (so PPO can learn to push it to +1) plus 0.5 when boost == 1.
"""

import json
import socket
import time

from wire import arg, messages
from wire import send_compact as send


def main():
    port = int(arg("port", "11008"))
    # --fixed_agents: a scene with its own number of agents, which ignores --agents.
    agents = int(arg("fixed_agents", arg("agents", "2")))
    episode_len = int(arg("episode_len", "25"))
    obs_key = arg("obs_key", "obs")
    # --tick_rate: the game's own physics rate, whatever --speedup says (as the plugin's
    # godot3 branch runs at its Sync node's speed_up): a step takes action_repeat ticks.
    tick_rate = float(arg("tick_rate", "0"))
    action_repeat = int(arg("action_repeat", "1"))
    extra_key = arg("extra_obs_key", "")  # a second observation key, as games with sensors have
    sock = socket.create_connection(("127.0.0.1", port))
    steps = [0] * agents
    last = [[0.0, 0.0, 0.0] for _ in range(agents)]

    camera = arg("camera", "") == "1"  # a camera_2d key beside the vector, as a sensor adds

    def frame(i):
        """A 3 x 36 x 36 frame, as the plugin's smallest camera sends: one lit pixel per
        channel, in the row of the agent's step, hex-encoded."""
        pixels = bytearray(3 * 36 * 36)
        for channel in range(3):
            pixels[channel * 36 * 36 + (steps[i] % 36) * 36 + 7 * channel] = 255
        return pixels.hex()

    def obs(i):
        observed = {obs_key: [float(v) for v in last[i]] + [float(steps[i]) / episode_len]}
        if extra_key:
            observed[extra_key] = [float(steps[i] % 2)]
        if camera:
            observed["camera_2d"] = frame(i)
        return observed

    # --obs_grid: the same 4 values declared as a 2 x 2 grid (a sensor's shape).
    shape = [2.0, 2.0] if arg("obs_grid", "") else [4.0]
    observation_space = {obs_key: {"size": shape, "space": "box"}}
    # --bounds: JSON of the observation's low and high, as a game declares them (a number,
    # one per value, or null for unbounded; or something broken, for the fault tests).
    observation_space[obs_key].update(json.loads(arg("bounds", "{}")))
    if extra_key:
        observation_space[extra_key] = {"size": [1.0], "space": "box"}
    if camera:
        observation_space["camera_2d"] = {"size": [3.0, 36.0, 36.0], "space": "box"}

    for message in messages(sock):
        kind = message["type"]
        if kind == "close":
            return
        if kind == "env_info":
            send(
                sock,
                {
                    "type": "env_info",
                    "observation_space": observation_space,
                    "action_space": {
                        "steer": {"size": 2.0, "action_type": "continuous"},
                        "boost": {"size": 2.0, "action_type": "discrete"},
                    },
                    # --declared_agents: a count the game claims without playing it (a fault).
                    "n_agents": float(arg("declared_agents", str(agents))),
                },
            )
        elif kind == "reset":
            steps = [0] * agents
            send(
                sock,
                {
                    "type": "reset",
                    "obs": [obs(i) for i in range(agents)],
                    "info": [{} for _ in range(agents)],
                },
            )
        elif kind == "action":
            if tick_rate:
                time.sleep(action_repeat / tick_rate)
            rewards, dones = [], []
            for i, action in enumerate(message["action"]):
                boost = int(float(action["boost"]))
                last[i] = [float(action["steer"][0]), float(action["steer"][1]), float(boost)]
                rewards.append(float(action["steer"][0]) + (0.5 if boost == 1 else 0.0))
                steps[i] += 1
                done = steps[i] >= episode_len
                dones.append(done)
                if done:
                    steps[i] = 0
            send(
                sock,
                {
                    "type": "step",
                    "obs": [obs(i) for i in range(agents)],
                    "reward": rewards,
                    "done": dones,
                    "info": [{} for _ in range(agents)],
                },
            )
        elif kind == "call":
            send(sock, {"type": "call", "returns": [float(i) for i in range(agents)]})


if __name__ == "__main__":
    main()
