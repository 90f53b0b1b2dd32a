"""``python -m blueprint.schema``: the stack file's schema or reference without the ``blueprint`` command."""

import sys

from blueprint.schema.stack_file import main

sys.exit(main())
