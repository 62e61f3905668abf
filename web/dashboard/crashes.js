// The crash black box on the dashboard: the crash timeline (GET /api/v1/crashes), newest
// first, each bundle with its verdict, card and rank, depth and confidence; and the boot
// fingerprint next to the engine (the status's recovery.evidence): the KV pool, the
// concurrency, the last rank's free margin, the partition, and its warning if it shrank.

import { el, num } from "./dom.js";

const SHOWN = 20;

function when(ts) {
  const date = new Date(ts);
  return Number.isNaN(date.getTime()) ? String(ts) : date.toLocaleString();
}

function where(crash) {
  const parts = [];
  if (crash.card !== null && crash.card !== undefined) parts.push(`card ${crash.card}`);
  if (crash.rank !== null && crash.rank !== undefined) parts.push(`rank ${crash.rank}`);
  return parts.join(", ") || "-";
}

export function renderCrashes(document_) {
  const panel = document.getElementById("crashes");
  const crashes = (document_ && document_.crashes) || [];
  const degraded = document_ && document_.degraded;
  panel.hidden = !crashes.length && !degraded;
  const lost = document.getElementById("crashes-degraded");
  lost.hidden = !degraded;
  lost.textContent = degraded ? `EVIDENCE LOST: ${degraded}` : "";
  document.getElementById("crash-timeline").replaceChildren(
    ...crashes.slice(0, SHOWN).map((crash) => {
      const verdict = crash.verdict || {};
      return el(
        "li",
        { dataset: { bundle: crash.id }, class: verdict.rule === "unknown" ? "" : "sev warning" },
        el("span", { class: "muted" }, when(crash.ts)),
        " ",
        el("strong", {}, verdict.rule || "unknown"),
        ` (${verdict.confidence || "none"}) · ${crash.crash_class || crash.fault || crash.kind} · ` +
          `${where(crash)} · depth ${num(crash.depth_tokens, "tokens")}`,
        el("br", {}),
        el("span", {}, verdict.summary || ""),
        crash.escalation ? el("br", {}) : null,
        crash.escalation ? el("strong", { class: "sev critical" }, `RECURRING: ${crash.escalation.summary}`) : null,
        el("br", {}),
        el("code", { class: "muted" }, `fleetctl crash show ${crash.id}`),
      );
    }),
  );
}

export function renderFingerprint(evidence) {
  const line = document.getElementById("engine-fingerprint");
  const fingerprint = evidence && evidence.fingerprint;
  line.hidden = !fingerprint;
  if (!fingerprint) return;
  const pool = fingerprint.kv_tokens === null ? "KV pool n/a" : `KV pool ${num(fingerprint.kv_tokens, "tokens")}`;
  const concurrency = fingerprint.max_concurrency ? ` · ${fingerprint.max_concurrency}x concurrency` : "";
  const margin = fingerprint.last_rank_free_mib === null ? "" : ` · last rank ${num(fingerprint.last_rank_free_mib, "MiB")} free`;
  const partition = ` · partition ${fingerprint.partition || "even"}`;
  const warned = (fingerprint.warnings || []).join("; ");
  line.className = warned ? "sev warning" : "muted";
  line.textContent = `boot fingerprint: ${pool}${concurrency}${margin}${partition}` + (warned ? ` · ${warned}` : "");
}
