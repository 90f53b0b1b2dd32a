"""The policy pack run offline: the runner (the pack's own analyzer on a graph), its catalog (``--list``,
``--explain``), the example violations it explains with, and the renderers (table, Markdown, JSON, SARIF)."""
