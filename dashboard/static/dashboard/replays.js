// The history-replay pages: the placements chart (grouped bars per node, before vs after), drawn when the page
// loads and again when htmx swaps the finished report in; and on the start form, picking the candidate's source
// when the operator fills one in. No inline script anywhere (CSP). The series are in the canvas's data-chart
// attribute, not a json_script element: htmx removes every <script> from swapped content (allowScriptTags: false).
(function () {
  "use strict";
  var BEFORE = "#9aa8bf";
  var AFTER = "#2f6fd6";

  function drawPlacements() {
    var canvas = document.getElementById("placements-chart");
    if (!canvas || !canvas.dataset.chart || typeof Chart === "undefined" || Chart.getChart(canvas)) return;
    var data = JSON.parse(canvas.dataset.chart);
    canvas.parentElement.style.height = Math.max(180, 34 * data.labels.length + 80) + "px";
    new Chart(canvas, {
      type: "bar",
      data: {
        labels: data.labels,
        datasets: [
          { label: data.before_label, data: data.before, backgroundColor: BEFORE },
          { label: data.after_label, data: data.after, backgroundColor: AFTER }
        ]
      },
      options: {
        indexAxis: "y",
        maintainAspectRatio: false,
        animation: false,
        scales: {
          x: { beginAtZero: true, ticks: { precision: 0 }, title: { display: true, text: "placements (cycles preferring the node)" } }
        },
        plugins: { legend: { position: "top" } }
      }
    });
  }

  function pickSource(value) {
    var radio = document.querySelector('input[name="candidate_source"][value="' + value + '"]');
    if (radio) radio.checked = true;
  }

  function wireForm() {
    var form = document.getElementById("replay-form");
    if (!form || form.dataset.wired) return;
    form.dataset.wired = "1";
    var select = form.querySelector('select[name="candidate_profile"]');
    if (select) select.addEventListener("change", function () { pickSource("profile"); });
    ["candidate_yaml", "candidate_yaml_profile"].forEach(function (name) {
      var field = form.querySelector('[name="' + name + '"]');
      if (field) field.addEventListener("input", function () { if (field.value.trim()) pickSource("yaml"); });
    });
    var file = form.querySelector('input[name="candidate_file"]');
    if (file) file.addEventListener("change", function () { if (file.files.length) pickSource("yaml"); });
  }

  document.addEventListener("DOMContentLoaded", function () { drawPlacements(); wireForm(); });
  document.addEventListener("htmx:load", drawPlacements);
})();
