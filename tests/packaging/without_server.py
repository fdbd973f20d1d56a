"""Run the `chronoq` command as an install without the server extra would.

`python -m tests.packaging.without_server ARGS...` makes every module of `chronoq[server]`
unimportable (a None entry in sys.modules stops an import with ModuleNotFoundError, as a missing
package does), then runs the CLI with ARGS. A command that imports one of them fails here.
"""

from __future__ import annotations

import sys

from chronoq.cli.main import SERVER_MODULES, main


def block_server_modules() -> None:
    for name in SERVER_MODULES:
        sys.modules[name] = None  # type: ignore[assignment]  # the import system's own "absent"


if __name__ == "__main__":
    block_server_modules()
    sys.exit(main())
