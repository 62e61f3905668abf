// A card as one line, for phones (and the dense desktop view of a rig with many cards): an
// 8-card rig in one screen instead of four. What is wrong is loud: the tags of its failing
// checks (BRAKE, BAR1, LOCKED, MEMTEST, LOST, Xid 31) as fleetd names them, and a critical
// or warning card never reads "ok", even from an older daemon that sends no tags.

import { el, num } from "./dom.js";

const short = new Intl.NumberFormat("en-US", { maximumFractionDigits: 0 });

function watts(draw, cap) {
  const d = draw === null || draw === undefined ? "?" : short.format(draw);
  const c = cap === null || cap === undefined ? "?" : short.format(cap);
  return `${d}/${c} W`;
}

export function cardTags(card, unlocked, xids) {
  if (Array.isArray(card.tags) && card.tags.length) return card.tags;
  if (card.state === "lost") return ["LOST"];
  const tags = [];
  if (!unlocked) tags.push("LOCKED");
  if (card.power_brake_active) tags.push("BRAKE");
  if (xids > 0) tags.push("Xid");
  if (tags.length === 0 && card.state && card.state !== "ok") tags.push(card.state.toUpperCase());
  return tags;
}

export function memoryText(card) {
  const used = card.memory_used_mib;
  const total = card.memory_total_mib;
  if (used === null || used === undefined || !total) return num(total, "MiB");
  const share = card.memory_used_pct ?? (100 * used) / total;
  return `${(used / 1024).toFixed(1)}/${(total / 1024).toFixed(0)} GiB ${short.format(share)}%`;
}

// With several engines the line names the engine on the card instead of the profile's "*".
export function compactLine(card, unlocked, xids, engine) {
  const level = card.state === "warning" ? "warn" : "bad";
  const tags = cardTags(card, unlocked, xids);
  const flags = tags.map((tag) => el("span", { class: `badge ${level}`, dataset: { tag } }, tag));
  const util = card.utilization_gpu_pct;
  return el(
    "div",
    { class: "tile-line" },
    engine
      ? el("span", { class: "line-card", dataset: { engine: engine.profile || "none" } }, `#${card.index} ${engine.profile || "none"}`)
      : el("span", { class: "line-card" }, `#${card.index}${card.in_profile ? "*" : ""}`),
    el("span", { class: "line-power" }, watts(card.power_draw_w, card.power_limit_w)),
    el("span", { class: "line-temp" }, num(card.temperature_c, "°C")),
    el("span", { class: "line-pcie" }, `G${card.pcie_gen ?? "?"}x${card.pcie_width ?? "?"}`),
    el("span", { class: "line-util" }, util === null || util === undefined ? "n/a" : `${util}%`),
    el("span", { class: "line-mem" }, memoryText(card)),
    el("span", { class: "line-flags" }, flags.length ? flags : el("span", { class: "muted" }, "ok")),
  );
}
