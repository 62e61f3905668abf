"""``GET /`` (the dashboard) and ``GET /dashboard/{name}`` (its files), all from the package.

Only the files named in ``ASSETS`` are served (never the folder's Python). The page's
Content-Security-Policy allows nothing but this origin, so a stray external URL fails in
the browser instead of quietly phoning out from an offline rig.
"""

from __future__ import annotations

from importlib.resources import files

from fastapi import APIRouter, HTTPException
from fastapi.responses import Response

ASSETS = {
    "index.html": "text/html; charset=utf-8",
    "dashboard.css": "text/css; charset=utf-8",
    "dashboard.js": "text/javascript; charset=utf-8",
    "api.js": "text/javascript; charset=utf-8",
    "render.js": "text/javascript; charset=utf-8",
    "host.js": "text/javascript; charset=utf-8",
    "memmap.js": "text/javascript; charset=utf-8",
    "checkspecs.js": "text/javascript; charset=utf-8",
    "charts.js": "text/javascript; charset=utf-8",
    "chartmarks.js": "text/javascript; charset=utf-8",
    "cardline.js": "text/javascript; charset=utf-8",
    "depthcurve.js": "text/javascript; charset=utf-8",
    "causes.js": "text/javascript; charset=utf-8",
    "controls.js": "text/javascript; charset=utf-8",
    "dom.js": "text/javascript; charset=utf-8",
    "time.js": "text/javascript; charset=utf-8",
    "traffic.js": "text/javascript; charset=utf-8",
    "crashes.js": "text/javascript; charset=utf-8",
    "bench.js": "text/javascript; charset=utf-8",
    "uPlot.iife.min.js": "text/javascript; charset=utf-8",
    "uPlot.min.css": "text/css; charset=utf-8",
    "uPlot.LICENSE.txt": "text/plain; charset=utf-8",
}
# uPlot sizes its canvas through element styles, hence 'unsafe-inline' for styles only.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'"
)
HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    # A new daemon version must not run against an old cached script.
    "Cache-Control": "no-cache",
}


def _asset(name: str) -> Response:
    media_type = ASSETS.get(name)
    if media_type is None:
        raise HTTPException(404, f"no dashboard file {name!r}")
    body = files("web.dashboard").joinpath(name).read_bytes()
    return Response(body, media_type=media_type, headers=HEADERS)


def router() -> APIRouter:
    """The dashboard at ``/`` and its files under ``/dashboard/`` (no token on loopback)."""
    routes = APIRouter(include_in_schema=False)

    @routes.get("/")
    def dashboard() -> Response:
        """The dashboard page."""
        return _asset("index.html")

    @routes.get("/dashboard/{name}")
    def dashboard_file(name: str) -> Response:
        """One of the dashboard's files."""
        return _asset(name)

    return routes
