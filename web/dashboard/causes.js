// The failing checks as causes (the status's ``causes``: fleetd groups them): one line per
// fault naming its cards, the root cause first (``host_kernel`` before BAR1 and P2P).
// Every critical cause that no other explains gets an advice box right under the verdict,
// like the reboot prompt, so its remedy is on the first screen of a laptop and a phone.

import { el } from "./dom.js";

// An older daemon sends no ``causes``: each failing check is a cause of its own.
export function causesOf(status) {
  if (Array.isArray(status.causes)) return status.causes;
  const rank = { critical: 0, warning: 1 };
  return (status.checks || [])
    .filter((c) => c.severity === "critical" || c.severity === "warning")
    .sort((a, b) => rank[a.severity] - rank[b.severity])
    .map((c) => ({
      id: c.id,
      severity: c.severity,
      cards: c.card === null || c.card === undefined ? [] : [c.card],
      message: c.message,
      remedy: c.remedy,
      explained_by: null,
      headline: `${c.id}${c.card === null || c.card === undefined ? "" : ` card ${c.card}`}: ${c.message}`,
    }));
}

// What the banner says under the verdict: the first (worst, root) cause's one line.
export function causeDetail(causes) {
  if (causes.length === 0) return null;
  const more = causes.length > 1 ? ` (+${causes.length - 1} more)` : "";
  return causes[0].headline + more;
}

function cardsAttr(cause) {
  return cause.cards && cause.cards.length ? cause.cards.join(",") : "rig";
}

// The advice boxes: each critical root cause with its remedy, and what follows from it.
export function renderAdvice(status) {
  const causes = causesOf(status);
  const roots = causes.filter((c) => c.severity === "critical" && !c.explained_by);
  const box = document.getElementById("advice");
  box.hidden = roots.length === 0;
  box.replaceChildren(
    ...roots.map((cause) => {
      const follows = causes.filter((c) => c.explained_by === cause.id);
      return el(
        "div",
        { class: "advice-box", dataset: { cause: cause.id, cards: cardsAttr(cause) } },
        el("div", { class: "advice-head" }, el("strong", {}, cause.headline)),
        cause.remedy ? el("div", { class: "advice-fix" }, el("strong", {}, "Fix: "), cause.remedy) : null,
        follows.length
          ? el("div", { class: "advice-follows muted" }, `Follows from it: ${follows.map((c) => `${c.id}${c.where ? ` ${c.where}` : ""}`).join("; ")}`)
          : null,
      );
    }),
  );
}

// The "Failed checks" panel: every cause, one entry each, its remedy below.
export function renderCauses(status) {
  const causes = causesOf(status);
  const list = document.getElementById("check-list");
  if (causes.length === 0) {
    list.replaceChildren(el("li", { class: "none" }, "every check passes"));
    return;
  }
  list.replaceChildren(
    ...causes.map((cause) =>
      el(
        "li",
        { class: cause.severity, dataset: { check: cause.id, card: cardsAttr(cause) } },
        el("div", {}, el("strong", {}, cause.id), cause.where ? ` ${cause.where}: ` : ": ", cause.message),
        cause.explained_by ? el("div", { class: "muted" }, `follows from ${cause.explained_by}: fix that first`) : null,
        cause.remedy ? el("div", { class: "remedy" }, cause.remedy) : null,
      ),
    ),
  );
}
