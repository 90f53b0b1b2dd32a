"""``blueprint schema [--format json|markdown] [-o FILE]``: the JSON Schema of the stack file, or the spec reference
generated from it (:mod:`blueprint.schema.stack_file` holds both the generator and this command's arguments, which
``python -m blueprint.schema`` shares)."""

from __future__ import annotations

import argparse
from typing import Any

from blueprint.schema import stack_file


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    stack_file.add_parser(sub, parents=[common]).set_defaults(handler=stack_file.run)
