"""``python -m games.gym --env_id=ENV_ID`` serves K copies of a Gymnasium environment as one
game instance."""

import sys

from games.gym.client import main

sys.exit(main())
