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

  // The filter box (the Messages page): checked as it is typed by the parser a run uses, through the console's
  // check route; the verdict is set as text, never as markup. Submitting still checks it on the server.
  var box = document.querySelector("input[data-check]");
  var verdict = document.getElementById("filter-verdict");
  var pending = null;
  var asked = 0;
  function check() {
    var text = box.value;
    if (text.trim() === "") {
      verdict.textContent = "";
      verdict.classList.remove("error", "ok");
      return;
    }
    var mine = ++asked;
    fetch(box.getAttribute("data-check") + "?filter=" + encodeURIComponent(text),
          { credentials: "same-origin", headers: { "Accept": "application/json" } })
      .then(function (response) { return response.json(); })
      .then(function (answer) {
        if (mine !== asked) {
          return;
        }
        verdict.textContent = answer.readable ? "Reads as " + answer.reads_as : answer.error;
        verdict.classList.toggle("error", !answer.readable);
        verdict.classList.toggle("ok", answer.readable);
      })
      .catch(function () {});
  }
  if (box && verdict) {
    box.addEventListener("input", function () {
      window.clearTimeout(pending);
      pending = window.setTimeout(check, 250);
    });
  }

  // Copy buttons beside the preview's snippets: shown only where the script runs.
  document.querySelectorAll("button.copy[data-copy]").forEach(function (button) {
    button.hidden = false;
    button.addEventListener("click", function () {
      var source = document.getElementById(button.getAttribute("data-copy"));
      if (source && navigator.clipboard) {
        navigator.clipboard.writeText(source.textContent).then(function () {
          button.textContent = "Copied";
        }, function () {});
      }
    });
  });
})();
