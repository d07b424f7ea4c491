"""The third bundled game, "duel": two landers race for the same moving target, and the
one that holds it longer wins the round. Its two sides (``red`` and ``blue``) are named in
``agent_policy_names``, so it trains with ``--self-play``.

It imports nothing of lander but the protocol, the game loop, the bot runner and the
lander game's physics (its two landers fly by them), so it could be shipped with those.
"""
