"""``blueprint report``: the cluster, its cost and its goodput at a glance, as one self-contained HTML page
(:mod:`blueprint.report.page`), with the diagram laid out by Graphviz (:mod:`blueprint.report.diagram`) and the charts
drawn by matplotlib (:mod:`blueprint.report.charts`), both as inline SVG."""
