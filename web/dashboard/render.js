// Turns API documents into DOM (through dom.js's ``el``: text only, never markup).

import { causeDetail, causesOf } from "./causes.js";
import { cardTags, compactLine, memoryText } from "./cardline.js";
import { checkAt, tagsAt } from "./checkspecs.js";
import { blockedActions, gate } from "./controls.js";
import { depthCurve } from "./depthcurve.js";
import { el, num, numberFormat } from "./dom.js";
import { formatTime } from "./time.js";

export function duration(seconds) {
  if (seconds === null || seconds === undefined || seconds < 0) return "n/a";
  const s = Math.floor(seconds);
  const d = Math.floor(s / 86400);
  const h = Math.floor((s % 86400) / 3600);
  const m = Math.floor((s % 3600) / 60);
  if (d > 0) return `${d}d ${h}h`;
  if (h > 0) return `${h}h ${m}m`;
  if (m > 0) return `${m}m ${s % 60}s`;
  return `${s}s`;
}

export const timeOf = formatTime;

// ``cards 0-3``, ``cards 0, 2, 5-7``: the words hwcheck/card_ranges.py gives the same cards.
export function cardsText(cards) {
  const sorted = [...new Set(cards)].sort((a, b) => a - b);
  const runs = [];
  for (const card of sorted) {
    const last = runs[runs.length - 1];
    if (last && card === last[last.length - 1] + 1) last.push(card);
    else runs.push([card]);
  }
  const parts = runs.map((run) => (run.length > 2 ? `${run[0]}-${run[run.length - 1]}` : run.join(", ")));
  return `${sorted.length === 1 ? "card" : "cards"} ${parts.join(", ")}`;
}

// --- verdict -------------------------------------------------------------------------------

export function renderVerdict(status) {
  const overall = status.overall || "unknown";
  const box = document.getElementById("verdict");
  box.className = `verdict verdict-${overall}`;
  box.dataset.overall = overall;
  document.getElementById("verdict-word").textContent = overall.toUpperCase();
  const causes = causesOf(status);
  let detail;
  if (status.recovery && status.recovery.reboot_required) {
    detail = `reboot required: ${status.recovery.reason || "see below"}`;
  } else if (causes.length > 0) {
    detail = causeDetail(causes);
  } else if (overall === "unknown") {
    detail = (status.rig && status.rig.stale_reason) || "no poll yet";
  } else {
    const engine = status.serving ? status.serving.state : "unknown";
    detail = `${(status.cards || []).length} cards healthy, engine ${engine}`;
  }
  document.getElementById("verdict-detail").textContent = detail;
  const name = status.rig && status.rig.name;
  document.title = name ? `${overall.toUpperCase()} - ${name} - cmpfleet` : `${overall.toUpperCase()} - cmpfleet`;
}

// The latch's advice comes typed (recovery.advice_kind) with its text from the daemon's one table.
const ADVICE_KIND = {
  warm_reboot: "Warm reboot:",
  cold_power_cycle: "Cold power cycle:",
  take_card_out: "Take the card out:",
};

export function renderReboot(status) {
  const recovery = status.recovery || {};
  // What the daemon did after this boot's reboot (caps, checks, probe, engine), if any.
  const bringUp = recovery.bring_up;
  const thisBoot = bringUp && status.rig && bringUp.boot_id === status.rig.boot_id;
  const line = document.getElementById("bring-up");
  line.hidden = !(thisBoot && bringUp.summary && !recovery.reboot_required);
  if (!line.hidden) line.textContent = `After the reboot: ${bringUp.summary}`;
  const box = document.getElementById("reboot");
  box.hidden = !recovery.reboot_required;
  if (!recovery.reboot_required) return;
  document.getElementById("reboot-reason").textContent = recovery.reason || "(no reason given)";
  // Past a warm reboot (a cold power cycle, the card out), the button power-cycles.
  const cold = Boolean(recovery.advice_kind) && recovery.advice_kind !== "warm_reboot";
  document.getElementById("reboot-kind").textContent = ADVICE_KIND[recovery.advice_kind] || "Warm reboot:";
  document.getElementById("reboot-advice").textContent = recovery.advice || "";
  document.getElementById("reboot-way-out").textContent = recovery.way_out ? `Ways out: ${recovery.way_out}.` : "";
  const confirm = document.getElementById("reboot-confirm");
  confirm.dataset.cold = String(cold);
  confirm.textContent = cold ? "Power-cycle the rig\u2026" : "Reboot the host\u2026";
  document.getElementById("reboot-since").textContent = recovery.since
    ? `latched since ${timeOf(recovery.since)}`
    : "";
}

