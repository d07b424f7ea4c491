"""The bundled headless game "lander": a 2D lander that follows a moving target.

It imports nothing from lander except the protocol module (and, to play a bot,
the numpy bot runner), so it can be shipped on its own.
"""
