"""``python -m vckattn.host.cli``: the ``vckattn`` command."""

import sys

from vckattn.host.cli import main

sys.exit(main())
