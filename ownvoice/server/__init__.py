"""The OpenAI-compatible HTTP server (`ownvoice serve`). Needs the `server` extra.

Layout: settings (config), app (create_app), runner (uvicorn, signals), routes/ (HTTP only),
protocol (wire types), streaming (an admitted request as an HTTP response), errors (statuses and
one envelope), auth, hosts (Host and Origin checks), drain (graceful shutdown). Models,
admission, voices, planning and the per-engine schedulers are the serving core's
(ownvoice.service), shared with the other front ends.
"""

from ownvoice.server.app import create_app
from ownvoice.server.settings import ServerSettings, load_settings

__all__ = ["ServerSettings", "create_app", "load_settings"]
