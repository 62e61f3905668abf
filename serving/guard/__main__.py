"""``python -m serving.guard``: the guard process (``serving.guard.main``)."""

import sys

from serving.guard.main import main

sys.exit(main())
