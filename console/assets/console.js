// Progressive enhancement only: every page works without this file.
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
