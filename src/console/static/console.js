// Live updates for the liaison console: when the server's event stream says something changed,
// fetch this page again and swap its #live part in place. No reload; a form being filled in is
// never clobbered (the swap waits until the field loses focus and is empty, or the form is sent).
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
(function () {
  const source = document.body.dataset.live;
  const status = document.getElementById("live-status");
  if (!source || !window.EventSource) return;
  let busy = false;
  let again = false;

  function editing() {
    const live = document.getElementById("live");
    if (!live) return false;
    const active = document.activeElement;
    if (active && live.contains(active) && /^(TEXTAREA|INPUT)$/.test(active.tagName)) return true;
    return Array.from(live.querySelectorAll("textarea")).some((t) => t.value.trim() !== "");
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
      const live = document.getElementById("live");
      if (fresh && live) live.replaceWith(document.importNode(fresh, true));
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
