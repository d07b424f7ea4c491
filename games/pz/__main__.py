"""``python -m games.pz --module=MODULE`` serves tables of a PettingZoo game as one game
instance."""

import sys

from games.pz.client import main

sys.exit(main())
