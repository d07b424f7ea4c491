"""Any installed Gymnasium environment as a lander game (``--game gym:ENV_ID``): a user
holds lander against numbers already published for the environment (RL Zoo's scores).
"""
