"""The ResourceGraph and how it is built and read: the offline engine (the program under Pulumi's mocks), stack files,
a real preview's event log, provenance (which stack-file key made a resource) and the Kubernetes manifests in it."""
