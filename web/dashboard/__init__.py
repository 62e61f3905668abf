"""The dashboard's files: plain HTML, CSS and ES modules (no build step), plus vendored uPlot.

Everything the page loads is in this folder and served by the daemon itself (rigs are
often offline). uPlot 1.6.32 (MIT, see ``uPlot.LICENSE.txt``) is ``dist/uPlot.iife.min.js``
and ``dist/uPlot.min.css`` from ``npm pack uplot@1.6.32``, committed unmodified.
"""
