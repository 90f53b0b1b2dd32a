"""AWS planes: network, compute, storage and the EKS control plane."""
