"""Home Assistant's side: the Wyoming protocol as a front end of the serving core.

    model ← engine ← service ← wyoming      (no HTTP framework, no pydantic here)

`ownvoice serve` starts it beside the HTTP API when the config has a `wyoming:` block
(listener.py). Every connection (connection.py) shares the HTTP API's models, queues, batches
and voice library: a voice cloned over HTTP is listed in the next `describe` (info.py).
"""

from ownvoice.wyoming.listener import WyomingOptions, WyomingServer

__all__ = ["WyomingOptions", "WyomingServer"]
