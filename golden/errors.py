"""Error types shared by every layer (a leaf module: it imports nothing).

:class:`UserError` is a problem the user can fix (a bad file, a wrong flag, a bundle that does not
match a build). The CLI reports it as one line on stderr with exit status 2; every layer may raise it
(the hardware manifest, the Vitis flow, the host), so it lives here, below all of them.
"""

from __future__ import annotations

__all__ = ["UserError"]


class UserError(Exception):
    """A problem the user can fix; reported as one line on stderr, exit status 2."""
