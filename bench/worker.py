"""A benchmark worker process: `python -m bench.worker SYSTEM TARGET_JSON CONFIG_JSON MODE
[LIMIT_JSON]`.

It builds the system's worker, prints `ready`, waits for a line on stdin, then runs until
SIGTERM. In `record` mode every job start prints its lateness in seconds, one per line; in
`stream` mode the same lines go out together every STREAM_FLUSH seconds. In
`herd` mode the worker declares the rate limit of LIMIT_JSON on the herd queue and serves that
queue alone; it prints nothing, because the herd figure reads start times from the database.
"""

from __future__ import annotations

import json
import sys

from bench.systems import load
from bench.systems.base import RateLimit, Recorder, Target, WorkerConfig

# The steady stream's workers write their start lines in batches this often (seconds): far
# below the stream's length, so the harness still sees the starts per second it counts.
STREAM_FLUSH = 0.02


def main(argv: list[str]) -> None:
    name, target_json, config_json, mode, *rest = argv
    system = load(name)
    target = Target(**json.loads(target_json))
    config = WorkerConfig(**json.loads(config_json))

    def ready() -> None:
        sys.stdout.write("ready\n")
        sys.stdout.flush()
        sys.stdin.readline()

    if mode == "herd":
        system.serve_herd(target, config, RateLimit(**json.loads(rest[0])), ready)
    elif mode == "stream":
        system.serve(target, config, Recorder(record=True, flush_every=STREAM_FLUSH), ready)
    else:
        system.serve(target, config, Recorder(record=mode == "record"), ready)


if __name__ == "__main__":
    main(sys.argv[1:])
