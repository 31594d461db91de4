// schedlens dashboard: operator-local times, and the live history poller. No inline script anywhere (CSP).
(function () {
  "use strict";

  var format = new Intl.DateTimeFormat(undefined, {
    year: "numeric", month: "2-digit", day: "2-digit",
    hour: "2-digit", minute: "2-digit", second: "2-digit", hour12: false, timeZoneName: "short"
  });

  // Each <time datetime="…Z" title="… UTC"> keeps UTC in its title and shows the browser's zone.
  function localize(root) {
    var nodes = (root || document).querySelectorAll("time.ts[datetime]");
    for (var i = 0; i < nodes.length; i++) {
      var el = nodes[i];
      if (el.dataset.local) continue;
      var when = new Date(el.getAttribute("datetime"));
      if (isNaN(when.getTime())) continue;
      el.textContent = format.format(when);
      el.dataset.local = "1";
    }
  }

  // The poller asks for rows recorded after the newest id on the page, whatever has arrived since.
  function newestId() {
    var newest = 0;
    var poll = document.getElementById("history-poll");
    if (poll) newest = parseInt(poll.dataset.after || "0", 10) || 0;
    var rows = document.querySelectorAll("#history-rows tr[data-id]");
    for (var i = 0; i < rows.length; i++) {
      var id = parseInt(rows[i].dataset.id, 10);
      if (id > newest) newest = id;
    }
    return newest;
  }

  document.addEventListener("htmx:configRequest", function (event) {
    if (event.detail.elt && event.detail.elt.id === "history-poll") {
      event.detail.parameters.after = String(newestId());
    }
  });

  document.addEventListener("htmx:afterSwap", function (event) {
    if (event.detail.target && event.detail.target.id === "history-rows") {
      var empty = event.detail.target.querySelector("tr.empty");
      if (empty && event.detail.target.querySelector("tr[data-id]")) empty.remove();
      var poll = document.getElementById("history-poll");
      if (poll) poll.dataset.after = String(newestId());
    }
  });

  document.addEventListener("htmx:load", function (event) { localize(event.detail.elt); });
  document.addEventListener("DOMContentLoaded", function () { localize(document); });
})();
