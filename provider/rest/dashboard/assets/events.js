// Events page: the log as it is appended, filtered by group, slot and type.
"use strict";
(() => {
  const { el, slotLink, claimLink, groupLink, fmtTime, follow } = CS;
  const form = document.getElementById("filters");
  const rows = document.getElementById("event-rows");
  const pauseBtn = document.getElementById("pause");
  const MAX = 500;
  let es = null, lastSeq = 0, paused = false;

  function filters() {
    const q = new URLSearchParams();
    for (const f of ["group", "slot", "type"]) {
      const v = form.elements[f].value.trim();
      if (v) q.set(f, v);
    }
    return q;
  }

  function add(e) {
    lastSeq = e.seq;
    rows.prepend(el("tr", { dataset: { seq: e.seq, type: e.type } },
      el("td", {}, e.seq), el("td", {}, fmtTime(e.time)), el("td", {}, e.type), el("td", {}, e.group ? groupLink(e.group) : ""),
      el("td", {}, e.slot ? slotLink(e.slot) : ""), el("td", {}, e.claim ? claimLink(e.claim) : ""), el("td", {}, e.error ? "unreadable: " + e.error : e.cause || "")));
    while (rows.rows.length > MAX) rows.deleteRow(rows.rows.length - 1);
  }

  // connect starts the stream: the newest 200 matches, or (resuming after
  // a pause) everything after the last one shown.
  function connect(resume) {
    if (es) es.close();
    const q = filters();
    if (resume && lastSeq) q.set("from", lastSeq + 1); else { q.set("last", "200"); rows.replaceChildren(); }
    history.replaceState(null, "", "?" + filters());
    es = follow(q.toString(), add);
  }

  form.addEventListener("submit", (e) => { e.preventDefault(); paused = false; pauseBtn.setAttribute("aria-pressed", "false"); pauseBtn.textContent = "Pause"; connect(false); });
  pauseBtn.addEventListener("click", () => {
    paused = !paused;
    pauseBtn.setAttribute("aria-pressed", String(paused));
    pauseBtn.textContent = paused ? "Resume" : "Pause";
    if (paused) { es.close(); CS.setLive("paused at seq " + lastSeq); } else connect(true);
  });
  const q = new URLSearchParams(location.search);
  for (const f of ["group", "slot", "type"]) if (q.get(f)) form.elements[f].value = q.get(f);
  connect(false);
})();
