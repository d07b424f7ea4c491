"""The lander command line: the Typer app (``app.py``: only the wiring) over one package per
command group, each over the ones below it: ``runs`` | ``bots``, ``serving``, ``machine``,
``results`` (and git), ``common``. Depends on ``training``, ``games`` and ``game_bridge``."""
