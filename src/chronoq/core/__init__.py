"""Pure domain code: no I/O, no clocks of its own."""
