"""The second bundled game, "stroke": correcting a noisy tracking signal.

Like the lander it imports nothing from lander but the protocol module, so it could
be shipped alone.
"""
