"""Prometheus metrics (`chronoq.observability.metrics`) and structured logs
(`chronoq.observability.logs`) for the worker, the scheduler and the enqueue API."""