// The rig's drain: its guard answers 503 "draining" so load balancers send traffic elsewhere.
export function renderDrain(status) {
  const drain = status.drain || {};
  const line = document.getElementById("drain");
  line.hidden = !drain.draining;
  if (line.hidden) return;
  const running = drain.in_flight === null || drain.in_flight === undefined
    ? "no guard" : drain.quiet ? "quiet" : `${drain.in_flight} running`;
  const why = drain.reason ? ` (${drain.reason})` : "";
  line.textContent = `Draining since ${timeOf(drain.since)} by ${drain.by}${why}: ${running}, ` +
    `grace ${drain.grace_left_s} s left. fleetctl undrain ends it.`;
}

// --- card tiles ----------------------------------------------------------------------------

function checksByCard(checks) {
  const found = new Map();
  for (const check of checks || []) {
    if (check.card === null || check.card === undefined) continue;
    found.set(`${check.id}/${check.card}`, check);
  }
  return found;
}

function metric(label, value, opts) {
  const o = opts || {};
  return el(
    "div",
    { class: `metric ${o.level || ""}`, title: o.title, dataset: { metric: o.name || label } },
    el("span", { class: "label" }, label),
    el("span", { class: `value ${o.big ? "big" : ""}` }, value),
  );
}

function level(check) {
  if (!check || check.severity === "ok") return "";
  return check.severity === "critical" ? "bad" : "warn";
}

function link(gen, width) {
  return `Gen${gen ?? "?"} x${width ?? "?"}`;
}

// ``place``: where a tile draws a check (its spec's ``drawn_at``, GET /api/v1/checks).
function tile(card, checks, engine) {
  const get = (place) => checks.get(`${checkAt(place)}/${card.index}`);
  const vram = get("card_vram");
  const unlocked = vram ? vram.severity === "ok" : card.memory_total_mib >= 60000;
  const lost = card.state === "lost";
  const badges = lost
    ? [el("span", { class: "badge bad", dataset: { badge: "lost" } }, "LOST")]
    : [
        el(
          "span",
          { class: `badge ${unlocked ? "good" : "bad"}`, dataset: { badge: "vram" }, title: vram && vram.message },
          `${unlocked ? "UNLOCKED" : "LOCKED"} ${num(card.memory_total_mib, "MiB")}`,
        ),
        card.power_brake_active
          ? el("span", { class: "badge bad", dataset: { badge: "brake" } }, "POWER BRAKE")
          : el("span", { class: "badge good", dataset: { badge: "brake" } }, "no brake"),
      ];
  const draw = card.power_draw_w;
  const cap = card.power_limit_w;
  const share = draw !== null && cap ? Math.min(100, (100 * draw) / cap) : 0;
  const pcie = get("card_pcie");
  const baseline =
    card.pcie_baseline_gen !== undefined && card.pcie_baseline_gen !== null
      ? ` · baseline ${link(card.pcie_baseline_gen, card.pcie_baseline_width)}`
      : "";
  const xids = card.xid_since_boot || 0;
  // The failing checks the vram, brake and lost badges do not already say (BAR1, MEMTEST, Xid 31).
  const shown = tagsAt(["card_vram", "card_brake", "card_lost_badge"]);
  const tagBadges = cardTags(card, unlocked, xids)
    .filter((tag) => !shown.has(tag))
    .map((tag) => el("span", { class: `badge ${card.state === "warning" ? "warn" : "bad"}`, dataset: { badge: "tag", tag } }, tag));
  const profileBadge = card.in_profile === true
    ? el("span", { class: "badge info", dataset: { badge: "profile" }, title: "the profile in force runs on this card" }, "in profile")
    : null;
  return el(
    "article",
    {
      class: `tile state-${card.state}${card.in_profile ? " in-profile" : ""}`,
      dataset: { card: card.index, state: card.state, inProfile: String(card.in_profile ?? "") },
    },
    el(
      "div",
      { class: "tile-head" },
      el("span", { class: "tile-title" }, `Card ${card.index}`),
      engine
        ? el(
          "span",
          { class: "tile-engine", dataset: { engine: engine.profile || "none" }, title: "the engine that runs on this card" },
          engine.profile || "none",
        )
        : null,
      el("span", { class: "tile-bus" }, card.pci_bus_id),
    ),
    compactLine(card, unlocked, xids, engine),
    el("div", { class: "badges" }, badges, tagBadges, profileBadge),
    card.lost_reason ? el("p", { class: "muted" }, card.lost_reason) : null,
    metric("Power", `${num(draw)} / ${num(cap, "W")}`, {
      name: "power", big: true, level: level(get("card_power")), title: get("card_power")?.message,
    }),
    el("div", { class: "bar", "aria-hidden": "true" }, el("span", { style: `width:${share.toFixed(0)}%` })),
    metric("Temperature", num(card.temperature_c, "°C"), {
      name: "temperature", big: true, level: level(get("card_temperature")),
    }),
    metric("SM clock", num(card.sm_clock_mhz, "MHz"), { name: "clock", level: level(get("card_brake")) }),
    metric(`PCIe${baseline}`, link(card.pcie_gen, card.pcie_width), {
      name: "pcie", level: level(pcie), title: pcie && pcie.message,
    }),
    metric("Xids since boot", String(xids), {
      name: "xids", big: true, level: xids > 0 ? level(get("card_xids")) || "warn" : "",
    }),
    ...activity(card),
  );
}

