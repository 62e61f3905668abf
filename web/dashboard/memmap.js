// The memory test's block map for each card whose last memory test failed
// (docs/reference.md "What cmpfleet checks on the host"): one cell per 2 MiB block (binned on big cards), darker the more bad words, and the
// verdict that tells a few fixed blocks from errors everywhere under load. Asked of
// GET /api/v1/diag/memtest only when the memtest checks change, not on every status.

import { getJson } from "./api.js";
import { checksAt } from "./checkspecs.js";
import { el } from "./dom.js";

const CELLS = 256; // the map's width in cells; blocks share a cell beyond that

let shownFor = null; // the memtest checks the map was drawn for

function cellsOf(card) {
  const tested = Math.max(card.blocks_tested || 0, 1);
  const perCell = Math.max(Math.ceil(tested / CELLS), 1);
  const count = Math.ceil(tested / perCell);
  const errors = new Array(count).fill(0);
  for (const [block, bad] of card.blocks || []) {
    const cell = Math.min(Math.floor(block / perCell), count - 1);
    errors[cell] += bad;
  }
  return { errors, perCell };
}

function mapOf(card) {
  const { errors, perCell } = cellsOf(card);
  const worst = Math.max(...errors, 1);
  const size = card.block_kib % 1024 === 0 ? `${card.block_kib / 1024} MiB` : `${card.block_kib} KiB`;
  const cells = errors.map((bad, index) => {
    const level = bad === 0 ? 0 : Math.min(1 + Math.floor((3 * Math.log1p(bad)) / Math.log1p(worst)), 3);
    const first = index * perCell;
    return el("span", {
      class: `cell level${level}`,
      title: `block${perCell > 1 ? "s" : ""} #${first}${perCell > 1 ? `-${first + perCell - 1}` : ""}: ${bad} bad word(s)`,
    });
  });
  const listed = (card.blocks || []).length;
  const note = card.blocks_failed > listed ? ` (the first ${listed} shown)` : "";
  return el(
    "div",
    { class: "memmap-card", dataset: { card: card.card } },
    el("p", {}, el("strong", {}, `Card ${card.card}: `), card.verdict || "errors found"),
    el("div", { class: "memmap-cells", role: "img", "aria-label": `card ${card.card} block map` }, ...cells),
    el(
      "p",
      { class: "muted" },
      `${card.blocks_failed} of ${card.blocks_tested} ${size} blocks failed${note}; ` +
        `${card.bad_words} bad words, ${card.bit_errors} bit errors`,
    ),
  );
}

export async function renderMemoryMaps(status) {
  const section = document.getElementById("memmap");
  const failing = checksAt(status.checks, "memory_map").filter((check) => check.severity === "critical");
  const key = failing.map((check) => `${check.card}:${check.message}`).join("|");
  if (key === shownFor) return;
  shownFor = key;
  if (failing.length === 0) {
    section.hidden = true;
    return;
  }
  let overview;
  try {
    overview = await getJson("/api/v1/diag/memtest");
  } catch (error) {
    shownFor = null; // try again with the next status
    return;
  }
  const cards = (overview.cards || []).filter((card) => card.outcome === "failed" && (card.blocks || []).length);
  section.hidden = cards.length === 0;
  document.getElementById("memmap-cards").replaceChildren(...cards.map(mapOf));
}
