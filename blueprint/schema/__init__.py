"""``blueprint schema``: the stack file's JSON Schema and the spec reference, generated from the spec's models (the
generated schema and the CRDs the tools check objects against are data, in ``blueprint/schemas/``)."""
