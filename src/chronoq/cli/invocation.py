"""What every command handler receives: its parsed arguments, its output, and the raw argv."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass

from chronoq.cli.output import Output

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130  # the shell's convention for "stopped by SIGINT"


@dataclass(frozen=True, slots=True)
class Invocation:
    args: argparse.Namespace
    out: Output
    argv: Sequence[str]

    @property
    def dsn(self) -> str | None:
        dsn: str | None = getattr(self.args, "dsn", None)
        return dsn

    @property
    def wants_json(self) -> bool:
        return bool(getattr(self.args, "json", False))
