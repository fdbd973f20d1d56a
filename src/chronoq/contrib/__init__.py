"""Integrations with frameworks, each behind an optional extra: `chronoq.contrib.django`."""
