"""The fast decode path: static KV caches, device-side sampling, CUDA graphs where available.

It produces the same greedy codes as the eager parity path (ownvoice.engine.decode), which stays
beside it; tests keep the two equal.
"""
