"""``python -m game_bridge.stroke_game`` starts the stroke game on stdin and stdout."""

import sys

from game_bridge.stroke_game.client import main

sys.exit(main())
