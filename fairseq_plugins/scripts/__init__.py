"""Command-line tools installed as console scripts."""
