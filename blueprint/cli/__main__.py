"""``python -m blueprint.cli``: the ``blueprint`` command."""

from blueprint.cli import run

run()
