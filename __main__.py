"""``python -m vckattn``: the ``vckattn`` CLI (what ``accelerate launch -m vckattn ...`` runs)."""

import sys

from vckattn.host.cli import main

sys.exit(main())
