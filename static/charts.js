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
            // short: a long legend entry is cut on a phone; the axis title says the rest
            label: "ridge point (" + data.hardware + ", bf16)",
            type: "line",
            data: [{ x: data.ridge_bf16, y: 0 }, { x: data.ridge_bf16, y: 1 }],
            borderColor: "#555", borderDash: [6, 4], pointRadius: 0,
          },
        ],
      },
      options: {
        scales: {
          x: { type: "logarithmic", title: { display: true, text: "arithmetic intensity (FLOP/byte); memory-bound left of the ridge" } },
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
      // names tilted, every one shown: operator names are long and overlap when level
      options: { scales: { x: { ticks: { autoSkip: false, minRotation: 45, maxRotation: 90 } }, y: { min: 0, max: 1 } } },
    });
  }
  function analysis(holder) {
    // Board analysis: output tokens an agent spent against the S_agg it reached.
    fetch(holder.dataset.url, { credentials: "same-origin" })
      .then((r) => r.json())
      .then(function (data) {
        holder.dataset.rendered = "yes";
        if (!data.points.length) {  // no empty axes: say why there is nothing to draw
          document.getElementById("analysis-note").textContent =
            "No ranked submission reported its output tokens yet: nothing to draw.";
          hide(document.getElementById("analysis-chart"));
          return;
        }
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
      });
  }
  function hide(canvas) {
    canvas.parentElement.hidden = true;
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
        // A chart of zeros says nothing a sentence would not: a failed or untimed submission
        // gets the sentence, not near-empty axes.
        const timed = data.points.some((p) => p.attainment !== null);
        const scored = data.points.some((p) => p.attainment > 0);
        document.getElementById("charts-note").textContent = scored ? "" : timed ?
          "No shape scored above 0 (each failed, or fell back to another library): nothing to chart." :
          "No shape has a measured time yet (evaluated without a GPU): nothing to chart.";
        const rooflineCanvas = document.getElementById("roofline-chart");
        if (scored) roofline(rooflineCanvas, data); else hide(rooflineCanvas);
        const operatorCanvas = document.getElementById("operator-chart");
        if (Object.values(data.by_operator).some((v) => v > 0)) operators(operatorCanvas, data);
        else hide(operatorCanvas);
        holder.dataset.rendered = "yes";
      });
  });
})();
