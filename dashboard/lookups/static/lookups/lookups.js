// Lookup pages: broken thumbnails become placeholders, and a SYNCING owners page refreshes its
// results (the same server-rendered partial) until the provider has finished indexing.
(function () {
  "use strict";

  function placeholder(img) {
    var span = document.createElement("span");
    span.className = "thumb thumb-none";
    span.title = "image did not load";
    span.textContent = "—";
    img.replaceWith(span);
  }

  function watchThumbs(root) {
    root.querySelectorAll("img.js-thumb").forEach(function (img) {
      if (img.complete && img.naturalWidth === 0) {
        placeholder(img);
      } else {
        img.addEventListener("error", function () { placeholder(img); }, { once: true });
      }
    });
  }

  // Replaces the section by the fresh one (liveRefresh, live.js) until the provider has finished.
  function followIndexing(section) {
    var seconds = parseInt(section.getAttribute("data-refresh"), 10) || 5;
    window.liveRefresh(seconds, function (html) {
      var holder = document.createElement("template");
      holder.innerHTML = html.trim();
      var fresh = holder.content.querySelector(".js-lookup-results");
      if (!fresh) { throw new Error("no results in the answer"); }
      section.replaceWith(fresh);
      section = fresh;
      watchThumbs(fresh);
      if (fresh.hasAttribute("data-syncing")) { return true; }
      if (!fresh.querySelector("[data-problem]")) {
        var done = document.createElement("div");
        done.className = "notice notice-success js-synced";
        done.setAttribute("role", "status");
        done.innerHTML = "<strong>Indexing complete.</strong> The provider has indexed this contract; all its owners are listed.";
        fresh.prepend(done);
      }
      return false;
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    watchThumbs(document);
    document.querySelectorAll(".js-lookup-results[data-syncing]").forEach(followIndexing);
  });
})();
