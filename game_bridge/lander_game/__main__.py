"""``python -m game_bridge.lander_game`` starts the bundled game's protocol client."""

import sys

from game_bridge.lander_game.client import main

sys.exit(main())
