"""The chronoq command."""
