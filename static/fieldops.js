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
