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
    var since = Date.parse(data.since);
    var until = Date.parse(data.until);
    // Over more than a day a time alone names two moments: the ticks then carry the day too.
    var manyDays = until - since > 24 * 3600 * 1000;
    function tick(v) {
      var at = new Date(v);
      return manyDays
        ? at.toLocaleString([], { month: "short", day: "numeric", hour: "2-digit", minute: "2-digit" })
        : at.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
    }
    canvas.parentElement.style.height = "260px";
    new Chart(canvas, {
      type: "line",
      data: {
        datasets: names.map(function (name, i) {
          var points = data.profiles[name].map(function (p) { return { x: Date.parse(p.x), y: p.y }; });
          // A line needs two samples: a profile sampled once is drawn as its point, not as nothing.
          var radius = points.length > 1 ? 0 : 3;
          var colour = PALETTE[i % PALETTE.length];
          return {
            label: name, data: points, borderColor: colour, backgroundColor: colour, pointRadius: radius, spanGaps: false,
            clip: false  // a sample taken as the page was drawn sits on the right edge: whole, not cut in half
          };
        })
      },
      options: {
        maintainAspectRatio: false,
        animation: false,
        parsing: false,
        scales: {
          x: {
            type: "linear",
            min: since,
            max: until,
            ticks: { callback: tick }
          },
          y: { min: 0, grace: "10%", title: { display: true, text: "stdev / mean" } }
        }
      }
    });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", draw);
  else draw();
})();
