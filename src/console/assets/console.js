// The operator console's one script (ADR 0014). Every page works without it; with it, the parts of a page marked
// data-live are fetched again every few seconds and swapped in place — the run's counters, the Transfers list — so
// an operator watches a run without reloading. It pauses while the tab is hidden and resumes when it is shown.
// Forms are never swapped, so nothing typed is lost. No inline script, no eval: the CSP allows neither.
"use strict";
(function () {
  var EVERY_MS = 3000;
  var timer = null;
  var busy = false;

  function live() {
    return document.querySelectorAll("[data-live][id]");
  }

  function refresh() {
    if (busy || document.hidden || live().length === 0) {
      return;
    }
    busy = true;
    fetch(window.location.href, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (response) {
        if (!response.ok || response.redirected) {
          throw new Error("the page answered " + response.status);
        }
        return response.text();
      })
      .then(function (text) {
        var fresh = new DOMParser().parseFromString(text, "text/html");
        live().forEach(function (old) {
          var next = fresh.getElementById(old.id);
          if (next) {
            old.replaceWith(document.importNode(next, true));
          }
        });
        document.documentElement.removeAttribute("data-stale");
      })
      .catch(function () {
        // The page keeps its last numbers, marked as possibly old (the stylesheet dims them) until a fetch works.
        document.documentElement.setAttribute("data-stale", "true");
      })
      .then(function () {
        busy = false;
      });
  }

  function start() {
    if (timer === null) {
      timer = window.setInterval(refresh, EVERY_MS);
    }
  }

  function stop() {
    if (timer !== null) {
      window.clearInterval(timer);
      timer = null;
    }
  }

  document.addEventListener("visibilitychange", function () {
    if (document.hidden) {
      stop();
    } else {
      refresh();
      start();
    }
  });

  if (!document.hidden) {
    start();
  }
})();
