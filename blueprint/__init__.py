"""The ``blueprint`` tools: run the program offline and read what it builds.

One package per command family (``graph``, ``policy``, ``cost``, ``admit``, ``report``, ``preview``, ``acceptance``,
``sizing``, ``schema``), the command-line tool as one module per command (``cli``), and one folder per cloud for
what depends on the cloud (``clouds``). docs/layout.md lists every module; docs/architecture.md walks a request
through each command.
"""
