"""``python -m games.lander`` starts the bundled game's protocol client."""

import sys

from games.lander.client import main

sys.exit(main())
