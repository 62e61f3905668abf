// What the charts draw over the data: limit lines (the power cap, the temperature limits)
// and the moments that explain a curve (an Xid, the latch, a reboot) on the time axis.
// Drawn on uPlot's canvas after the series, one pixel wide on the pixel grid, so each line
// is its exact colour; the chart's box records where it drew them (data-limit-rows,
// data-marker-cols: canvas pixels), which is what the browser tests read back.

import { el } from "./dom.js";
import { formatTime } from "./time.js";

export const LIMIT_COLOURS = { cap: "#e6e9ee", limit: "#c792ea", warn: "#ffb347", crit: "#ff3355" };
export const MARKER_COLOURS = { xid: "#ff3355", latch: "#ff9a9a", reboot: "#8cc4ff" };
const DRAW_ORDER = { reboot: 0, latch: 1, xid: 2 };

// The lines each chart gets from the status document ({value, label, colour}).
export function limitsOf(status) {
  const rig = (status && status.rig) || {};
  const power = [];
  // The rig's cap, and each other cap a card has of its own ([rig] power_cap_w_by_card).
  const caps = new Set(rig.power_cap_w ? [rig.power_cap_w] : []);
  for (const card of (status && status.cards) || []) if (card.power_cap_w) caps.add(card.power_cap_w);
  for (const cap of [...caps].sort((a, b) => a - b)) {
    power.push({ value: cap, label: `cap ${cap} W`, colour: LIMIT_COLOURS.cap });
  }
  // A card whose limit is off its target (an uncapped card after a boot) gets its own line.
  const others = new Set();
  for (const card of (status && status.cards) || []) {
    const limit = card.power_limit_w;
    const target = card.power_cap_w || rig.power_cap_w || 0;
    if (limit && Math.abs(limit - target) >= 1 && !caps.has(Math.round(limit))) others.add(Math.round(limit));
  }
  for (const value of [...others].sort((a, b) => a - b)) {
    power.push({ value, label: `limit ${value} W`, colour: LIMIT_COLOURS.limit });
  }
  const temperature = [];
  if (rig.temperature_warn_c) {
    temperature.push({ value: rig.temperature_warn_c, label: `warn ${rig.temperature_warn_c} °C`, colour: LIMIT_COLOURS.warn });
  }
  if (rig.temperature_crit_c) {
    temperature.push({ value: rig.temperature_crit_c, label: `crit ${rig.temperature_crit_c} °C`, colour: LIMIT_COLOURS.crit });
  }
  return { "chart-power": power, "chart-temperature": temperature };
}

function line(ctx, colour, from, to) {
  ctx.strokeStyle = colour;
  ctx.beginPath();
  ctx.moveTo(from[0], from[1]);
  ctx.lineTo(to[0], to[1]);
  ctx.stroke();
}

function label(ctx, colour, text, x, y) {
  ctx.fillStyle = colour;
  ctx.fillText(text, x, y);
}

// uPlot's draw hook for one chart: ``marks()`` gives {limits, markers} at draw time.
export function drawMarks(u, marks) {
  const { limits, markers } = marks();
  const { left, top, width, height } = u.bbox;
  const ctx = u.ctx;
  const rows = [];
  const cols = [];
  ctx.save();
  ctx.lineWidth = 1;
  ctx.font = `${Math.round(11 * window.devicePixelRatio)}px system-ui, sans-serif`;
  ctx.setLineDash([6, 4]);
  for (const limit of limits) {
    const y = Math.round(u.valToPos(limit.value, "y", true));
    if (y < top || y > top + height) continue;
    line(ctx, limit.colour, [left, y + 0.5], [left + width, y + 0.5]);
    // At the right end: the markers' labels sit at the top left of their own lines.
    ctx.textAlign = "right";
    label(ctx, limit.colour, limit.label, left + width - 4, y - 3);
    ctx.textAlign = "left";
    rows.push(y);
  }
  ctx.setLineDash([2, 3]);
  const [from, to] = [u.scales.x.min, u.scales.x.max];
  const lineHeight = 12 * window.devicePixelRatio;
  const labelled = []; // [x, row] of each label drawn, so close ones stack instead of overlap
  // An Xid and its latch land in the same pixel column: the Xid is drawn last, on top.
  const inWindow = markers.filter((m) => m.ts_s >= from && m.ts_s <= to);
  inWindow.sort((a, b) => (DRAW_ORDER[a.kind] ?? 0) - (DRAW_ORDER[b.kind] ?? 0) || a.ts_s - b.ts_s);
  for (const marker of inWindow) {
    const x = Math.round(u.valToPos(marker.ts_s, "x", true));
    const colour = MARKER_COLOURS[marker.kind] || LIMIT_COLOURS.cap;
    line(ctx, colour, [x + 0.5, top], [x + 0.5, top + height]);
    const near = labelled.filter(([other]) => Math.abs(other - x) < 48 * window.devicePixelRatio);
    const row = near.length ? Math.max(...near.map(([, r]) => r)) + 1 : 0;
    label(ctx, colour, marker.label, x + 3, top + lineHeight * (row + 1));
    labelled.push([x, row]);
    cols.push(`${marker.kind}:${x}`);
  }
  ctx.restore();
  const box = u.root.parentElement;
  box.dataset.limitRows = rows.join(",");
  box.dataset.markerCols = cols.join(",");
}

// The y range's top must show the highest line, or the line would sit off the chart.
export function highest(limits) {
  return limits.reduce((top, limit) => Math.max(top, limit.value), 0);
}

// The window's markers in words under the charts (a canvas line has no tooltip), newest first.
const LISTED = 8;

export function renderMarkerList(markers, window_) {
  const [from, to] = window_;
  const shown = markers.filter((m) => m.ts_s >= from && m.ts_s <= to).reverse();
  const list = document.getElementById("chart-markers");
  list.hidden = shown.length === 0;
  list.replaceChildren(
    ...shown.slice(0, LISTED).map((m) =>
      el("li", { dataset: { marker: m.kind } },
        el("span", { class: "swatch", style: `background:${MARKER_COLOURS[m.kind]}` }),
        `${formatTime(m.ts_s * 1000)} ${m.title}`),
    ),
    ...(shown.length > LISTED ? [el("li", { class: "muted" }, `and ${shown.length - LISTED} earlier`)] : []),
  );
}
