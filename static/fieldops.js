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
// <form data-keep-fragment> (the login form): a link to a place in a page (a runbook's
// "#step-5") opened signed out comes to the login page with its "#..." still in the address
// bar, but a browser never sends that part, so the page to come back to ("next") lacked it
// and opened at its top. It is added to "next" as the form is sent (a wrong password first
// renders the form again with "next" as sent, so it is kept for the next try too).
document.addEventListener("submit", function (event) {
  const form = event.target.closest("form[data-keep-fragment]");
  const next = form && form.querySelector("input[name=next]");
  const fragment = window.location.hash;
  if (!next || !next.value || next.value.includes("#")) return;
  if (/^#[A-Za-z][A-Za-z0-9_-]{0,99}$/.test(fragment)) next.value += fragment;
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

// A read the user asked for (a filter form's Apply, a timeline page or kind link: an
// hx-get sent by a form or a link) marks the region it will replace busy until the answer
// arrives: on a slow server the click is seen to be taken (fieldops.css dims the region
// after a short delay, so a quick answer does not flicker). Polls are left out. The
// region is usually replaced by the answer; a refused or failed request unmarks it.
document.addEventListener("htmx:beforeRequest", function (event) {
  const elt = event.detail.elt;
  const target = event.detail.target;
  if (!(elt instanceof Element) || !elt.matches("form[hx-get], a[hx-get]") || !target) return;
  target.setAttribute("aria-busy", "true");
  target.setAttribute("data-loading", "");
});
document.addEventListener("htmx:afterRequest", function (event) {
  const target = event.detail.target;
  if (!target || !target.hasAttribute("data-loading")) return;
  target.removeAttribute("aria-busy");
  target.removeAttribute("data-loading");
});

// A block that scrolls (pre.json: overflow auto, max-height; a .table-scroll box around a
// table wider than a phone) is a tab stop, so a keyboard user can reach it and scroll it
// with the arrow keys; one that fits needs no tab stop. Measured again when a <details>
// opens (closed, it has no size), after htmx swaps and when the window is resized.
function markScrollable(root) {
  root.querySelectorAll("pre.json, .table-scroll").forEach(function (block) {
    const scrolls = block.scrollHeight > block.clientHeight || block.scrollWidth > block.clientWidth;
    if (scrolls) block.setAttribute("tabindex", "0");
    else if (block.getAttribute("tabindex") === "0") block.removeAttribute("tabindex");
  });
}
document.addEventListener("DOMContentLoaded", function () { markScrollable(document); });
document.addEventListener("toggle", function (event) { markScrollable(event.target); }, true);
document.addEventListener("htmx:afterSettle", function (event) { markScrollable(event.target); });
let resizeTimer = null;
window.addEventListener("resize", function () {
  clearTimeout(resizeTimer);
  resizeTimer = setTimeout(function () { markScrollable(document); }, 150);
});

// A page rendered after a refused form post: the keyboard and screen-reader user starts at
// the first field the server marked invalid (its aria-describedby reads the error), or at
// an error without a field (marked tabindex="-1"), instead of at the top of the page.
// A refused one-line field comes back as typed, selected, so typing replaces the bad value.
// A page an action redirected to (the catalog import's result) marks the heading of what
// happened [data-focus-on-load][tabindex="-1"]: focus starts there when nothing was refused.
document.addEventListener("DOMContentLoaded", function () {
  const first = document.querySelector('main [aria-invalid="true"]:not([disabled])') ||
    document.querySelector('main [role="alert"][data-form-error][tabindex="-1"]') ||
    document.querySelector('main [data-focus-on-load][tabindex="-1"]');
  if (!first) return;
  first.focus();
  if (first.tagName === "INPUT" && typeof first.select === "function") first.select();
});

// The outcome of a form a page was redirected after ("Run cancelled: ...", a refusal)
// is shown in the page's message list, which is there as the page loads: a screen reader
// does not read a live region that is not changed, so the user heard nothing of it. Once
// the page has loaded, the page's one live region (#live-announcer, base.html) says it.
window.addEventListener("load", function () {
  const list = document.querySelector("main .messages");
  const announcer = document.getElementById("live-announcer");
  if (!list || !announcer) return;
  const said = Array.from(list.querySelectorAll("li")).map(function (li) {
    return li.textContent.replace(/\s+/g, " ").trim();
  }).filter(Boolean).join(" ");
  // A moment after the load, when a screen reader has started reading the new page.
  setTimeout(function () { announcer.textContent = said; }, 250);
});

// Auto-refreshing regions are replaced whole (hx-swap="outerHTML"), and a screen reader
// does not announce a live region that is itself replaced. The page's one live region that
// is never swapped (#live-announcer, base.html) says a region's [data-live-summary] line
// when a refresh changed it: once, briefly, and not every refresh.
function liveSummary(region) {
  const line = region && region.querySelector("[data-live-summary]");
  return line ? line.textContent.replace(/\s+/g, " ").trim() : "";
}
// A region a filter form replaced (the user asked for it) is said every time, also when
// its words did not change: the region is emptied first, so a screen reader reads it again.
const summariesBefore = new Map();
const askedByForm = new Set();
document.addEventListener("htmx:beforeRequest", function (event) {
  const elt = event.detail.elt;
  const region = event.detail.target;
  if (elt instanceof Element && elt.tagName === "FORM" && region && region.id) {
    askedByForm.add(region.id);
  }
});
document.addEventListener("htmx:beforeSwap", function (event) {
  const region = event.detail.target;
  if (!region || !region.id) return;
  summariesBefore.set(region.id, askedByForm.delete(region.id) ? null : liveSummary(region));
});
let summaryTimer = null;
document.addEventListener("htmx:afterSettle", function () {
  const announcer = document.getElementById("live-announcer");
  summariesBefore.forEach(function (before, id) {
    summariesBefore.delete(id);
    const now = liveSummary(document.getElementById(id));
    if (!announcer || !now) return;
    if (before === null) {
      announcer.textContent = "";
      clearTimeout(summaryTimer);
      summaryTimer = setTimeout(function () { announcer.textContent = now; }, 100);
    } else if (now !== before) {
      announcer.textContent = now;
    }
  });
});

// A swap that reports an outcome (an element with [data-announce]: a fault-lab row whose
// fixture just finished) is said in the same live region every time, also when the words
// are the same as last time: the region is emptied first, so a screen reader reads it
// again. Outcomes that arrive within the same 100 ms are said together, in the order they
// arrived, so none replaces another. Focus is not touched.
let announceTimer = null;
let announcePending = [];
document.addEventListener("htmx:afterSettle", function (event) {
  const root = event.target;
  if (!(root instanceof Element)) return;
  const outcome = root.matches("[data-announce]") ? root : root.querySelector("[data-announce]");
  const announcer = document.getElementById("live-announcer");
  if (!outcome || !announcer) return;
  announcePending.push(outcome.getAttribute("data-announce"));
  outcome.removeAttribute("data-announce");
  announcer.textContent = "";
  clearTimeout(announceTimer);
  announceTimer = setTimeout(function () {
    announcer.textContent = announcePending.join(" ");
    announcePending = [];
  }, 100);
});

// The same swap would drop a keyboard user whose focus was inside the region to <body>,
// the top of the page. htmx itself restores focus to an element with the same id (every
// control in a refreshing region has one); when it could not (the control is gone, or a
// new region's control has no id), focus goes to the same control found by element, link
// target, name, value and text, or else to the region itself.
const FOCUSABLE = "a[href], button, input, select, textarea, summary, [tabindex]";
function focusKey(el) {
  return [el.tagName, el.getAttribute("href"), el.getAttribute("name"),
    el.getAttribute("value"), el.textContent.trim()].join("\u0000");
}
const focusBefore = new Map();
function noteFocus(event) {
  const region = event.detail.target;
  const active = document.activeElement;
  if (region && region.id && active && active !== document.body && region.contains(active)) {
    focusBefore.set(region.id, focusKey(active));
  }
}
// Also before the request: hx-disabled-elt disables the control that sent it (a disabled
// control loses focus) before any swap, and htmx:beforeRequest comes before that.
document.addEventListener("htmx:beforeRequest", noteFocus);
document.addEventListener("htmx:beforeSwap", noteFocus);
// A part swapped out of band (a run's actions when the run has ended: the cancel form
// gives way to "The run has ended") is a region of its own: focus inside it goes to the
// same control if it is still there, or else to the part itself, not to <body>.
document.addEventListener("htmx:oobBeforeSwap", noteFocus);
// A request that failed swaps nothing: focus goes back to the control, usable again.
document.addEventListener("htmx:afterRequest", function (event) {
  if (!event.detail.successful) restoreFocus();
});
document.addEventListener("htmx:afterSettle", restoreFocus);
function restoreFocus() {
  focusBefore.forEach(function (key, id) {
    focusBefore.delete(id);
    const region = document.getElementById(id);
    if (!region || (document.activeElement && document.activeElement !== document.body)) return;
    const same = Array.from(region.querySelectorAll(FOCUSABLE)).find(function (el) {
      return focusKey(el) === key;
    });
    if (same) {
      same.focus({ preventScroll: true });
    } else {
      region.setAttribute("tabindex", "-1");
      region.focus({ preventScroll: true });
    }
  });
}

// The same swap put every box in the region that scrolls on its own back at its start: a
// table swiped sideways on a phone (the approval queue, every 5 s) jumped back to its
// first column. A scrolled box with an id gets its scroll position back after the swap.
const scrollBefore = new Map();
function noteScroll(event) {
  const region = event.detail.target;
  if (!(region instanceof Element)) return;
  [region].concat(Array.from(region.querySelectorAll("[id]"))).forEach(function (el) {
    if (el.id && (el.scrollLeft || el.scrollTop)) {
      scrollBefore.set(el.id, [el.scrollLeft, el.scrollTop]);
    }
  });
}
function restoreScroll() {
  scrollBefore.forEach(function (position, id) {
    const el = document.getElementById(id);
    if (el) {
      el.scrollLeft = position[0];
      el.scrollTop = position[1];
    }
  });
}
document.addEventListener("htmx:beforeSwap", noteScroll);
document.addEventListener("htmx:oobBeforeSwap", noteScroll);
document.addEventListener("htmx:afterSwap", restoreScroll);  // before it is painted
document.addEventListener("htmx:afterSettle", function () {
  restoreScroll();
  scrollBefore.clear();
});

// A request a person sent (a form: a fault-lab Run, a filter; a timeline link) that the
// server refuses (a stale CSRF token after signing in elsewhere: the 403 page; a 400, 404,
// 409 or 500 page) is not swapped by htmx, and one that gets no answer at all (the
// connection dropped, the server restarting) ends with nothing to swap: the page showed
// nothing at all. Say what the server's page says, or that no answer came, in one alert
// at the top of the content with a link to reload, as text only (nothing of the answer is
// inserted as HTML). Focus stays on the control (see restoreFocus); polls are left out:
// the next poll tries again. The next request a person sends clears it.
function refusalText(xhr) {
  const doc = new DOMParser().parseFromString(xhr.responseText || "", "text/html");
  const card = doc.querySelector("main [role=alert]") || doc.querySelector("main");
  const heading = card && card.querySelector("h1");
  const lines = card ? Array.from(card.querySelectorAll("p")).slice(0, 2).map(function (p) {
    return p.textContent.replace(/\s+/g, " ").trim();
  }) : [];
  const title = heading ? heading.textContent.trim() : "HTTP " + xhr.status;
  return [title].concat(lines.filter(Boolean));
}
const NO_ANSWER = [
  "No answer from the server",
  "The request could not reach the server or its answer was lost (the connection dropped or the server is restarting).",
  "Reload this page to see what is recorded before you send it again.",
];
function sentByPerson(event) {
  const elt = event.detail.elt;
  return elt instanceof Element && (elt.closest("form") !== null || elt.matches("a[hx-get]"));
}
function showRefusal(lines) {
  const main = document.getElementById("main");
  if (!main) return;
  const box = document.createElement("div");
  box.id = "request-refused";
  box.className = "card conflict";
  box.setAttribute("role", "alert");
  const title = document.createElement("strong");
  title.className = "error";
  title.textContent = lines[0];
  box.appendChild(title);
  lines.slice(1).forEach(function (line) {
    const p = document.createElement("p");
    p.textContent = line;
    box.appendChild(p);
  });
  const reload = document.createElement("a");
  reload.href = window.location.href;
  reload.textContent = "Reload this page";
  box.appendChild(reload);
  const old = document.getElementById("request-refused");
  if (old) old.remove();
  main.insertBefore(box, main.firstChild);
}
document.addEventListener("htmx:beforeRequest", function (event) {
  if (!sentByPerson(event)) return;
  const old = document.getElementById("request-refused");
  if (old) old.remove();
});
document.addEventListener("htmx:responseError", function (event) {
  if (sentByPerson(event)) showRefusal(refusalText(event.detail.xhr));
});
document.addEventListener("htmx:sendError", function (event) {
  if (sentByPerson(event)) showRefusal(NO_ANSWER);
});

// A region that refreshes itself (hx-trigger "every Ns": the run page, the approvals
// queue, an operation's progress) whose refresh gets no answer or an error page kept
// showing what it last had, as if current, while the run may have moved on. One status
// line at the top of the content says the live updates are paused and since when; the
// next answered refresh removes it (htmx keeps polling after a failure).
function sentByPoll(event) {
  const elt = event.detail.elt;
  return elt instanceof Element && /\bevery\b/.test(elt.getAttribute("hx-trigger") || "");
}
function livePaused() {
  if (document.getElementById("live-paused")) return;
  const main = document.getElementById("main");
  if (!main) return;
  const note = document.createElement("p");
  note.id = "live-paused";
  note.className = "card conflict";
  note.setAttribute("role", "status");
  const since = new Date().toISOString().slice(11, 19);
  note.textContent = "Live updates paused since " + since + " UTC: the server did not " +
    "answer the refresh, so this page shows what it had then. Trying again; reload to check now.";
  main.insertBefore(note, main.firstChild);
}
document.addEventListener("htmx:sendError", function (event) {
  if (sentByPoll(event)) livePaused();
});
document.addEventListener("htmx:responseError", function (event) {
  if (sentByPoll(event)) livePaused();
});
document.addEventListener("htmx:afterRequest", function (event) {
  if (!sentByPoll(event) || !event.detail.successful) return;
  const note = document.getElementById("live-paused");
  if (note) note.remove();
});

// A part a page loads once after itself (hx-trigger "load": the runs list's per-state
// counts) kept its placeholder ("Counting per state…") for good when that request got no
// answer or an error page, as if the answer were still coming. The placeholder says the
// part could not be loaded and offers the reload; the rest of the page stays usable.
function sentOnLoad(event) {
  const elt = event.detail.elt;
  return elt instanceof Element && /^\s*load\s*$/.test(elt.getAttribute("hx-trigger") || "");
}
function notLoaded(event, why) {
  const elt = event.detail.elt;
  if (event.detail.target !== elt) {
    showRefusal(why);
    return;
  }
  elt.removeAttribute("hx-trigger");
  elt.textContent = "";
  const note = document.createElement("span");
  note.className = "error";
  note.textContent = "This part could not be loaded (" + why[0] + "). ";
  const reload = document.createElement("a");
  reload.href = window.location.href;
  reload.textContent = "Reload";
  elt.appendChild(note);
  elt.appendChild(reload);
}
document.addEventListener("htmx:sendError", function (event) {
  if (sentOnLoad(event)) notLoaded(event, NO_ANSWER);
});
document.addEventListener("htmx:responseError", function (event) {
  if (sentOnLoad(event)) notLoaded(event, refusalText(event.detail.xhr));
});

// A filter form that htmx applies pushes its URL (runs, approvals, catalog, routing): each
// filter is a history entry, and back or forward restores htmx's copy of that entry's page.
// The copy is HTML, which carries a form control's value as first rendered, not as chosen
// since: going back showed the list of that entry under a filter form that said something
// else ("any" above a list filtered to one state), and the next Apply selected what the
// form said. After a restore the filter form is set from the entry's own URL; a name not
// in the URL gets the value the page was rendered with.
document.addEventListener("htmx:historyRestore", function () {
  const params = new URLSearchParams(window.location.search);
  document.querySelectorAll("form[hx-get][hx-push-url]").forEach(function (form) {
    Array.from(form.elements).forEach(function (el) {
      if (!el.name) return;
      const has = params.has(el.name);
      if (el.tagName === "SELECT") {
        Array.from(el.options).forEach(function (option) {
          option.selected = has ? params.getAll(el.name).includes(option.value) : option.defaultSelected;
        });
      } else if (el.type === "checkbox" || el.type === "radio") {
        el.checked = has ? params.getAll(el.name).includes(el.value) : el.defaultChecked;
      } else if (el.tagName === "TEXTAREA" || (el.tagName === "INPUT" && el.type !== "hidden")) {
        el.value = has ? params.get(el.name) : el.defaultValue;
      }
    });
  });
});

// A filter form that applies itself when a choice changes (the catalog, routing) is also
// sent by its Apply button: the second request pushed the same address again, so Back
// seemed to do nothing. A push of the address the page already shows replaces it instead:
// one history entry per filter.
document.addEventListener("htmx:beforeHistoryUpdate", function (event) {
  const update = event.detail.history;
  if (!update || update.type !== "push") return;
  if (new URL(update.path, window.location.href).href === window.location.href) {
    update.type = "replace";
  }
});

// <form data-action-follows-url> (the runs list's bulk cancel) posts to an address that
// carries the list's filter, so a refused post comes back on the list as it was filtered.
// A filter applied by htmx changes the page's URL but not that address: it is set to the
// page's query whenever htmx pushes or restores a history entry.
function actionsFollowUrl() {
  document.querySelectorAll("form[data-action-follows-url]").forEach(function (form) {
    const action = new URL(form.getAttribute("action"), window.location.href);
    form.setAttribute("action", action.pathname + window.location.search);
  });
}
document.addEventListener("htmx:pushedIntoHistory", actionsFollowUrl);
document.addEventListener("htmx:historyRestore", actionsFollowUrl);

// A disclosure (<details>: the saved-views menu in the top bar, "Start a run", a run's
// component set, every "show more" of the console) closes on Escape when the focus is
// inside it, summary included, and the focus goes back to its summary: a keyboard user
// who opened one had no way out but Tab through everything in it. The innermost open one
// closes; what was typed or chosen in it stays for when it is opened again.
document.addEventListener("keydown", function (event) {
  if (event.key !== "Escape" || event.defaultPrevented) return;
  const active = document.activeElement;
  const open = active instanceof Element ? active.closest("details[open]") : null;
  const summary = open && open.querySelector(":scope > summary");
  if (!summary) return;
  open.open = false;
  summary.focus();
  event.preventDefault();
});
