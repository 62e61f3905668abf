// The four history charts, drawn by the vendored uPlot (window.uPlot) from /api/v1/history.
// Charts are built once per layout (span and card set) and then only fed new data.

const PALETTE = ["#4ea1ff", "#f5a524", "#3ccf91", "#e36bd3", "#f0e442", "#ff6b6b", "#9d8cff", "#66d9e8"];

// Ranges start at zero (or a calm band for temperature) so sensor noise does not fill the
// chart: a brake halving the power or clock must look like a cliff, not like jitter.
const fromZero = (_u, _min, max) => [0, max > 0 ? max * 1.1 : 1];
const calmTemperature = (_u, min, max) => [Math.min(min ?? 30, 30), Math.max(max ?? 60, 60) + 5];

const CHARTS = [
  { id: "chart-power", metric: "power_draw_w", unit: "W", range: fromZero },
  { id: "chart-temperature", metric: "temperature_c", unit: "°C", range: calmTemperature },
  { id: "chart-clock", metric: "sm_clock_mhz", unit: "MHz", range: fromZero },
  { id: "chart-tokens", metric: "tokens_per_s", unit: "tok/s", engine: true, range: fromZero },
];

function widthOf(node) {
  return Math.max(200, Math.floor(node.getBoundingClientRect().width));
}

// The x axis always spans the asked window (1 h or 24 h), however few points it holds:
// left to itself, uPlot stretched one fresh point over years.
function timeWindow(history) {
  return [Date.parse(history.since) / 1000, Date.parse(history.until) / 1000];
}

function options(chart, history, width) {
  const series = [{}];
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
  return {
    width,
    height: 200,
    series,
    axes: [{ ...axis }, { ...axis, size: 55 }],
    scales: { x: { time: true }, y: { range: chart.range } },
    legend: { live: true },
    // What the x axis spans, in seconds, as uPlot applied it: tests read it here.
    hooks: {
      setScale: [
        (u, key) => {
          if (key === "x") u.root.parentElement.dataset.spanS = String(Math.round(u.scales.x.max - u.scales.x.min));
        },
      ],
    },
    cursor: { drag: { x: false, y: false } },
  };
}

function dataOf(chart, history) {
  if (chart.engine) return [history.ts_s, history.engine.tokens_per_s];
  return [history.ts_s, ...history.cards.map((card) => card[chart.metric])];
}

// Holds the uPlot instances; rebuilt when the layout changes, resized with the page.
export class Charts {
  constructor() {
    this.plots = new Map();
    this.layout = "";
    this.window = [0, 1];
    this.observer = new ResizeObserver(() => this.resize());
  }

  draw(history) {
    if (typeof window.uPlot !== "function") return;
    this.window = timeWindow(history);
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
        options(chart, history, widthOf(node)),
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
