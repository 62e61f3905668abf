// The host panel: what the boot chain, the nvidia module and the bus look like, against
// the baseline the host checks judge
// (docs/reference.md "What cmpfleet checks on the host").
// One row per card: BAR1, VBIOS, max memory clock, bound driver, bridge, PCIe replays
// and AER counts.

import { checksAt, hostPanelChecks } from "./checkspecs.js";
import { el, num } from "./dom.js";
import { renderMemoryMaps } from "./memmap.js";

const RANK = { ok: 0, warning: 1, critical: 2 };

// The worst host-check severity among ``checks`` for ``card`` (undefined: any card); the
// host checks are the ones whose spec says the Host panel draws them (GET /api/v1/checks).
function worst(checks, card) {
  const hostChecks = hostPanelChecks();
  let level = "ok";
  for (const check of checks || []) {
    if (!hostChecks || !hostChecks.has(check.id) || (card !== undefined && check.card !== card)) continue;
    if ((RANK[check.severity] ?? 0) > RANK[level]) level = check.severity;
  }
  return level;
}

function fact(label, value, level) {
  return el("div", { class: level && level !== "ok" ? level : null },
    el("dt", {}, label), el("dd", {}, value ?? "n/a"));
}

function p2pSummary(pairs) {
  if (!pairs || pairs.length === 0) return "n/a";
  const ok = pairs.filter((pair) => pair.status === "ok").length;
  return `${ok} of ${pairs.length} pairs OK`;
}

export function renderHost(status) {
  const section = document.getElementById("host");
  const host = status.host;
  section.hidden = !host; // an older daemon
  if (!host) return;
  const facts = host.facts || {};
  const base = host.baseline || {};
  const boot = facts.default_boot || {};
  const overall = worst(status.checks);
  document.getElementById("host-facts").replaceChildren(
    fact("Running kernel", facts.running_kernel, worst(checksAt(status.checks, "host_running_kernel"), null)),
    fact("Next boot", boot.kernel),
    fact("Baseline kernel", base.kernel_release || "not recorded"),
    fact("nvidia module", facts.module_srcversion, worst(checksAt(status.checks, "host_module"), null)),
    fact("P2P", p2pSummary(facts.p2p), worst(checksAt(status.checks, "host_p2p"))),
    fact("Tensor parallel", host.tensor_parallel_size),
  );
  document.getElementById("host-verdict").className = `sev ${overall}`;
  document.getElementById("host-verdict").textContent = overall;
  const rows = (status.cards || []).map((card) => {
    const aer = card.aer || {};
    return el(
      "tr",
      { dataset: { card: card.index }, class: worst(status.checks, card.index) },
      el("td", {}, String(card.index)),
      el("td", { class: "bar1" }, num(card.bar1_total_mib, "MiB")),
      el("td", {}, card.vbios_version ?? "n/a"),
      el("td", {}, num(card.memory_clock_max_mhz, "MHz")),
      el("td", {}, card.driver ?? "none"),
      el("td", {}, (card.bridges || [])[0] ?? "n/a"),
      el("td", { class: "replays" }, num(card.pcie_replay_count)),
      el("td", {}, `${num(aer.correctable)} / ${num(aer.nonfatal)} / ${num(aer.fatal)}`),
    );
  });
  document.getElementById("host-cards").replaceChildren(...rows);
  renderMemoryMaps(status);
}
