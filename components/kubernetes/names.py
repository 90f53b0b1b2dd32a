"""Names the platform gives its objects that the readers of a saved graph look for (the preview's and the report's
platform view): in a module that imports nothing, so that reading a graph does not load the platform's builders."""

from __future__ import annotations

# The LocalQueue (and namespace) of the acceptance runs (components/kubernetes/objects/acceptance.py).
ACCEPTANCE_QUEUE = "gpu-acceptance"
