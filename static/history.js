// An operator's history (Chart.js, vendored, as charts.js): S_op, correctness and DSL adoption
// per submission, oldest to newest, from the history API (the page's data-url).
(function () {
  "use strict";
  function line(label, values, colour, dashed) {
    return { label: label, data: values, borderColor: colour, backgroundColor: colour,
             borderDash: dashed ? [6, 4] : [], pointRadius: 4, spanGaps: true, tension: 0 };
  }
  function draw(holder, data) {
    const entries = data.entries;
    const timed = entries.some((e) => e.s_op !== null);
    document.getElementById("history-note").textContent = !entries.length ? "" : (timed ? "" :
      "No S_op yet: no submission of this operator has a measured time (evaluated without a GPU " +
      "or not scored yet); correctness and DSL adoption are drawn.");
    new Chart(document.getElementById("history-chart"), {
      type: "line",
      data: {
        // Check submissions and interpreter checks are the team's own tries: marked, never ranked.
        labels: entries.map((e) => "#" + e.submission + (e.mode === "check" ? " check" : "") +
          (e.interpreter ? " interp." : "")),
        datasets: [
          line("S_op (median shape score)", entries.map((e) => e.s_op), "#3c6fb6", false),
          line("correct shapes", entries.map((e) => e.correctness_rate), "#2f8f46", true),
          line("native DSL shapes", entries.map((e) => e.dsl_adoption_rate), "#c77c12", true),
        ],
      },
      options: {
        scales: {
          x: { title: { display: true, text: "submission, oldest to newest" } },
          y: { min: 0, max: 1, title: { display: true, text: "score / share of shapes" } },
        },
        plugins: { tooltip: { callbacks: {
          title: (items) => {
            const e = entries[items[0].dataIndex];
            return "#" + e.submission + " · " + e.created_at.slice(0, 16).replace("T", " ") +
              " · " + e.release.name + " v" + e.release.version + " / " + e.hardware;
          },
          label: (c) => c.dataset.label + ": " + (c.raw === null ? "–" : c.raw.toFixed(3)),
        } } },
      },
    });
    holder.dataset.rendered = "yes";
  }
  document.addEventListener("DOMContentLoaded", function () {
    const holder = document.getElementById("history-chart-holder");
    if (!holder || typeof Chart === "undefined") return;
    // No animation: the numbers are the point, and screenshots must show final values.
    Chart.defaults.animation = false;
    fetch(holder.dataset.url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then((r) => r.json())
      .then((data) => draw(holder, data));
  });
})();
