def main() -> None:
    raise SystemExit(0)
