"""HTTP routes, one module per resource: speech, voices, models, health."""
