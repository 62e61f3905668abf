// A card as one line, for phones: an 8-card rig in one screen instead of four. The CSS shows
// it in place of the tile's body under 600 px; what is wrong is loud (LOCKED, BRAKE, LOST,
// Xids) and what is fine stays short.

import { el, num } from "./dom.js";

const short = new Intl.NumberFormat("en-US", { maximumFractionDigits: 0 });

function watts(draw, cap) {
  const d = draw === null || draw === undefined ? "?" : short.format(draw);
  const c = cap === null || cap === undefined ? "?" : short.format(cap);
  return `${d}/${c} W`;
}

export function compactLine(card, unlocked, xids) {
  const flags = [];
  if (card.state === "lost") flags.push(el("span", { class: "badge bad" }, "LOST"));
  else {
    if (!unlocked) flags.push(el("span", { class: "badge bad" }, `LOCKED ${num(card.memory_total_mib)}`));
    if (card.power_brake_active) flags.push(el("span", { class: "badge bad" }, "BRAKE"));
  }
  if (xids > 0) flags.push(el("span", { class: "badge warn" }, `Xid ${xids}`));
  return el(
    "div",
    { class: "tile-line" },
    el("span", { class: "line-card" }, `#${card.index}`),
    el("span", { class: "line-power" }, watts(card.power_draw_w, card.power_limit_w)),
    el("span", { class: "line-temp" }, num(card.temperature_c, "°C")),
    el("span", { class: "line-pcie" }, `G${card.pcie_gen ?? "?"}x${card.pcie_width ?? "?"}`),
    el("span", { class: "line-flags" }, flags.length ? flags : el("span", { class: "muted" }, "ok")),
  );
}
