"""``python -m games.duel`` starts the duel game's protocol client."""

import sys

from games.duel.client import main

sys.exit(main())
