"""Bots: ``export``, ``eval``, ``play``, ``record``, ``match``, ``ladder`` (commands.py), over
the flows that export, score, draw and record a run's bot or a bot file."""
