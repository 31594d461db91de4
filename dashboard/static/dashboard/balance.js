// The balance page's chart: stdev / mean of each profile's nodes over time.
(function () {
  "use strict";
  var PALETTE = ["#2f6fd6", "#e08a1e", "#2e9e6b", "#a44fb8", "#c23b3b", "#6b7a8f"];

  function draw() {
    var canvas = document.getElementById("balance-chart");
    var source = document.getElementById("balance-chart-data");
    if (!canvas || !source || typeof Chart === "undefined") return;
    var data = JSON.parse(source.textContent);
    var names = Object.keys(data.profiles);
    if (!names.length) return;
    canvas.parentElement.style.height = "260px";
    new Chart(canvas, {
      type: "line",
      data: {
        datasets: names.map(function (name, i) {
          var points = data.profiles[name].map(function (p) { return { x: Date.parse(p.x), y: p.y }; });
          return { label: name, data: points, borderColor: PALETTE[i % PALETTE.length], pointRadius: 0, spanGaps: false };
        })
      },
      options: {
        maintainAspectRatio: false,
        animation: false,
        parsing: false,
        scales: {
          x: { type: "linear", ticks: { callback: function (v) { return new Date(v).toLocaleTimeString(); } } },
          y: { min: 0, title: { display: true, text: "stdev / mean" } }
        }
      }
    });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", draw);
  else draw();
})();
