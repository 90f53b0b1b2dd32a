"""``python -m blueprint``: the same command as the ``blueprint`` console script."""

from blueprint.cli import run

run()
