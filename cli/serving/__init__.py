"""Serving on the network: ``dashboard`` (TensorBoard over logs/) and ``serve`` (a bundled
game as an OpenEnv server) (commands.py), and the bots' live web page."""
