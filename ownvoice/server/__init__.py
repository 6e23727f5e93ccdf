"""The OpenAI-compatible HTTP server (`ownvoice serve`). Needs the `server` extra.

Layout: settings (config), app (create_app), runner (uvicorn, signals), routes/ (HTTP only),
protocol (wire types), speech + streaming (serving), voicemap (which model and voice), pool +
worker (engine threads, admission), errors (one envelope), metrics, auth, hosts (Host and
Origin checks), drain (graceful shutdown).
"""

from ownvoice.server.app import create_app
from ownvoice.server.settings import ServerSettings, load_settings

__all__ = ["ServerSettings", "create_app", "load_settings"]