// What nvitop shows: utilisation, memory used and its share, PCIe traffic, the processes.
function rate(kib) {
  if (kib === null || kib === undefined) return "n/a";
  if (kib >= 1024 * 1024) return `${(kib / 1024 / 1024).toFixed(1)} GiB/s`;
  if (kib >= 1024) return `${(kib / 1024).toFixed(1)} MiB/s`;
  return `${kib} KiB/s`;
}

function activity(card) {
  if (card.state === "lost") return [];
  const util = card.utilization_gpu_pct;
  const memUtil = card.utilization_memory_pct;
  const used = card.memory_used_pct ?? 0;
  const processes = card.processes || [];
  return [
    metric("GPU / memory busy", `${util ?? "n/a"}${util === null || util === undefined ? "" : " %"} / ${memUtil ?? "n/a"}${memUtil === null || memUtil === undefined ? "" : " %"}`, { name: "util" }),
    metric("Memory used", memoryText(card), { name: "memory-used" }),
    el("div", { class: "bar", "aria-hidden": "true" }, el("span", { style: `width:${Math.min(100, used).toFixed(0)}%` })),
    metric("PCIe tx / rx", `${rate(card.pcie_tx_kib_s)} / ${rate(card.pcie_rx_kib_s)}`, { name: "pcie-traffic" }),
    el(
      "ul",
      { class: "procs", dataset: { metric: "processes" } },
      card.processes === null || card.processes === undefined
        ? el("li", { class: "muted" }, "processes: not reported")
        : processes.length === 0
          ? el("li", { class: "muted" }, "no processes")
          : processes.map((p) =>
              el(
                "li",
                { dataset: { pid: p.pid } },
                `${p.pid} ${p.name || "?"}${p.container ? ` (${p.container})` : ""} · ${num(p.used_memory_mib, "MiB")}`,
              ),
            ),
    ),
  ];
}

const DENSE_FROM_CARDS = 5;

// The reader's choice (kept in this browser), else lines from five cards on.
export function denseChoice(count) {
  const chosen = window.localStorage.getItem("cmpfleet.cards-view");
  if (chosen === "lines") return true;
  if (chosen === "tiles") return false;
  return count >= DENSE_FROM_CARDS;
}

export function renderCards(status) {
  const checks = checksByCard(status.checks);
  const box = document.getElementById("cards");
  const engines = enginesOf(status);
  const engineOf = (card) =>
    engines.length > 1 ? engines.find((e) => (e.cards || []).includes(card.index)) : undefined;
  const tiles = (status.cards || []).map((card) => tile(card, checks, engineOf(card)));
  if (tiles.length === 0) tiles.push(el("p", { class: "panel muted" }, "no cards reported yet"));
  // More than four cards: one line each (the phone's lines, with utilisation and memory),
  // so an 8-card rig leaves the engine and the checks on a laptop's first screen.
  const dense = denseChoice(tiles.length);
  box.classList.toggle("dense", dense);
  box.replaceChildren(...tiles);
  const toggle = document.getElementById("cards-view");
  if (toggle) {
    toggle.textContent = dense ? "Tiles" : "Lines";
    toggle.title = dense ? "show a tile per card" : "show a line per card";
  }
}

