// The bench panel: the last run's throughput against concurrency and against depth, and the
// last cap sweep's tok/J against the cap, each beside the recipe's reference (dashed) where it
// has one (GET /api/v1/bench, then the runs it lists). Drawn by the vendored uPlot; hidden on
// a rig with no run yet (or no engine: the route answers 409).

import { getJson } from "./api.js";
import { el, num } from "./dom.js";

const HEIGHT = 200;
const plots = new Map();

function widthOf(node) {
  return Math.max(240, Math.floor(node.getBoundingClientRect().width) || 320);
}

// x values of the run and the reference together; null where a series has no point.
function aligned(measured, reference) {
  const xs = [...new Set([...measured.map((p) => p[0]), ...reference.map((p) => p[0])])].sort((a, b) => a - b);
  const at = (points) => xs.map((x) => {
    const hit = points.find((p) => p[0] === x);
    return hit ? hit[1] : null;
  });
  return [xs, at(measured), at(reference)];
}

function draw(id, measured, reference, xLabel, yLabel) {
  const node = document.getElementById(id);
  node.dataset.points = String(measured.length);
  const existing = plots.get(id);
  if (existing) existing.destroy();
  plots.delete(id);
  node.replaceChildren();
  if (!measured.length || typeof window.uPlot !== "function") return;
  const options = {
    width: widthOf(node),
    height: HEIGHT,
    scales: { x: { time: false } },
    axes: [{ label: xLabel }, { label: yLabel }],
    series: [
      {},
      { label: "last run", stroke: "#1565c0", width: 2, points: { show: true } },
      { label: "reference", stroke: "#888", dash: [6, 4], spanGaps: true, points: { show: true } },
    ],
  };
  plots.set(id, new window.uPlot(options, aligned(measured, reference), node));
}

function firstDepth(cells) {
  return Math.min(...cells.map((c) => c.depth_tokens));
}

export function renderBench(run, sweep) {
  const panel = document.getElementById("bench");
  panel.hidden = !run && !sweep;
  if (panel.hidden) return;
  const reference = (run && run.method && run.method.reference) || {};
  const cells = (run && run.cells) || [];
  document.getElementById("bench-summary").replaceChildren(
    el("span", {}, run ? `run ${run.id} (${run.state}) on ${(run.method.build || {}).name || "an unknown build"}: ` : ""),
    el("strong", {}, run && run.verdict ? run.verdict.text : ""),
  );
  const shallow = cells.length ? firstDepth(cells) : 0;
  const byConcurrency = cells
    .filter((c) => c.temperature === 0 && c.depth_tokens === shallow && c.decode_tok_s_total != null)
    .map((c) => [c.concurrency, c.decode_tok_s_total])
    .sort((a, b) => a[0] - b[0]);
  const refConcurrency = [];
  if (reference.decode_tok_s) refConcurrency.push([1, reference.decode_tok_s]);
  if (reference.concurrent_total_tok_s && reference.concurrency) {
    refConcurrency.push([reference.concurrency, reference.concurrent_total_tok_s]);
  }
  draw("bench-concurrency", byConcurrency, refConcurrency, "streams", "total tok/s");
  const byDepth = cells
    .filter((c) => c.concurrency === 1 && c.temperature === 0 && c.decode_tok_s_per_stream != null)
    .map((c) => [c.depth_tokens, c.decode_tok_s_per_stream])
    .sort((a, b) => a[0] - b[0]);
  const refDepth = [];
  if (reference.decode_tok_s && byDepth.length) refDepth.push([byDepth[0][0], reference.decode_tok_s]);
  if (reference.decode_tok_s_at_1m) refDepth.push([1000000, reference.decode_tok_s_at_1m]);
  draw("bench-depth", byDepth, refDepth, "prompt tokens", "decode tok/s");
  const steps = ((sweep && sweep.sweep && sweep.sweep.steps) || []).filter((s) => s.tokens_per_joule != null);
  draw("bench-caps", steps.map((s) => [s.cap_w, s.tokens_per_joule]), [], "cap (W)", "tok/J");
  const recommended = sweep && sweep.sweep ? sweep.sweep.recommended_cap_w : null;
  document.getElementById("bench-sweep").textContent =
    recommended != null ? `sweep ${sweep.id}: recommended cap ${num(recommended, "W")}` : "";
}

// The newest matrix run and the newest sweep.
export async function pollBench() {
  try {
    const listing = await getJson("/api/v1/bench?limit=50");
    const finished = (listing.runs || []).filter((r) => r.state !== "running");
    const matrix = finished.find((r) => r.kind === "matrix");
    const sweep = finished.find((r) => r.kind === "sweep");
    renderBench(
      matrix ? await getJson(`/api/v1/bench/${matrix.id}`) : null,
      sweep ? await getJson(`/api/v1/bench/${sweep.id}`) : null,
    );
  } catch (error) {
    renderBench(null, null);
  }
}
