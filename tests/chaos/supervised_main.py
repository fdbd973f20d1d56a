"""A supervised chaos fleet: `chronoq`'s own supervisor over three chaos worker processes,
settling the jobs of a child that dies the way `chronoq worker --processes 3` does."""

from __future__ import annotations

import logging
import sys

from chronoq.worker.ledger import Orphans, settle_orphans
from chronoq.worker.supervisor import Supervisor, SupervisorOptions
from tests.chaos.workload import app

PROCESSES = 3


def main() -> int:
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("chronoq.supervisor").setLevel(logging.INFO)

    def on_orphans(orphans: Orphans) -> None:
        settle_orphans(app.store, orphans)

    command = [sys.executable, "-m", "tests.chaos.worker_main"]
    try:
        return Supervisor(command, SupervisorOptions(PROCESSES), on_orphans=on_orphans).run()
    finally:
        app.close()


if __name__ == "__main__":
    sys.exit(main())
