// The nodes page's traffic chart for the selected node (MB received per traffic window, over time).
(function () {
  "use strict";
  var format = new Intl.DateTimeFormat(undefined, { hour: "2-digit", minute: "2-digit", second: "2-digit", hour12: false });

  function draw() {
    var canvas = document.getElementById("node-chart");
    var source = document.getElementById("node-chart-data");
    if (!canvas || !source || typeof Chart === "undefined") return;
    var data = JSON.parse(source.textContent);
    new Chart(canvas, {
      type: "line",
      data: {
        labels: data.points.map(function (p) { return format.format(new Date(p.t)); }),
        datasets: [{
          label: data.node + " (MB)",
          data: data.points.map(function (p) { return p.mb; }),
          borderColor: "#2f6fd6",
          backgroundColor: "rgba(47, 111, 214, 0.15)",
          fill: true,
          spanGaps: false,
          pointRadius: 2
        }]
      },
      options: {
        maintainAspectRatio: false,
        animation: false,
        scales: { y: { beginAtZero: true, title: { display: true, text: "MB per window" } } }
      }
    });
  }

  document.addEventListener("DOMContentLoaded", draw);
})();
