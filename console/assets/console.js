// Progressive enhancement only: every page works without this file.
(function () {
  "use strict";

  // A decision form disables its buttons once sent, so a double click does
  // not send it twice; the server refuses a second answer anyway.
  document.addEventListener("submit", function (ev) {
    var form = ev.target;
    if (!(form instanceof HTMLFormElement) || !form.hasAttribute("data-once")) {
      return;
    }
    window.setTimeout(function () {
      form.querySelectorAll("button").forEach(function (b) { b.disabled = true; });
    }, 0);
  });

  // A decision sent from a list asks first, with the browser's own
  // confirmation; confirmed, it is sent straight to the approval's
  // decision (the same POST its confirmation page sends), otherwise
  // nothing is sent. Without this script the form opens that page.
  document.addEventListener("submit", function (ev) {
    var form = ev.target;
    if (!(form instanceof HTMLFormElement) || !form.hasAttribute("data-confirm")) {
      return;
    }
    ev.preventDefault();
    var button = ev.submitter;
    var decision = button && button.value === "reject" ? "reject" : "approve";
    var verb = decision === "reject" ? "Reject" : "Approve";
    if (!window.confirm(verb + " " + form.getAttribute("data-what") + "?")) {
      return;
    }
    var field = document.createElement("input");
    field.type = "hidden";
    field.name = "decision";
    field.value = decision;
    form.appendChild(field);
    form.action = form.getAttribute("data-decide");
    form.querySelectorAll("button").forEach(function (b) { b.disabled = true; });
    form.submit();
  });

  // Times: every <time datetime> is shown in the browser's time zone and
  // as how long ago (or how far ahead) it is, its absolute time kept in
  // its title. The server's text is UTC, which is what stays without the
  // script.
  var units = [
    ["year", 365 * 24 * 3600], ["month", 30 * 24 * 3600], ["day", 24 * 3600],
    ["hour", 3600], ["minute", 60], ["second", 1]
  ];
  var relative = window.Intl && Intl.RelativeTimeFormat ? new Intl.RelativeTimeFormat(undefined, { numeric: "auto", style: "short" }) : null;
  var absolute = window.Intl && Intl.DateTimeFormat ? new Intl.DateTimeFormat(undefined, { year: "numeric", month: "short", day: "numeric", hour: "numeric", minute: "2-digit", second: "2-digit", timeZoneName: "short" }) : null;
  var short = window.Intl && Intl.DateTimeFormat ? new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" }) : null;

  function ago(t, now) {
    var s = Math.round((t - now) / 1000);
    for (var i = 0; i < units.length; i++) {
      var n = units[i][1];
      if (Math.abs(s) >= n || n === 1) {
        var v = Math.round(s / n);
        return relative ? relative.format(v, units[i][0]) : (v < 0 ? -v + " " + units[i][0] + "s ago" : "in " + v + " " + units[i][0] + "s");
      }
    }
    return "";
  }

  function localTimes(root) {
    var now = Date.now();
    root.querySelectorAll("time[datetime]").forEach(function (el) {
      var t = Date.parse(el.getAttribute("datetime"));
      if (isNaN(t)) {
        return;
      }
      var local = absolute ? absolute.format(new Date(t)) : new Date(t).toString();
      if (!el.hasAttribute("data-utc")) {
        el.setAttribute("data-utc", el.textContent);
      }
      el.textContent = ago(t, now) + " · " + (short ? short.format(new Date(t)) : local);
      el.title = local + " · " + el.getAttribute("data-utc");
      el.setAttribute("data-local", local);
    });
  }

  // Keyboard shortcuts of a list of cards: j/k move between cards, a and r
  // answer the current one (each asks to confirm), Enter opens it, / goes
  // to the search and ? shows the list of shortcuts.
  function cards() {
    return Array.prototype.filter.call(document.querySelectorAll("main article.card"), function (c) {
      return c.querySelector("[data-open]");
    });
  }

  function current(list) {
    for (var i = 0; i < list.length; i++) {
      if (list[i] === document.activeElement || list[i].contains(document.activeElement) || list[i].hasAttribute("data-current")) {
        return i;
      }
    }
    return -1;
  }

  function select(list, i) {
    list.forEach(function (c) { c.removeAttribute("data-current"); });
    var c = list[i];
    c.setAttribute("data-current", "");
    c.tabIndex = -1;
    c.focus();
    c.scrollIntoView({ block: "nearest" });
  }

  function typing(el) {
    return el && (el.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(el.tagName));
  }

  document.addEventListener("keydown", function (ev) {
    if (ev.ctrlKey || ev.metaKey || ev.altKey || typing(ev.target)) {
      return;
    }
    var list = cards();
    var i = current(list);
    switch (ev.key) {
    case "j":
    case "k":
      if (list.length === 0) {
        return;
      }
      select(list, ev.key === "j" ? Math.min(i + 1, list.length - 1) : Math.max(i - 1, 0));
      break;
    case "a":
    case "r":
      if (i < 0) {
        return;
      }
      var b = list[i].querySelector("form[data-confirm] button[value=" + (ev.key === "a" ? "approve" : "reject") + "]");
      if (!b) {
        return;
      }
      b.form.requestSubmit(b);
      break;
    case "Enter":
      if (i < 0 || document.activeElement !== list[i]) {
        return;
      }
      list[i].querySelector("[data-open]").click();
      break;
    case "/":
      var search = document.querySelector("[data-search]");
      if (!search) {
        return;
      }
      search.focus();
      search.select();
      break;
    case "?":
      var help = document.getElementById("shortcuts");
      if (!help) {
        return;
      }
      help.open = !help.open;
      if (help.open) {
        help.querySelector("summary").focus();
      }
      break;
    default:
      return;
    }
    ev.preventDefault();
  });

  function start() {
    localTimes(document);
    // Relative times age: they are said again each minute.
    window.setInterval(function () { localTimes(document); }, 60000);
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
}());
