"""``blueprint preview``: the resource tree grouped by plane, with the figures that matter."""
