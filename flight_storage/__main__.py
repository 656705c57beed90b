"""``python -m flight_storage`` is the ``flight-select`` command."""

import sys

from flight_storage.cli import main

sys.exit(main())
