// Submission charts (Chart.js, vendored): attainment against arithmetic intensity, one point
// per shape, with the hardware's ridge point splitting memory- and compute-bound shapes;
// and the per-operator scores under the active weights.
(function () {
  "use strict";
  function colour(verdict) {
    return verdict === "native" ? "#2f8f46" : (verdict ? "#c77c12" : "#b33a3a");
  }
  function roofline(canvas, data) {
    const points = data.points.filter((p) => p.attainment !== null);
    new Chart(canvas, {
      type: "scatter",
      data: {
        datasets: [
          {
            label: "shapes",
            data: points.map((p) => ({ x: p.intensity, y: p.attainment, label: p.operator + "/" + p.shape })),
            pointBackgroundColor: points.map((p) => colour(p.verdict)),
            pointRadius: 5,
          },
          {
            label: "ridge point (" + data.hardware + ", bf16): memory-bound left, compute-bound right",
            type: "line",
            data: [{ x: data.ridge_bf16, y: 0 }, { x: data.ridge_bf16, y: 1 }],
            borderColor: "#555", borderDash: [6, 4], pointRadius: 0,
          },
        ],
      },
      options: {
        scales: {
          x: { type: "logarithmic", title: { display: true, text: "arithmetic intensity (FLOP/byte)" } },
          y: { min: 0, max: 1, title: { display: true, text: "attainment (SOL / measured)" } },
        },
        plugins: { tooltip: { callbacks: { label: (c) => (c.raw.label || "") + " " + c.raw.y.toFixed(3) } } },
      },
    });
  }
  function operators(canvas, data) {
    const names = Object.keys(data.by_operator);
    new Chart(canvas, {
      type: "bar",
      data: { labels: names, datasets: [{ label: "S_op (median attainment)", data: names.map((n) => data.by_operator[n]), backgroundColor: "#3c6fb6" }] },
      options: { scales: { y: { min: 0, max: 1 } } },
    });
  }
  function analysis(holder) {
    // Board analysis: output tokens an agent spent against the S_agg it reached.
    fetch(holder.dataset.url, { credentials: "same-origin" })
      .then((r) => r.json())
      .then(function (data) {
        document.getElementById("analysis-note").textContent = data.points.length ? "" :
          "No ranked submission reported its output tokens yet.";
        new Chart(document.getElementById("analysis-chart"), {
          type: "scatter",
          data: { datasets: [{
            label: "submissions",
            data: data.points.map((p) => ({ x: p.output_tokens, y: p.aggregate, label: p.team + " #" + p.submission })),
            pointBackgroundColor: "#3c6fb6", pointRadius: 5,
          }] },
          options: {
            scales: {
              x: { type: "logarithmic", title: { display: true, text: "output tokens spent by the agent" } },
              y: { min: 0, title: { display: true, text: "S_agg (weighted roofline attainment)" } },
            },
            plugins: { tooltip: { callbacks: { label: (c) => c.raw.label + ": " + c.raw.x + " tokens, " + c.raw.y.toFixed(3) } } },
          },
        });
        holder.dataset.rendered = "yes";
      });
  }
  document.addEventListener("DOMContentLoaded", function () {
    if (typeof Chart === "undefined") return;
    // No animation: the numbers are the point, and screenshots must show final values.
    Chart.defaults.animation = false;
    const board = document.getElementById("analysis");
    if (board) analysis(board);
    const holder = document.getElementById("charts");
    if (!holder) return;
    fetch(holder.dataset.url, { credentials: "same-origin" })
      .then((r) => r.json())
      .then(function (data) {
        const measured = data.points.some((p) => p.attainment !== null);
        document.getElementById("charts-note").textContent = measured ? "" :
          "No shape has a measured time yet (evaluated without a GPU): nothing to place on the roofline.";
        roofline(document.getElementById("roofline-chart"), data);
        operators(document.getElementById("operator-chart"), data);
        holder.dataset.rendered = "yes";
      });
  });
})();
