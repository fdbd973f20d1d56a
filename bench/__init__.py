"""The chronoq benchmark suite: chronoq, the bare SQL limit and peers, measured in one run."""
