// The liaison console's one script (the CSP allows no inline script), on every page.
// Live updates: when the server's event stream says something changed, fetch this page again and
// swap its #live part in place. No reload; a form being filled in is never clobbered (the swap
// waits while a field has focus, a text area holds text, or a field she changed is not yet sent).
"use strict";
// Copy buttons: <button data-copy="ID"> copies the text of the element with that id.
document.addEventListener("click", (event) => {
  const button = event.target.closest("button[data-copy]");
  if (!button || !navigator.clipboard) return;
  const source = document.getElementById(button.dataset.copy);
  if (!source) return;
  navigator.clipboard.writeText(source.textContent.trim()).then(
    () => { button.textContent = "Copied"; },
    () => { button.textContent = "Select and copy"; },
  );
});
// Forms that do something that cannot be undone ask first: <form data-confirm="…">.
document.addEventListener("submit", (event) => {
  const message = event.target.dataset && event.target.dataset.confirm;
  if (message && !window.confirm(message)) event.preventDefault();
});
// Times as people read them: the server writes each as <time datetime="…">… UTC</time>; here it
// says it relative to now ("3 min ago", "in 2 hours", "yesterday"), older ones as a local date, with
// the exact local time and the UTC instant on hover. Kept current every 30 s and after each swap.
const localise = (function () {
  if (!window.Intl || !Intl.RelativeTimeFormat) return () => {};
  const relative = new Intl.RelativeTimeFormat(undefined, { numeric: "auto" });
  const exact = new Intl.DateTimeFormat(undefined, { dateStyle: "full", timeStyle: "long" });
  const thisYear = new Intl.DateTimeFormat(undefined, {
    month: "short", day: "numeric", hour: "numeric", minute: "2-digit",
  });
  const otherYear = new Intl.DateTimeFormat(undefined, { dateStyle: "medium" });
  function say(at, now) {
    const s = Math.round((at - now) / 1000);
    const abs = Math.abs(s);
    if (abs < 45) return s <= 0 ? "just now" : "in a moment";
    if (abs < 45 * 60) return relative.format(Math.round(s / 60), "minute");
    if (abs < 22 * 3600) return relative.format(Math.round(s / 3600), "hour");
    if (abs < 6 * 86400) return relative.format(Math.round(s / 86400), "day");
    return new Date(at).getFullYear() === new Date(now).getFullYear()
      ? thisYear.format(at) : otherYear.format(at);
  }
  return function (root) {
    const now = Date.now();
    root.querySelectorAll("time[datetime]").forEach((el) => {
      const at = Date.parse(el.dateTime);
      if (Number.isNaN(at)) return;
      el.textContent = say(at, now);
      el.title = `${exact.format(at)} (${el.dateTime})`;
    });
  };
})();
localise(document);
setInterval(() => localise(document), 30000);
(function () {
  const source = document.body.dataset.live;
  const status = document.getElementById("live-status");
  if (!source || !window.EventSource) return;
  let busy = false;
  let again = false;

  // A field she changed and has not sent: its value is no longer the one the page came with (a
  // select without a `selected` option comes with its first).
  function changed(el) {
    if (el.type === "hidden") return false;
    if (el.tagName === "SELECT") {
      const options = Array.from(el.options);
      if (el.multiple) return options.some((o) => o.selected !== o.defaultSelected);
      const chosen = options.findIndex((o) => o.defaultSelected);
      return el.selectedIndex !== (chosen === -1 ? 0 : chosen);
    }
    if (el.type === "checkbox" || el.type === "radio") return el.checked !== el.defaultChecked;
    return el.value !== el.defaultValue;
  }

  function editing() {
    const live = document.getElementById("live");
    if (!live) return false;
    const active = document.activeElement;
    if (active && live.contains(active) && /^(TEXTAREA|INPUT|SELECT)$/.test(active.tagName)) return true;
    if (Array.from(live.querySelectorAll("textarea")).some((t) => t.value.trim() !== "")) return true;
    return Array.from(live.querySelectorAll("input, select, textarea")).some(changed);
  }

  // What she opened stays open across a swap: a <details> is known by its id, else by the
  // nearest element around it with an id and its place among that element's <details>.
  function key(d) {
    if (d.id) return "#" + d.id;
    const owner = d.parentElement && d.parentElement.closest("[id]");
    if (!owner) return null;
    return owner.id + "/" + Array.prototype.indexOf.call(owner.querySelectorAll("details"), d);
  }

  function keepOpen(from, to) {
    const open = new Set(Array.from(from.querySelectorAll("details[open]")).map(key));
    to.querySelectorAll("details").forEach((d) => { if (open.has(key(d))) d.open = true; });
  }

  async function refresh() {
    if (busy || editing()) { again = true; return; }
    busy = true;
    again = false;
    try {
      const response = await fetch(window.location.href, {
        credentials: "same-origin",
        cache: "no-store",
        headers: { Accept: "text/html" },
      });
      if (response.status === 401) { window.location.reload(); return; }
      if (!response.ok) return;
      const fresh = new DOMParser()
        .parseFromString(await response.text(), "text/html")
        .getElementById("live");
      // She may have started typing while the page was on its way: her text wins, and the swap
      // happens once she is done (the field loses focus empty, or the form is sent).
      if (editing()) { again = true; return; }
      const live = document.getElementById("live");
      if (fresh && live) {
        const swapped = document.importNode(fresh, true);
        localise(swapped);
        keepOpen(live, swapped);
        live.replaceWith(swapped);
      }
    } catch (_) {
      // The server is unreachable for now; the stream's reconnection refreshes again.
    } finally {
      busy = false;
      if (again) setTimeout(refresh, 50);
    }
  }

  function show(text, on) {
    if (!status) return;
    status.textContent = text;
    status.className = on ? "live on" : "live off";
  }

  const events = new EventSource(source);
  events.addEventListener("change", refresh);
  // (Re)connected: catch up on anything that changed while the stream was down.
  events.onopen = () => { show("live", true); refresh(); };
  events.onerror = () => show("reconnecting…", false);
  document.addEventListener("focusout", () => { if (again) setTimeout(refresh, 100); });
})();
