"""A benchmark worker process: `python -m bench.worker SYSTEM TARGET_JSON CONFIG_JSON MODE`.

It builds the system's worker, prints `ready`, waits for a line on stdin, then runs until
SIGTERM. In `record` mode every job start prints its lateness in seconds, one per line.
"""

from __future__ import annotations

import json
import sys

from bench.systems import load
from bench.systems.base import Recorder, Target, WorkerConfig


def main(argv: list[str]) -> None:
    name, target_json, config_json, mode = argv
    system = load(name)
    target = Target(**json.loads(target_json))
    config = WorkerConfig(**json.loads(config_json))

    def ready() -> None:
        sys.stdout.write("ready\n")
        sys.stdout.flush()
        sys.stdin.readline()

    system.serve(target, config, Recorder(record=mode == "record"), ready)


if __name__ == "__main__":
    main(sys.argv[1:])
