// Live refresh, the one routine every page uses (the dashboard's [data-live] boxes, a lookup that is
// still indexing). It asks the page's own URL again with the X-Live-Refresh header; the view answers
// only the server-rendered partial the page includes, and says so by echoing the header. Anything
// else (a redirect to the login page, an error page, a dropped connection) counts as a failure.
(function () {
  "use strict";

  var HEADER = "X-Live-Refresh";

  // Every `seconds`, hand this URL's partial to update(html); update returns false to stop, or throws
  // to count the answer as a failure. After a failure, options.failed() is called and the next try
  // waits twice as long, up to a minute. While options.paused() is true, rounds pass without a request.
  // Returns { now: refresh at once }.
  window.liveRefresh = function (seconds, update, options) {
    var opts = options || {};
    var timer = null;

    function schedule(delay) {
      clearTimeout(timer);
      timer = setTimeout(refresh, delay * 1000);
    }
    function refresh() {
      clearTimeout(timer);
      if (opts.paused && opts.paused()) return schedule(seconds);
      var headers = {};
      headers[HEADER] = "1";
      fetch(location.href, { headers: headers, credentials: "same-origin" })
        .then(function (response) {
          if (response.headers.get(HEADER) !== "1") throw new Error("not the partial: HTTP " + response.status);
          return response.text();
        })
        .then(function (html) {
          if (update(html) !== false) schedule(seconds);
        })
        .catch(function () {
          if (opts.failed) opts.failed();
          schedule(Math.min(seconds * 2, 60));
        });
    }

    schedule(seconds);
    return { now: refresh };
  };
})();
