// The operator console's one script (ADR 0014). Every page works without it; with it, the parts of a page marked
// data-live are fetched again and swapped in place — the run's counters when its event stream says they changed,
// the Transfers list when its cheap poll every few seconds says a run changed — so an operator watches a run
// without reloading. It pauses while the tab is hidden and resumes when it is shown.
// Forms are never swapped, so nothing typed is lost. No inline script, no eval: the CSP allows neither.
"use strict";
(function () {
  var EVERY_MS = 3000;
  var timer = null;
  var busy = false;
  var again = false;

  function live() {
    return document.querySelectorAll("[data-live][id]");
  }

  // Asks this service for `url` over the session, as `accept`: the answer, or an error when it is not one (a
  // failure, or a redirect to sign in).
  function ask(url, accept) {
    return fetch(url, { credentials: "same-origin", headers: { "Accept": accept } }).then(function (response) {
      if (!response.ok || response.redirected) {
        throw new Error(url + " answered " + response.status);
      }
      return response;
    });
  }

  // Asks for `url` (this session's page) and swaps in the elements of the answer with these ids, in place.
  function swapFrom(url, ids) {
    return ask(url, "text/html")
      .then(function (response) {
        return response.text();
      })
      .then(function (text) {
        var fresh = new DOMParser().parseFromString(text, "text/html");
        ids.forEach(function (id) {
          var old = document.getElementById(id);
          var next = fresh.getElementById(id);
          if (old && next) {
            old.replaceWith(document.importNode(next, true));
          }
        });
      });
  }

  // Transfers names the cheap poll of its list (data-changes) and the instant its list is complete up to
  // (data-as-of): every few seconds it asks only whether a run changed since, and fetches the page again only then.
  // Nothing changed: the next ask is from the answer's instant. Changed: the fresh list brings its own.
  function changedSince(element) {
    var url = element.getAttribute("data-changes") + "&changed_after=" +
      encodeURIComponent(element.getAttribute("data-as-of"));
    return ask(url, "application/json")
      .then(function (response) {
        return response.json();
      })
      .then(function (answer) {
        if (!answer.changed) {
          element.setAttribute("data-as-of", answer.as_of);
        }
        return answer.changed;
      });
  }

  function refresh() {
    if (document.hidden || live().length === 0) {
      return;
    }
    if (busy) {
      // A change told while the page was being asked for: asked again once that answer is in, so it is not lost.
      again = true;
      return;
    }
    busy = true;
    again = false;
    var ids = Array.prototype.map.call(live(), function (element) {
      return element.id;
    });
    var cheap = document.querySelector("[data-live][data-changes][data-as-of]");
    (cheap ? changedSince(cheap) : Promise.resolve(true))
      .then(function (changed) {
        return changed ? swapFrom(window.location.href, ids) : null;
      })
      .then(function () {
        document.documentElement.removeAttribute("data-stale");
      })
      .catch(function () {
        // The page keeps its last numbers, marked as possibly old (the stylesheet dims them) until a fetch works.
        document.documentElement.setAttribute("data-stale", "true");
      })
      .then(function () {
        busy = false;
        if (again) {
          refresh();
        }
      });
  }

  // The run page's live part names its run's event stream (data-events): while the tab is shown, the page follows
  // it and asks for its live part again only when the run's numbers changed (a `progress` event), instead of every
  // few seconds. The numbers are drawn by the server, so their words are those of the page without script. When
  // the stream cannot be had (no EventSource, refused, the connection closed for good) or has ended (the run ended
  // or is not yet executed), the page goes back to asking every few seconds.
  var streamUrl = null;
  var source = null;
  var polling = true;
  var withEvents = document.querySelector("[data-live][data-events]");
  if (withEvents && typeof window.EventSource === "function") {
    streamUrl = withEvents.getAttribute("data-events");
    polling = false;
  }

  function startPolling() {
    if (timer === null) {
      timer = window.setInterval(refresh, EVERY_MS);
    }
  }

  function stopPolling() {
    if (timer !== null) {
      window.clearInterval(timer);
      timer = null;
    }
  }

  function closeStream() {
    if (source !== null) {
      source.close();
      source = null;
    }
  }

  // How the live parts are kept fresh, for a reader of the page (and its test): "stream" or "poll".
  function liveBy(how) {
    document.documentElement.setAttribute("data-live-by", how);
  }

  function fallBack() {
    closeStream();
    polling = true;
    liveBy("poll");
    startPolling();
  }

  function openStream() {
    if (source !== null) {
      return;
    }
    source = new window.EventSource(streamUrl);
    source.addEventListener("open", function () {
      liveBy("stream");
    });
    source.addEventListener("progress", refresh);
    source.addEventListener("end", function (event) {
      var ended = {};
      try {
        ended = JSON.parse(event.data);
      } catch (e) {}
      closeStream();
      if (ended.state === "gone") {
        // No longer to be seen by this operator: there is nothing more to show.
        return;
      }
      refresh();
      // The stream ends with the run (or, for a run not yet executed, at once), but a stopped or previewed run can
      // be resumed or executed by another hand: the page asks again every few seconds, as it did before streams.
      fallBack();
    });
    source.addEventListener("error", function () {
      // EventSource reconnects by itself after a dropped connection; once it has given up (the answer was not a
      // stream: refused, signed out, too many streams), the page asks every few seconds instead.
      if (source !== null && source.readyState === window.EventSource.CLOSED) {
        fallBack();
      }
    });
  }

  function start() {
    if (polling) {
      startPolling();
    } else {
      openStream();
    }
  }

  function stop() {
    stopPolling();
    closeStream();
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

  // The transfer dialog's queue picker: when another target node is chosen, the dialog is asked again for that
  // node (the same GET the page works by without script) and only its list of queues and its name are swapped in.
  var targetSelect = document.querySelector("select[data-queues-for]");
  if (targetSelect && targetSelect.form) {
    targetSelect.addEventListener("change", function () {
      var fields = new URLSearchParams(new FormData(targetSelect.form));
      fields.delete("form_token");
      fields.delete("target_queue");
      swapFrom("/console/transfer/new?" + fields.toString(), ["target-queues", "target-queues-node"])
        .catch(function () {
          // The list stays as it was; a name can still be typed.
        });
    });
  }
})();
