"""``python -m games.stroke`` starts the stroke game on stdin and stdout."""

import sys

from games.stroke.client import main

sys.exit(main())
