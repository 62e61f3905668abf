// The traffic panel: what the traffic guard sees of live agent traffic (GET /api/v1/guard).
// Sessions of the last hour, deepest first, with their context depth and the leaks and
// loops their replies showed, the turns the guard cleaned, the fair queue's depth and wait;
// hidden on a rig without the guard (the route answers 409).

import { el, num } from "./dom.js";

const SHOWN = 12;

function signWords(signs) {
  const seen = Object.entries(signs || {}).filter(([, count]) => count > 0);
  return seen.length ? seen.map(([name, count]) => `${name} ${count}`).join(", ") : "clean";
}

// The fair queue: how many wait now, and the mean wait of those that waited.
function queueWords(queue) {
  if (!queue || (!queue.depth && !queue.waited)) return "";
  const mean = queue.waited ? (queue.wait_s_total / queue.waited) * 1000 : 0;
  return ` · queue ${num(queue.depth || 0)} waiting, ${num(queue.waited || 0)} waited (mean ${mean.toFixed(0)} ms)` +
    (queue.timed_out ? `, ${num(queue.timed_out)} refused 429` : "");
}

function repairWords(totals) {
  const done = Object.entries(totals || {}).filter(([, count]) => count > 0);
  return done.length ? ` · repairs: ${done.map(([name, count]) => `${name} ${count}`).join(", ")}` : "";
}

export function renderTraffic(guard) {
  const panel = document.getElementById("traffic");
  panel.hidden = !guard;
  if (!guard) return;
  const counters = guard.counters || {};
  document.getElementById("traffic-summary").textContent =
    `guard on ${guard.listen}: ${guard.up ? "up" : "DOWN"} · ${num(counters.requests || 0)} requests · ` +
    `${guard.sessions.length} sessions · ${guard.leaks_last_hour} leaks and ${guard.loops_last_hour} loops in the last hour` +
    (counters.cap_refused ? ` · ${num(counters.cap_refused)} over the cap` : "") +
    queueWords(guard.queue) +
    repairWords((guard.repairs || {}).totals);
  const sessions = [...guard.sessions].sort((a, b) => b.depth_tokens - a.depth_tokens).slice(0, SHOWN);
  document.getElementById("traffic-sessions").replaceChildren(
    ...sessions.map((session) =>
      el(
        "tr",
        { dataset: { session: session.id } },
        el("td", {}, el("code", {}, session.id)),
        el("td", {}, session.key),
        el("td", {}, num(session.depth_tokens, "tokens")),
        el("td", {}, num(session.requests)),
        el("td", { class: session.leaks_last_hour ? "sev warning" : "" }, num(session.leaks_last_hour)),
        el("td", { class: session.loops_last_hour ? "sev warning" : "" }, num(session.loops_last_hour)),
        el("td", { class: "muted" }, signWords(session.signs) +
          (session.cleaned_turns ? ` · ${session.cleaned_turns} turns cleaned` : "") +
          (session.stale ? " · STALE: start a fresh session" : "")),
      ),
    ),
  );
}
