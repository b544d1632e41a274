// The front page's charts (Chart.js, vendored): per headline board, the best S_op per
// operator among the teams' rows, beside the reference baseline's S_op.
(function () {
  "use strict";
  const MOST = 12;
  function draw(canvas, leaders) {
    // the heaviest operators first (the page sends them so), at most MOST of them
    const shown = leaders.filter((l) => l.score !== null || l.baseline !== null).slice(0, MOST);
    const datasets = [];
    if (shown.some((l) => l.score !== null)) {
      datasets.push({ label: "best team", backgroundColor: "#3c6fb6",
                      data: shown.map((l) => l.score) });
    }
    if (shown.some((l) => l.baseline !== null)) {
      datasets.push({ label: "reference", backgroundColor: "#d9a55b",
                      data: shown.map((l) => l.baseline) });
    }
    canvas.parentElement.style.height = Math.max(160, 24 * shown.length + 70) + "px";
    new Chart(canvas, {
      type: "bar",
      data: { labels: shown.map((l) => l.operator), datasets: datasets },
      options: {
        indexAxis: "y", maintainAspectRatio: false, animation: false,
        scales: { x: { min: 0, max: 1, title: { display: true, text: "S_op (median attainment)" } },
                  y: { ticks: { autoSkip: false } } },
        plugins: { tooltip: { callbacks: { afterLabel: (c) =>
          c.datasetIndex === 0 && shown[c.dataIndex].team ? shown[c.dataIndex].team : "" } } },
      },
    });
    canvas.dataset.rendered = "yes";
  }
  function start() {
    const source = document.getElementById("leaders-data");
    if (!source || typeof Chart === "undefined") return;
    const leaders = JSON.parse(source.textContent);
    document.querySelectorAll("canvas.leaders-chart").forEach((canvas) => {
      draw(canvas, leaders[canvas.dataset.release] || []);
    });
  }
  if (document.readyState === "complete") start(); else window.addEventListener("load", start);
}());
