"""GPU cluster blueprint: Pulumi components for the compute, fabric, storage and control planes."""
