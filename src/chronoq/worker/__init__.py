"""Worker processes: the claim loop, handler execution, leases and the multi-process supervisor."""
