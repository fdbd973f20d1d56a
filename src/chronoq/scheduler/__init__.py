"""Leader-only services and the process that runs them: `chronoq scheduler`."""
