// A small scatter chart of per-call latency over time, drawn on a canvas: log-scale
// milliseconds against wall-clock time, one point per call, its mark telling how the call
// ran (interpreted: hollow orange circle; compiled: green dot; mixed: blue diamond).
"use strict";

const MARKS = {
  interpreted: { color: "#d9822b", draw: (g, x, y) => { g.beginPath(); g.arc(x, y, 3.2, 0, 7); g.stroke(); } },
  compiled: { color: "#138a4b", draw: (g, x, y) => { g.beginPath(); g.arc(x, y, 3, 0, 7); g.fill(); } },
  mixed: {
    color: "#3559e0",
    draw: (g, x, y) => {
      g.beginPath(); g.moveTo(x, y - 4); g.lineTo(x + 4, y); g.lineTo(x, y + 4); g.lineTo(x - 4, y);
      g.closePath(); g.fill();
    },
  },
};
const PAD = { left: 54, right: 12, top: 8, bottom: 22 };
const MAX_SPAN_S = 120;

class LatencyChart {
  constructor(canvas, onHover) {
    this.canvas = canvas;
    this.points = [];
    this.onHover = onHover;
    this.layout = null;
    canvas.addEventListener("mousemove", (e) => this.hover(e));
    canvas.addEventListener("mouseleave", () => this.onHover(null));
  }

  // points: [[time_s, ms, mode, shapes], ...] in time order
  draw(points) {
    this.points = points;
    const c = this.canvas, ratio = window.devicePixelRatio || 1;
    const w = c.clientWidth, h = c.clientHeight;
    if (c.width !== Math.round(w * ratio) || c.height !== Math.round(h * ratio)) {
      c.width = Math.round(w * ratio); c.height = Math.round(h * ratio);
    }
    const g = c.getContext("2d");
    g.setTransform(ratio, 0, 0, ratio, 0, 0);
    g.clearRect(0, 0, w, h);
    if (!points.length) return;
    const t1 = points[points.length - 1][0];
    const span = Math.min(Math.max(t1 - points[0][0], 5), MAX_SPAN_S);
    const t0 = t1 - span;
    const shown = points.filter((p) => p[0] >= t0);
    let lo = Infinity, hi = -Infinity;
    for (const p of shown) { lo = Math.min(lo, p[1]); hi = Math.max(hi, p[1]); }
    const dLo = Math.floor(Math.log10(Math.max(lo, 1e-4))), dHi = Math.ceil(Math.log10(Math.max(hi, 1e-4)) + 1e-9);
    const decades = Math.max(dHi - dLo, 1);
    const plotW = w - PAD.left - PAD.right, plotH = h - PAD.top - PAD.bottom;
    const x = (t) => PAD.left + ((t - t0) / span) * plotW;
    const y = (ms) => PAD.top + plotH - ((Math.log10(Math.max(ms, 1e-4)) - dLo) / decades) * plotH;
    this.layout = { x, y, shown };
    this.axes(g, w, h, t0, t1, dLo, dLo + decades, y, x);
    for (const p of shown) {
      const mark = MARKS[p[2]] || MARKS.mixed;
      g.strokeStyle = g.fillStyle = mark.color;
      g.lineWidth = 1.5;
      mark.draw(g, x(p[0]), y(p[1]));
    }
  }

  axes(g, w, h, t0, t1, dLo, dHi, y, x) {
    g.font = "11px system-ui, sans-serif";
    g.fillStyle = "#6b7385"; g.strokeStyle = "#e3e6ec"; g.lineWidth = 1;
    g.textAlign = "right"; g.textBaseline = "middle";
    for (let d = dLo; d <= dHi; d++) {
      const yy = Math.round(y(10 ** d)) + 0.5;
      g.beginPath(); g.moveTo(PAD.left, yy); g.lineTo(w - PAD.right, yy); g.stroke();
      g.fillText(formatMs(10 ** d), PAD.left - 6, yy);
    }
    g.textAlign = "center"; g.textBaseline = "top";
    const step = niceStep((t1 - t0) / 6);
    for (let t = Math.ceil(t0 / step) * step; t <= t1; t += step) {
      const xx = Math.round(x(t)) + 0.5;
      g.beginPath(); g.moveTo(xx, PAD.top); g.lineTo(xx, h - PAD.bottom); g.stroke();
      const label = new Date(t * 1000).toLocaleTimeString();
      const half = g.measureText(label).width / 2;
      if (xx - half >= PAD.left && xx + half <= w) g.fillText(label, xx, h - PAD.bottom + 5);
    }
  }

  hover(e) {
    if (!this.layout) return;
    const r = this.canvas.getBoundingClientRect();
    const mx = e.clientX - r.left, my = e.clientY - r.top;
    let best = null, bestD = 64;
    for (const p of this.layout.shown) {
      const d = (this.layout.x(p[0]) - mx) ** 2 + (this.layout.y(p[1]) - my) ** 2;
      if (d < bestD) { bestD = d; best = p; }
    }
    this.onHover(best && { point: best, clientX: e.clientX, clientY: e.clientY });
  }
}

function formatMs(ms) {
  if (ms >= 1000) return (ms / 1000).toPrecision(3).replace(/\.?0+$/, "") + " s";
  if (ms >= 1) return Number(ms.toPrecision(3)) + " ms";
  return Number((ms * 1000).toPrecision(3)) + " µs";
}

function niceStep(raw) {
  for (const s of [1, 2, 5, 10, 15, 30, 60, 120, 300]) if (s >= raw) return s;
  return 600;
}

window.LatencyChart = LatencyChart;
window.formatMs = formatMs;
