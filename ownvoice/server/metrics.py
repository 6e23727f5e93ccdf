"""The server's metrics are the service's (ownvoice.service.metrics), served at /metrics."""

from ownvoice.service.metrics import Metrics as ServerMetrics

__all__ = ["ServerMetrics"]
