"""``blueprint sizing``: the goodput model of :mod:`components.sizing` priced from the cost engine."""
