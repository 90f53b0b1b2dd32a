"""cel-python's CEL grammar, analysed once per machine instead of once per process.

cel-python builds its LALR parser with lark on first use (``celpy.celparser.CELParser``), which costs about 0.19 s of
CPU in every process that evaluates a ValidatingAdmissionPolicy (``blueprint admit``, the policy pack's admission
guards): more than the admission work itself (issue 37). lark can keep the analysed grammar in a file (its ``cache``
option: "Cache the results of the Lark grammar analysis, for x2 to x3 faster loading. LALR only"), and checks on
load that the file was made from the same grammar, options, lark version and Python version, building afresh when
not. cel-python does not expose that option, so :func:`warm` builds cel-python's own parser, with cel-python's own
arguments, while its module's ``Lark`` adds ``cache``: the parser in use is the one cel-python would have built.

The file lives beside the graph cache (:mod:`blueprint.graph.cache`), in a folder that only its user may write (lark
loads the file with pickle: :func:`blueprint.graph.cache.usable` refuses a folder another user owns or may write, and
a symbolic link in the file's place is not followed), under one fixed name: lark hashes its ``cache`` argument with
the grammar, so a file written under a temporary name and renamed would never match. lark writes it in place; a
process that reads a half-written or damaged file builds the grammar afresh (lark catches the load's error) and
writes the file again. Nothing is read or written when ``BLUEPRINT_NO_CACHE`` is set, as in the test suite.
"""

from __future__ import annotations

import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from blueprint.graph import cache


def cache_file() -> Path:
    """The analysed grammar's file: named by the lark, cel-python and Python versions it was made with."""
    try:
        celpy_version = version("cel-python")
    except PackageNotFoundError:  # pragma: no cover - a source checkout of cel-python
        celpy_version = "unknown"
    import lark

    python = "{}.{}".format(*sys.version_info[:2])
    return cache.cache_dir() / f"cel-grammar-lark{lark.__version__}-celpy{celpy_version}-py{python}.lark"


def warm() -> None:
    """Give cel-python its parser from the grammar file (made on the first call on this machine); a no-op when the
    cache is off or the parser exists."""
    import celpy
    from celpy import celparser

    if celparser.CELParser.CEL_PARSER is not None or not cache.enabled():
        return
    target = cache_file()
    if not cache.usable(target.parent) or target.is_symlink():
        return  # no folder of this user's alone: cel-python builds its parser as it always does
    namespace = vars(celparser)  # the module's globals: where CELParser looks ``Lark`` up
    real = namespace["Lark"]

    def with_cache(*args: Any, **kwargs: Any) -> Any:
        return real(*args, cache=str(target), **kwargs)

    namespace["Lark"] = with_cache
    try:
        # The tree class celpy.Environment() passes for its default runner (the one admit and the pack use).
        celparser.CELParser(tree_class=celpy.InterpretedRunner.tree_node_class)
    finally:
        namespace["Lark"] = real
