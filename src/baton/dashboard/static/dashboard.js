// Baton dashboard glue; everything else is htmx attributes in the markup.
// 1. Keeps the last event id of the page's stream in the stream URL (parameter "after"): the
//    browser's own reconnect sends it as Last-Event-ID, but after an error htmx's SSE extension
//    opens a new EventSource, which would not; with the URL it resumes where the page was.
// 2. Says on the page (a status region) when the live stream is interrupted.
(function () {
  "use strict";

  function withParam(url, name, value) {
    var parsed = new URL(url, window.location.href);
    parsed.searchParams.set(name, value);
    return parsed.pathname + parsed.search;
  }

  function say(text) {
    var region = document.getElementById("connection");
    if (region && region.textContent !== text) {
      region.textContent = text;
    }
  }

  document.addEventListener("htmx:sseMessage", function (evt) {
    var id = evt.detail && evt.detail.lastEventId;
    var body = document.body;
    if (id && body.hasAttribute("sse-connect")) {
      body.setAttribute("sse-connect", withParam(body.getAttribute("sse-connect"), "after", id));
    }
  });
  document.addEventListener("htmx:sseOpen", function () {
    document.body.setAttribute("data-stream", "open");
    say("");
  });
  document.addEventListener("htmx:sseError", function () {
    document.body.setAttribute("data-stream", "interrupted");
    say("Live updates interrupted; reconnecting…");
  });
})();
