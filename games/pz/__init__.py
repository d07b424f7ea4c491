"""Any PettingZoo game as a lander game (``--game pz:MODULE``): its agents alike share a
policy, agents that differ are sides, two rivals train by self-play."""
