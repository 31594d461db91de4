// The decision page's score chart: each node's final score stacked by plugin contribution.
(function () {
  "use strict";
  var PALETTE = ["#2f6fd6", "#e08a1e", "#2e9e6b", "#a44fb8", "#c23b3b", "#6b7a8f"];

  function draw() {
    var canvas = document.getElementById("score-chart");
    var source = document.getElementById("score-chart-data");
    if (!canvas || !source || typeof Chart === "undefined") return;
    var data = JSON.parse(source.textContent);
    var height = Math.max(160, 26 * data.labels.length + 60);
    canvas.parentElement.style.height = height + "px";
    new Chart(canvas, {
      type: "bar",
      data: {
        labels: data.labels,
        datasets: data.datasets.map(function (set, i) {
          return { label: set.label, data: set.data, backgroundColor: PALETTE[i % PALETTE.length], stack: "final" };
        })
      },
      options: {
        indexAxis: "y",
        maintainAspectRatio: false,
        animation: false,
        scales: {
          x: { stacked: true, min: 0, max: 100, title: { display: true, text: "points (0..100)" } },
          y: {
            stacked: true,
            ticks: {
              callback: function (value, index) {
                var name = data.labels[index];
                return name === data.reference ? "▶ " + name : name;
              }
            }
          }
        },
        plugins: {
          tooltip: {
            callbacks: {
              afterBody: function (items) {
                var mb = data.traffic[items[0].dataIndex];
                return mb === null ? "no traffic series" : "traffic " + mb.toFixed(1) + " MB";
              }
            }
          }
        }
      }
    });
  }

  document.addEventListener("DOMContentLoaded", draw);
})();
