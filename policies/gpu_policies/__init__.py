"""CrossGuard policies for the GPU cluster blueprint: billing, quotas, telemetry, security, fabric, data safety."""
