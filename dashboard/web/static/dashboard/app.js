// Small behaviours of the dashboard pages. Every page works without this file; it adds live refresh,
// copy buttons, expand/collapse of the JSON tree and whole-row links.
(function () {
  "use strict";

  // Live refresh: a [data-live] box's content is replaced by the same URL's server-rendered partial
  // (fetched by liveRefresh, live.js) every data-live-interval seconds, until paused.
  function setupLive(box) {
    var control = document.querySelector(".js-live");
    var label = control && control.querySelector(".js-live-label");
    var button = control && control.querySelector(".js-live-toggle");
    var seconds = Math.max(5, parseInt(box.getAttribute("data-live-interval") || "15", 10));
    var key = "live-paused:" + location.pathname;
    var paused = localStorage.getItem(key) === "1";

    function stamp() {
      var d = new Date();
      return d.toISOString().slice(11, 19) + " UTC";
    }
    function show(state, text) {
      if (!control) return;
      control.classList.toggle("paused", state === "paused");
      control.classList.toggle("failed", state === "failed");
      if (label) label.textContent = text;
      if (button) button.textContent = paused ? "Resume" : "Pause";
    }
    var live = window.liveRefresh(seconds, function (html) {
      box.innerHTML = html;
      show("live", "Live · updated " + stamp());
    }, {
      paused: function () { return paused || document.hidden; },
      failed: function () { show("failed", "Refresh failed · retrying"); }
    });
    if (button) {
      button.addEventListener("click", function () {
        paused = !paused;
        localStorage.setItem(key, paused ? "1" : "0");
        show(paused ? "paused" : "live", paused ? "Paused" : "Live · every " + seconds + " s");
        if (!paused) live.now();
      });
    }
    show(paused ? "paused" : "live", paused ? "Paused" : "Live · every " + seconds + " s");
  }

  function copyText(text, button) {
    function done() {
      var old = button.textContent;
      button.textContent = "Copied";
      setTimeout(function () { button.textContent = old; }, 1200);
    }
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(done);
      return;
    }
    var area = document.createElement("textarea");
    area.value = text;
    area.style.position = "fixed";
    area.style.opacity = "0";
    document.body.appendChild(area);
    area.select();
    try { document.execCommand("copy"); done(); } finally { area.remove(); }
  }

  document.addEventListener("click", function (event) {
    var target = event.target;
    var copy = target.closest("[data-copy], [data-copy-url]");
    if (copy) {
      event.preventDefault();
      if (copy.hasAttribute("data-copy")) {
        copyText(copy.getAttribute("data-copy"), copy);
      } else {
        fetch(copy.getAttribute("data-copy-url"), { credentials: "same-origin" })
          .then(function (r) { return r.text(); })
          .then(function (text) { copyText(text, copy); });
      }
      return;
    }
    var toggle = target.closest("[data-tree]");
    if (toggle) {
      var open = toggle.getAttribute("data-tree") === "expand";
      document.querySelectorAll(".json details").forEach(function (d) { d.open = open; });
      return;
    }
    var row = target.closest("tr[data-href]");
    if (row && !target.closest("a, button, input, summary") && !window.getSelection().toString()) {
      if (event.metaKey || event.ctrlKey) window.open(row.getAttribute("data-href"));
      else location.href = row.getAttribute("data-href");
    }
  });

  // A preset choice clears custom dates; typing a date switches the range to custom.
  document.querySelectorAll("form.js-range").forEach(function (form) {
    var range = form.querySelector("[name=range]");
    form.querySelectorAll("[name=start], [name=end]").forEach(function (input) {
      input.addEventListener("change", function () { if (range && input.value) range.value = "custom"; });
    });
    if (range) {
      range.addEventListener("change", function () {
        if (range.value !== "custom") {
          form.querySelectorAll("[name=start], [name=end]").forEach(function (input) { input.value = ""; });
        }
      });
    }
    // Empty fields stay out of the URL, so shared links show only the filters that are set.
    form.addEventListener("submit", function () {
      form.querySelectorAll("input, select").forEach(function (el) {
        if (el.name && !el.value) el.disabled = true;
      });
      setTimeout(function () {
        form.querySelectorAll("input, select").forEach(function (el) { el.disabled = false; });
      }, 0);
    });
  });

  document.querySelectorAll("[data-live]").forEach(setupLive);
})();

// "Go back" buttons, and forms that must be sent once: the button is disabled after the first submit (the
// server refuses a second confirmation anyway; this only spares the user the doubt).
(function () {
  "use strict";
  document.addEventListener("click", function (event) {
    var back = event.target.closest && event.target.closest(".js-back");
    if (back) history.back();
  });
  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (!form.classList || !form.classList.contains("js-once")) return;
    if (form.dataset.sent) { event.preventDefault(); return; }
    form.dataset.sent = "1";
    Array.prototype.forEach.call(form.querySelectorAll("button[type=submit]"), function (b) {
      setTimeout(function () { b.disabled = true; }, 0);
    });
  });
})();
