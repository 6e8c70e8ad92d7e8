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

// Timeline charts (templates/web/_chart.html): dragging across the plot selects a range and opens the same
// page with that window (range=custom, start and end in UTC, as the range fields take them); a plain click
// still follows the bar's link. Delegated from the document, so a chart swapped in by live refresh works too.
(function () {
  "use strict";
  var SVG = "http://www.w3.org/2000/svg";
  var MIN_PIXELS = 6;
  var drag = null;
  var swallowClick = false;

  function pad(n) { return (n < 10 ? "0" : "") + n; }
  function utc(ms) {
    var d = new Date(ms);
    return d.getUTCFullYear() + "-" + pad(d.getUTCMonth() + 1) + "-" + pad(d.getUTCDate()) + "T" +
      pad(d.getUTCHours()) + ":" + pad(d.getUTCMinutes()) + ":" + pad(d.getUTCSeconds());
  }
  // The pointer's x in the SVG's own coordinates (its viewBox), whatever size the chart is drawn at.
  function svgX(svg, event) {
    var point = svg.createSVGPoint();
    point.x = event.clientX;
    point.y = event.clientY;
    return point.matrixTransform(svg.getScreenCTM().inverse()).x;
  }
  function plot(svg) {
    return {
      left: parseFloat(svg.getAttribute("data-plot-left")),
      right: parseFloat(svg.getAttribute("data-plot-right")),
      start: Date.parse(svg.getAttribute("data-start")),
      end: Date.parse(svg.getAttribute("data-end"))
    };
  }
  function clamp(x, p) { return Math.min(Math.max(x, p.left), p.right); }
  function timeAt(x, p) { return p.start + (clamp(x, p) - p.left) / (p.right - p.left) * (p.end - p.start); }

  document.addEventListener("pointerdown", function (event) {
    var svg = event.target.closest && event.target.closest("svg.js-zoom");
    if (!svg || event.button !== 0) return;
    var p = plot(svg);
    if (isNaN(p.start) || isNaN(p.end)) return;
    event.preventDefault();  // no native drag of the bar's link, no text selection
    var band = document.createElementNS(SVG, "rect");
    band.setAttribute("class", "zoom-band");
    band.setAttribute("y", "0");
    band.setAttribute("height", svg.viewBox.baseVal.height - 24);
    band.setAttribute("width", "0");
    svg.appendChild(band);
    drag = { svg: svg, plot: p, band: band, from: clamp(svgX(svg, event), p), clientX: event.clientX, moved: false };
    band.setAttribute("x", drag.from);
  });

  document.addEventListener("pointermove", function (event) {
    if (!drag) return;
    if (Math.abs(event.clientX - drag.clientX) >= MIN_PIXELS) drag.moved = true;
    var to = clamp(svgX(drag.svg, event), drag.plot);
    drag.band.setAttribute("x", Math.min(drag.from, to));
    drag.band.setAttribute("width", Math.abs(to - drag.from));
  });

  document.addEventListener("pointerup", function (event) {
    if (!drag) return;
    var d = drag;
    drag = null;
    if (!d.moved) { d.band.remove(); return; }
    swallowClick = true;
    setTimeout(function () { swallowClick = false; }, 0);
    var a = timeAt(d.from, d.plot), b = timeAt(svgX(d.svg, event), d.plot);
    var minute = 60000;
    var start = Math.floor(Math.min(a, b) / minute) * minute;
    var end = Math.max(Math.ceil(Math.max(a, b) / minute) * minute, start + minute);
    var params = new URLSearchParams(location.search);
    params.set("range", "custom");
    params.set("start", utc(start));
    params.set("end", utc(end));
    params.delete("after");
    params.delete("before");
    location.assign(location.pathname + "?" + params.toString());
  });

  document.addEventListener("pointercancel", function () {
    if (drag) { drag.band.remove(); drag = null; }
  });

  // The click that ends a drag must not open the bar it ended on.
  document.addEventListener("click", function (event) {
    if (swallowClick && event.target.closest && event.target.closest("svg.js-zoom")) {
      event.preventDefault();
      event.stopPropagation();
    }
  }, true);

  // "Show in my time zone": the browser's zone, offered when it is not the one shown.
  function offerMyZone(root) {
    var mine = "";
    try { mine = Intl.DateTimeFormat().resolvedOptions().timeZone || ""; } catch (e) { mine = ""; }
    root.querySelectorAll(".js-my-zone").forEach(function (link) {
      if (link.dataset.offered || !mine || mine === "UTC" || mine === link.getAttribute("data-current")) return;
      link.dataset.offered = "1";
      var params = new URLSearchParams(location.search);
      params.set("tz", mine);
      link.href = location.pathname + "?" + params.toString();
      link.textContent = "show in " + mine;
      link.hidden = false;
    });
  }
  offerMyZone(document);
  new MutationObserver(function () { offerMyZone(document); })
    .observe(document.body, { childList: true, subtree: true });
})();
