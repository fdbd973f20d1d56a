"""Tiered dispatch: partition leaders move due jobs onto Redis Streams (see docs/tier.md)."""
