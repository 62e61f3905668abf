// A deep canary's figure at each depth of the context, drawn as a small curve: copy 100 %
// at 16k, 98 % at 64k, 15 % at 96k falls off a cliff where the build breaks. Plain SVG
// built with createElementNS (text through textContent only, never markup).

const SVG = "http://www.w3.org/2000/svg";
const WIDTH = 320;
const HEIGHT = 90;
const PAD = { left: 34, right: 10, top: 8, bottom: 22 };
const LEVEL = { pass: "ok", warn: "warning", fail: "critical" };

function svg(tag, attrs, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, String(value));
  if (text !== undefined) node.textContent = text;
  return node;
}

function depthLabel(depth) {
  return depth >= 1000 ? `${depth / 1000}k` : String(depth);
}

// The figure list of a canary with per-depth details, or null (not a deep canary).
export function depthPoints(canary) {
  const depths = canary && canary.details && canary.details.depths;
  if (!Array.isArray(depths) || depths.length === 0) return null;
  return depths
    .filter((entry) => typeof entry.depth === "number")
    .map((entry) => ({ depth: entry.depth, figure: entry.figure, result: entry.result }));
}

export function depthCurve(canary) {
  const points = depthPoints(canary);
  if (!points) return null;
  const plot = svg("svg", {
    class: "depth-curve",
    viewBox: `0 0 ${WIDTH} ${HEIGHT}`,
    role: "img",
    "aria-label": `${canary.name} by context depth`,
  });
  plot.dataset.points = String(points.length);
  const inner = { w: WIDTH - PAD.left - PAD.right, h: HEIGHT - PAD.top - PAD.bottom };
  const x = (i) => PAD.left + (points.length === 1 ? inner.w / 2 : (i * inner.w) / (points.length - 1));
  const y = (f) => PAD.top + inner.h * (1 - Math.max(0, Math.min(1, f)));
  for (const [value, label] of [[1, "100%"], [0.5, "50%"], [0, "0%"]]) {
    plot.append(svg("line", { x1: PAD.left, x2: WIDTH - PAD.right, y1: y(value), y2: y(value), class: "grid" }));
    plot.append(svg("text", { x: 2, y: y(value) + 4, class: "axis" }, label));
  }
  const judged = points.map((p, i) => ({ ...p, i })).filter((p) => typeof p.figure === "number");
  if (judged.length > 1) {
    const path = judged.map((p, k) => `${k === 0 ? "M" : "L"}${x(p.i).toFixed(1)},${y(p.figure).toFixed(1)}`);
    plot.append(svg("path", { d: path.join(" "), class: "curve" }));
  }
  points.forEach((p, i) => {
    plot.append(svg("text", { x: x(i), y: HEIGHT - 6, class: "axis", "text-anchor": "middle" }, depthLabel(p.depth)));
    if (typeof p.figure !== "number") return;
    const dot = svg("circle", { cx: x(i), cy: y(p.figure), r: 4, class: `dot ${LEVEL[p.result] || "unknown"}` });
    dot.append(svg("title", {}, `${depthLabel(p.depth)}: ${Math.round(100 * p.figure)} % (${p.result})`));
    plot.append(dot);
  });
  return plot;
}