// --- engine --------------------------------------------------------------------------------

// One box per engine the daemon runs (`engines`; `serving` alone from an older daemon): the
// first fills the Engine panel as it always did, each further one gets its own titled box.
export function enginesOf(status) {
  if (status.engines && status.engines.length) return status.engines;
  return status.serving ? [status.serving] : [];
}

export function renderEngines(status, nowMs) {
  const engines = enginesOf(status);
  const several = engines.length > 1;
  renderEngine(engines[0], nowMs);
  const head = document.getElementById("engine-title");
  head.textContent = several ? engineTitle(engines[0]) : "Engine";
  const more = document.getElementById("engine-more");
  more.replaceChildren(
    ...engines.slice(1).map((s) => {
      const box = el("dl", { class: "facts" });
      fillEngine(box, s, nowMs);
      return el(
        "section",
        { class: "engine-box", dataset: { engine: s.profile || "none", state: s.state || "unknown" } },
        el("h3", {}, engineTitle(s)),
        box,
        engineButtons(status, s),
      );
    }),
  );
  document.getElementById("engine").dataset.engine = several ? engines[0].profile || "none" : "";
}

// A side engine's own Start, Stop and Restart (``fleetctl start|stop|restart NAME``), each
// enabled only when it can succeed for that engine, as the primary's buttons are; a click
// is handled by the dashboard (``data-engine-action``), the box being drawn anew each poll.
function engineButtons(status, s) {
  const why = blockedActions(status, s);
  const row = el("div", { class: "buttons" });
  for (const [action, label] of [["start", "Start"], ["stop", "Stop"], ["restart", "Restart"]]) {
    const button = el("button", { type: "button", dataset: { engineAction: action, engine: s.profile || "" } }, label);
    gate(button, why[action]);
    row.append(button);
  }
  return row;
}

function engineTitle(s) {
  return `Engine ${s.profile || "none"} · ${s.state || "unknown"}`;
}

export function renderEngine(serving, nowMs) {
  fillEngine(document.getElementById("engine-facts"), serving, nowMs);
}

function fillEngine(box, serving, nowMs) {
  const s = serving || {};
  const m = s.metrics || {};
  const since = s.since ? (nowMs - new Date(s.since).getTime()) / 1000 : null;
  const up = s.state === "ready" || s.state === "starting" || s.state === "unhealthy";
  const facts = [
    ["Profile", s.profile || "none", "profile"],
    ["Runs on", s.cards && s.cards.length ? cardsText(s.cards) : "n/a", "cards"],
    ["State", s.state || "unknown", "state"],
    [up ? "Uptime" : "For", duration(since), "uptime"],
    ["Tokens/s", num(m.generation_tokens_per_s), "tokens"],
    ["Running / waiting", `${num(m.requests_running)} / ${num(m.requests_waiting)}`, "requests"],
    ["KV cache", m.kv_cache_usage_pct === undefined ? "n/a" : num(m.kv_cache_usage_pct, "%"), "kv"],
    ...engineFigures(m),
    ["Restarts", num(s.restarts), "restarts"],
    ["Last crash", s.crash_class || "none", "crash"],
    ["PID", s.pid ?? "none", "pid"],
  ];
  box.dataset.state = s.state || "unknown";
  box.replaceChildren(
    ...facts.map(([label, value, name]) =>
      el("div", { dataset: { fact: name } }, el("dt", {}, label), el("dd", {}, value)),
    ),
  );
  const sw = s.switch && ["stopping", "starting"].includes(s.switch.phase) ? s.switch : null;
  const drift = s.drift
    ? `not adopted: pid ${s.drift.pid} runs another recipe than profile ${s.profile} (left running)`
    : null;
  const refused = s.refusal && !["ready", "starting"].includes(s.state)
    ? `last start refused (${(s.refusal.codes || []).join(", ") || "refused"}): ${s.refusal.message}`
    : null;
  const why = [
    sw ? `switching ${sw.previous} -> ${sw.profile}: ${sw.phase}` : null,
    drift,
    refused ? null : s.reason,
    refused,
    ...(s.last_refusal || []).map((r) => r.message),
  ]
    .filter(Boolean)
    .join("; ");
  if (why) {
    box.append(el("div", { class: "why", dataset: { fact: "why" } }, el("dt", {}, "Why"), el("dd", {}, why)));
  }
}

