"""Day two: what a change does to a running cluster, read from two graphs (before and after): the resources the
provider replaces and the fields that force it (and whether they hold data or identity), the node groups that roll,
in what order, and what a running job loses; and whether a version change is one step EKS and GKE take."""
