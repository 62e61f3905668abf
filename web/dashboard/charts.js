// The history charts, drawn by the vendored uPlot (window.uPlot) from /api/v1/history.
// Charts are built once per layout (span and card set) and then only fed new data. Times
// are written as everywhere on the page (time.js); the power cap, the temperature limits
// and the window's Xids, latches and reboots are drawn over the data (chartmarks.js).

import { drawMarks, highest, renderMarkerList } from "./chartmarks.js";
import { formatTime, tickLabels } from "./time.js";

const PALETTE = ["#4ea1ff", "#f5a524", "#3ccf91", "#e36bd3", "#f0e442", "#ff6b6b", "#9d8cff", "#66d9e8"];

// Ranges start at zero (or a calm band for temperature) so sensor noise does not fill the
// chart: a brake halving the power or clock must look like a cliff, not like jitter. They
// reach the highest limit line too: 40 W drawn under a 180 W cap is an idle card, not a full one.
const fromZero = (_u, _min, max, top) => {
  const peak = Math.max(max ?? 0, top);
  return [0, peak > 0 ? peak * 1.1 : 1];
};
const calmTemperature = (_u, min, max, top) => [Math.min(min ?? 30, 30), Math.max(max ?? 60, 60, top) + 5];
const percent = () => [0, 100];

const CHARTS = [
  { id: "chart-power", metric: "power_draw_w", unit: "W", range: fromZero },
  { id: "chart-temperature", metric: "temperature_c", unit: "°C", range: calmTemperature },
  { id: "chart-clock", metric: "sm_clock_mhz", unit: "MHz", range: fromZero },
  { id: "chart-utilization", metric: "utilization_gpu_pct", unit: "%", range: percent },
  { id: "chart-memory", metric: "memory_used_mib", unit: "MiB", range: fromZero },
  { id: "chart-tokens", metric: "tokens_per_s", unit: "tok/s", engine: true, range: fromZero },
  // The engine's own figures (its vLLM metrics): a slower prefill, a DSpark build gone bad.
  { id: "chart-ttft", metric: "ttft_p95_s", unit: "s", engine: true, range: fromZero },
  { id: "chart-acceptance", metric: "spec_acceptance_ratio", unit: "", engine: true, range: () => [0, 1] },
];

function widthOf(node) {
  return Math.max(200, Math.floor(node.getBoundingClientRect().width));
}

// The x axis always spans one window's length (1 h or 24 h), however few points it holds
// (left to itself, uPlot stretched one fresh point over years), and fills from the left: a
// young daemon's first point is the left edge and the curve grows rightwards until the
// window is full, then the window slides with the clock.
function timeWindow(history) {
  const since = Date.parse(history.since) / 1000;
  const until = Date.parse(history.until) / 1000;
  const first = history.ts_s.length ? history.ts_s[0] : until;
  const from = Math.max(since, first);
  return [from, from + (until - since)];
}

function options(chart, history, width, charts) {
  const series = [{ value: (_u, v) => (v === null || v === undefined ? "-" : formatTime(v * 1000)) }];
  if (chart.engine) {
    // The engine is sampled only while it answers its /metrics: bridge the short gaps.
    series.push({ label: "engine", stroke: PALETTE[2], width: 2, spanGaps: true });
  } else {
    for (const card of history.cards) {
      series.push({
        label: `card ${card.card}`,
        stroke: PALETTE[card.card % PALETTE.length],
        width: 2,
        value: (_u, v) => (v === null || v === undefined ? "-" : `${v} ${chart.unit}`),
      });
    }
  }
  const axis = { stroke: "#9aa4b2", grid: { stroke: "#2a313b" }, ticks: { stroke: "#2a313b" } };
  const top = () => highest(charts.limits[chart.id] || []);
  return {
    width,
    height: 200,
    series,
    axes: [{ ...axis, size: 50, values: (_u, splits) => tickLabels(splits) }, { ...axis, size: 55 }],
    scales: { x: { time: true }, y: { range: (u, min, max) => chart.range(u, min, max, top()) } },
    legend: { live: true },
    // What the x axis spans, in seconds, as uPlot applied it: tests read it here.
    hooks: {
      setScale: [
        (u, key) => {
          if (key !== "x") return;
          u.root.parentElement.dataset.spanS = String(Math.round(u.scales.x.max - u.scales.x.min));
          u.root.parentElement.dataset.xMin = String(Math.round(u.scales.x.min));
        },
      ],
      draw: [(u) => drawMarks(u, () => ({ limits: charts.limits[chart.id] || [], markers: charts.markers }))],
    },
    cursor: { drag: { x: false, y: false } },
  };
}

function dataOf(chart, history) {
  if (chart.engine) {
    // An older daemon's history has only tokens_per_s: an empty series, not an error.
    const series = history.engine[chart.metric] || history.ts_s.map(() => null);
    return [history.ts_s, series];
  }
  // An older daemon's history has no utilisation or memory series: an empty chart.
  return [history.ts_s, ...history.cards.map((card) => card[chart.metric] || history.ts_s.map(() => null))];
}

// Holds the uPlot instances; rebuilt when the layout changes, resized with the page.
export class Charts {
  constructor() {
    this.plots = new Map();
    this.layout = "";
    this.window = [0, 1];
    this.limits = {};
    this.markers = [];
    this.limitsKey = "";
    this.observer = new ResizeObserver(() => this.resize());
  }

  // The limit lines for the status now; the charts redraw only when one moved.
  setLimits(limits) {
    const key = JSON.stringify(limits);
    if (key === this.limitsKey) return;
    this.limits = limits;
    this.limitsKey = key;
    for (const plot of this.plots.values()) plot.setScale("x", { min: this.window[0], max: this.window[1] });
  }

  draw(history) {
    if (typeof window.uPlot !== "function") return;
    this.window = timeWindow(history);
    this.markers = history.markers || [];
    renderMarkerList(this.markers, this.window);
    const layout = `${history.span}:${history.cards.map((c) => c.card).join(",")}`;
    if (layout !== this.layout) this.rebuild(history, layout);
    for (const chart of CHARTS) {
      const data = dataOf(chart, history);
      const points = data[0].length;
      const node = document.getElementById(chart.id);
      node.dataset.points = String(points);
      const plot = this.plots.get(chart.id);
      plot.setData(data);
      const [from, to] = this.window;
      plot.setScale("x", { min: from, max: to });
    }
  }

  rebuild(history, layout) {
    for (const plot of this.plots.values()) plot.destroy();
    this.plots.clear();
    this.observer.disconnect();
    for (const chart of CHARTS) {
      const node = document.getElementById(chart.id);
      node.replaceChildren();
      const plot = new window.uPlot(
        options(chart, history, widthOf(node), this),
        dataOf(chart, history),
        node,
      );
      this.plots.set(chart.id, plot);
      this.observer.observe(node);
    }
    this.layout = layout;
  }

  resize() {
    for (const chart of CHARTS) {
      const plot = this.plots.get(chart.id);
      const node = document.getElementById(chart.id);
      if (plot && node && widthOf(node) !== plot.width) plot.setSize({ width: widthOf(node), height: 200 });
    }
  }
}
