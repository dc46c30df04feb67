"""``ftaudit report``: a run as one self-contained HTML page (inline SVG, CSS and JS).

Four parts: the timeline (``timeline.py``: steps across; per incarnation a lane of attempts
and a lane per cell; retries, rollbacks, crashes, faults, heals, checkpoints and restores
marked), witness coverage per committed step and metric curves (``charts.py``), and the
verifier's findings, each linked to the element of the timeline where it happens; the page
(``page.py``) assembles them. Nothing is fetched: the page opens offline.
"""

from ftaudit.verifier.render.html.page import render_html

__all__ = ["render_html"]
