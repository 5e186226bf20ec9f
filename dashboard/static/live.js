// Live updates for Caldera's dashboard: the page names its topic in <body data-topic>; on each
// "changed" server-sent event, fetch this page's content block again and swap it in. Without
// JavaScript (or EventSource) the pages are the same, only not updated live.
(function () {
  "use strict";
  var topic = document.body.getAttribute("data-topic");
  var status = document.getElementById("live");
  if (!topic || !window.EventSource || !window.fetch) { return; }
  var busy = false, again = false;

  function say(text) { if (status) { status.textContent = text; } }

  function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    fetch(window.location.href, { headers: { "X-Fragment": "1" }, cache: "no-store" })
      .then(function (r) {
        if (r.status === 404) { window.location.reload(); }  // it is gone: show the 404 page
        return r.ok ? r.text() : null;
      })
      .then(function (html) {
        if (html !== null) {
          document.getElementById("content").innerHTML = html;  // escaped by the server
          document.body.setAttribute("data-updated", String(Date.now()));
        }
      })
      .catch(function () { say("update failed"); })
      .then(function () {
        busy = false;
        if (again) { again = false; refresh(); }
      });
  }

  var source = new EventSource("/events?topic=" + encodeURIComponent(topic));
  source.addEventListener("open", function () {
    say("live");
    document.body.setAttribute("data-live", "open");
  });
  source.addEventListener("error", function () { say("reconnecting…"); });
  source.addEventListener("changed", refresh);
})();