// The engine's own figures (its vLLM metrics over the window); n/a when it has not said.
function engineFigures(m) {
  const seconds = (v) => (v === null || v === undefined ? "n/a" : num(v, "s"));
  const pct = (v) => (v === null || v === undefined ? "n/a" : `${numberFormat.format(100 * v)} %`);
  const pair = (a, b, show) => `${show(a)} / ${show(b)}`;
  return [
    ["TTFT p50 / p95", pair(m.ttft_p50_s, m.ttft_p95_s, seconds), "ttft"],
    ["Inter-token p50 / p95", pair(m.itl_p50_s, m.itl_p95_s, seconds), "itl"],
    ["Draft acceptance", pct(m.spec_acceptance_ratio), "acceptance"],
    ["Mean accepted length", m.spec_mean_accepted_tokens == null ? "n/a" : num(m.spec_mean_accepted_tokens), "accepted"],
    ["Prefix cache hits", pct(m.prefix_cache_hit_ratio), "prefix"],
    ["Preemptions", m.preemptions_total == null ? "n/a" : num(m.preemptions_total), "preemptions"],
  ];
}

// --- canaries -----------------------------------------------------------------------------

// Badges take the severity colours: a failure is as loud as a critical check.
const CANARY_LEVEL = { pass: "ok", warn: "warning", fail: "critical", skipped: "unknown", stale: "unknown" };

function canaryFigure(canary) {
  if (canary.figure === null || canary.figure === undefined) return "n/a";
  if (canary.unit === "ratio") return `${numberFormat.format(100 * canary.figure)} %`;
  return num(canary.figure, canary.unit);
}

export function renderCanaries(status, nowMs) {
  const canaries = status.canaries || [];
  document.getElementById("canaries").hidden = canaries.length === 0; // an older daemon
  document.getElementById("canary-list").replaceChildren(
    ...canaries.map((canary) => {
      const age = canary.ts ? `${duration((nowMs - new Date(canary.ts).getTime()) / 1000)} ago` : "not run";
      return el(
        "li",
        { dataset: { canary: canary.name, result: canary.result } },
        el("strong", { class: "name" }, canary.name),
        el("span", { class: `sev ${CANARY_LEVEL[canary.result] || "unknown"}` }, canary.result),
        el("span", { class: "figure" }, canaryFigure(canary)),
        el("span", { class: "when" }, age),
        canary.result !== "pass" && canary.advice ? el("span", { class: "advice" }, canary.advice) : null,
        depthCurve(canary),
      );
    }),
  );
  const seen = (status.log_signatures || []).filter((s) => s.this_hour > 0);
  const line = document.getElementById("log-signatures");
  line.hidden = seen.length === 0;
  line.textContent = `Engine log this hour: ${seen.map((s) => `${s.name} ${s.this_hour}`).join(" · ")}`;
}

// --- events --------------------------------------------------------------------------------

// Only warnings and criticals ask a person to acknowledge them; news (info, ok) does not.
const ACKABLE = new Set(["warning", "critical"]);

function ackControl(event) {
  if (event.acked) return el("span", { class: "muted" }, "acked");
  if (!ACKABLE.has(event.severity)) return el("span");
  return el("button", { type: "button", class: "small", dataset: { ack: event.id } }, "Ack");
}

export function renderEvents(events) {
  const list = document.getElementById("event-list");
  if (events.length === 0) {
    list.replaceChildren(el("li", { class: "muted" }, "no events match"));
    return;
  }
  list.replaceChildren(
    ...events.map((event) =>
      el(
        "li",
        { class: event.acked ? "acked" : "", dataset: { event: event.id, kind: event.kind } },
        el("span", { class: `sev ${event.severity}` }, event.severity),
        el(
          "span",
          { class: "when" },
          `${timeOf(event.ts)} · ${event.kind}${event.card === null ? "" : ` · card ${event.card}`}`,
        ),
        ackControl(event),
        el("span", { class: "msg" }, event.message),
      ),
    ),
  );
}
