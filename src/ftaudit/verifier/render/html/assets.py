"""The style sheet and script of the HTML report, inlined into the page (no network)."""

from __future__ import annotations

CSS = """
:root { --ok: #2e9d57; --retry: #e0a21b; --abandon: #9aa3ad; --bad: #d7263d;
        --heal: #1b9bb5; --ckpt: #2f5fd0; --extra: #8e44ad; --ink: #1f2630; --muted: #66707c; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", "DejaVu Sans", sans-serif;
       color: var(--ink); margin: 0; background: #f6f7f9; }
header { background: #fff; border-bottom: 1px solid #dde1e6; padding: 16px 24px; }
header h1 { font-size: 20px; margin: 0 0 4px; }
header .run { color: var(--muted); font-family: ui-monospace, "DejaVu Sans Mono", monospace;
              word-break: break-all; }
.verdict { display: inline-block; margin-top: 8px; padding: 3px 10px; border-radius: 4px;
           font-weight: 600; color: #fff; }
.verdict.pass { background: var(--ok); } .verdict.fail { background: var(--bad); }
.facts { margin-top: 6px; color: var(--muted); }
main { padding: 8px 24px 40px; }
section { background: #fff; border: 1px solid #dde1e6; border-radius: 6px; margin: 16px 0;
          padding: 12px 16px; }
section h2 { font-size: 16px; margin: 0 0 8px; }
.scroll { overflow-x: auto; }
.legend { display: flex; flex-wrap: wrap; gap: 14px; margin: 6px 0; color: var(--muted);
          font-size: 12px; }
.legend span::before { content: ""; display: inline-block; width: 11px; height: 11px;
          margin-right: 5px; vertical-align: -1px; border-radius: 2px; background: var(--c); }
svg text { font: 11px system-ui, "DejaVu Sans", sans-serif; fill: var(--ink); }
svg .axis text { fill: var(--muted); }
svg .lane-label { font-weight: 600; }
.att.committed { fill: var(--ok); } .att.retried { fill: var(--retry); }
.att.rolled_back { fill: var(--abandon); opacity: .55; }
.att.unfinished { fill: #fff; stroke: var(--bad); stroke-width: 1.5; stroke-dasharray: 3 2; }
.cell.normal { fill: #9ed8b1; } .cell.discarded { fill: var(--retry); }
.cell.errored { fill: #f4b4bc; } .cell.faint { opacity: .45; }
.crash { stroke: var(--bad); stroke-width: 2; }
.fault { fill: var(--bad); }
.heal { fill: var(--heal); } .ckpt { fill: var(--ckpt); }
.restore { stroke: var(--ckpt); stroke-width: 1.5; stroke-dasharray: 5 3; fill: none; }
.bad-mark { fill: none; stroke: var(--bad); stroke-width: 2.5; }
.flash { animation: flash 1.6s ease-out 2; }
@keyframes flash { 0% { stroke: #ff00aa; stroke-width: 5; } 100% { stroke-width: 0; } }
.step-col { fill: transparent; }
.step-col.target { fill: rgba(255, 0, 170, .12); }
.cov-expected { fill: none; stroke: #5b6570; stroke-width: 1; }
.cov-seen { fill: var(--ok); } .cov-missing { fill: var(--bad); } .cov-extra { fill: var(--extra); }
.cov-band { fill: rgba(215, 38, 61, .10); }
.m-committed { fill: none; stroke: #2459c6; stroke-width: 2; }
.m-abandoned { fill: none; stroke: #8a94a0; stroke-width: 1.5; stroke-dasharray: 4 3;
               opacity: .6; }
.m-retried { fill: #8a94a0; opacity: .6; }
.m-nan { stroke: var(--bad); stroke-width: 2; }
.charts { display: flex; flex-wrap: wrap; gap: 16px; }
.chart h3 { font-size: 13px; margin: 4px 0; font-family: ui-monospace, monospace; }
table { border-collapse: collapse; }
td, th { padding: 3px 10px 3px 0; text-align: left; vertical-align: top; }
th { color: var(--muted); font-weight: 600; border-bottom: 1px solid #dde1e6; }
.rule-pass { color: var(--ok); font-weight: 600; }
.rule-warn { color: var(--retry); font-weight: 600; }
.rule-fail { color: var(--bad); font-weight: 600; }
ol.findings li { margin: 8px 0; }
ol.findings .where { color: var(--muted); font-size: 12px; }
ol.findings .code { font-weight: 600; }
ol.findings .msg { white-space: pre-wrap; }
ol.findings li:target { background: #fff3c4; }
.none { color: var(--muted); }
"""

JS = """
(function () {
  "use strict";
  function show(id) {
    var el = document.getElementById(id);
    if (!el) { return false; }
    el.scrollIntoView({block: "center", inline: "center"});
    var marks = [el];
    if (el.classList.contains("step-col")) { el.classList.add("target"); }
    marks.forEach(function (m) {
      m.classList.remove("flash");
      void m.getBoundingClientRect();
      m.classList.add("flash");
    });
    return true;
  }
  document.querySelectorAll("a[data-target]").forEach(function (a) {
    a.addEventListener("click", function (ev) {
      if (show(a.getAttribute("data-target"))) {
        ev.preventDefault();
        history.replaceState(null, "", "#" + a.getAttribute("data-target"));
      }
    });
  });
  document.querySelectorAll("[data-finding]").forEach(function (el) {
    el.style.cursor = "pointer";
    el.addEventListener("click", function () {
      location.hash = el.getAttribute("data-finding");
    });
  });
  if (location.hash.length > 1) { show(decodeURIComponent(location.hash.slice(1))); }
  document.body.setAttribute("data-report-ready", "1");
})();
"""
