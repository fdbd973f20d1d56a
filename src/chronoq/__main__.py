"""`python -m chronoq`: the chronoq command."""

from chronoq.cli.main import main

if __name__ == "__main__":
    raise SystemExit(main())
