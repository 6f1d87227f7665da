"""``python -m vckattn.host.cli``: the ``vckattn`` command."""

import sys

from vckattn.host.cli import main

if __name__ == "__main__":  # imported (the documentation build walks every module): nothing runs
    sys.exit(main())
