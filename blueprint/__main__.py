"""``python -m blueprint``."""

from blueprint.cli import main

raise SystemExit(main())
