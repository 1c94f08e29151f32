// FieldOps console behaviour that htmx does not cover. A static file because the
// Content-Security-Policy allows no inline script (fieldops/csp.py).
"use strict";

// <input type="checkbox" data-toggle-target="ID" data-toggle-class="NAME">: the box being
// checked sets class NAME on element ID (the catalog diff's "show only changed lines").
document.addEventListener("change", function (event) {
  const box = event.target.closest("[data-toggle-target]");
  if (!box) return;
  const target = document.getElementById(box.dataset.toggleTarget);
  if (target) target.classList.toggle(box.dataset.toggleClass, box.checked);
});

// <form data-submit-once>: after the first submit its submit buttons are disabled (marked
// busy) until the next page, so a double click sends one request. The server does not rely
// on it: the start form's one-time key makes a second post find the first run anyway.
document.addEventListener("submit", function (event) {
  const form = event.target.closest("form[data-submit-once]");
  if (!form || event.defaultPrevented) return;
  // After this event: a button disabled now would leave its own name out of the post.
  setTimeout(function () {
    form.querySelectorAll("button[type=submit], button:not([type])").forEach(function (b) {
      b.disabled = true;
      b.setAttribute("aria-busy", "true");
    });
  }, 0);
});
// Back to a page kept in the browser's cache: its buttons work again.
window.addEventListener("pageshow", function () {
  document.querySelectorAll("form[data-submit-once] button[aria-busy]").forEach(function (b) {
    b.disabled = false;
    b.removeAttribute("aria-busy");
  });
});

// hx-disabled-elt: while htmx keeps an element disabled for a request it is also marked
// busy (as the data-submit-once buttons are), for assistive technology; the busy state
// ends with the request, also when it fails and nothing was swapped.
document.addEventListener("htmx:beforeSend", function () {
  document.querySelectorAll("[data-disabled-by-htmx]:not([aria-busy])").forEach(function (el) {
    el.setAttribute("aria-busy", "true");
    el.setAttribute("data-busy-by-htmx", "");
  });
});
document.addEventListener("htmx:afterRequest", function () {
  const released = document.querySelectorAll("[data-busy-by-htmx]:not([data-disabled-by-htmx])");
  released.forEach(function (el) {
    el.removeAttribute("aria-busy");
    el.removeAttribute("data-busy-by-htmx");
  });
});
