"""How due jobs reach workers: `db` (workers claim rows) or `tiered` (a scheduler tier moves due
jobs onto Redis Streams; see docs/tier.md)."""
