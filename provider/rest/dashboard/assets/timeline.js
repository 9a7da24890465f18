// Timeline page: one row per slot, each claim's phases as bars over a
// window, failures marked with their reason; a cursor that shows the pool
// at that instant (the API's replay). Drawn on a canvas from the compact
// intervals of GET /api/v1/timeline; only the rows in view are drawn, so a
// thousand slots over a week stay fast.
"use strict";
(() => {
  const { api, el, fmtTime, slotLink, claimLink, groupLink, chip } = CS;
  const COLORS = { off: "#e6e6e6", pending: "#e69f00", booting: "#56b4e9", ready: "#009e73", draining: "#f0e442", failed: "#d55e00", decommissioned: "#4d4d4d" };
  const ROW = 16, AXIS = 22, LABEL = 150;
  const scroll = document.getElementById("tl-scroll");
  const spacer = document.getElementById("tl-spacer");
  const canvas = document.getElementById("tl-canvas");
  const status = document.getElementById("tl-status");
  const cursorBox = document.getElementById("cursor");
  const ctx = canvas.getContext("2d");
  const S = { tl: null, since: 0, dur: 0, v0: 0, v1: 0, rowStart: null, failStart: null, cursor: null, drawn: false, patterns: {} };

  // patterns: stripes over the colour, so phases differ by more than hue.
  function pattern(phase) {
    if (S.patterns[phase] !== undefined) return S.patterns[phase];
    const specs = { pending: [45, "rgba(255,255,255,.45)"], booting: [90, "rgba(255,255,255,.45)"], draining: [-45, "rgba(0,0,0,.25)"], failed: [0, "rgba(0,0,0,.3)"], decommissioned: [0, "rgba(255,255,255,.25)"] };
    const s = specs[phase];
    if (!s) return (S.patterns[phase] = null);
    const p = document.createElement("canvas");
    p.width = p.height = 8;
    const c = p.getContext("2d");
    c.strokeStyle = s[1];
    c.lineWidth = 2;
    c.beginPath();
    if (s[0] === 90) { c.moveTo(4, 0); c.lineTo(4, 8); }
    else if (s[0] === 0) { c.moveTo(0, 4); c.lineTo(8, 4); }
    else if (s[0] === 45) { c.moveTo(0, 8); c.lineTo(8, 0); }
    else { c.moveTo(0, 0); c.lineTo(8, 8); }
    c.stroke();
    return (S.patterns[phase] = ctx.createPattern(p, "repeat"));
  }

  // index finds each row's first bar and failure (both come sorted by row).
  function index(flat, width, rows) {
    const start = new Int32Array(rows + 1);
    let k = 0;
    for (let r = 0; r <= rows; r++) {
      while (k < flat.length && flat[k] < r) k += width;
      start[r] = k;
    }
    return start;
  }

  function fromQuery() {
    const q = new URLSearchParams(location.search);
    const range = q.get("range") || "1h";
    const sel = document.getElementById("range");
    if ([...sel.options].some((o) => o.value === range)) sel.value = range;
    return { range, since: q.get("since"), until: q.get("until"), slot: q.get("slot") };
  }

  const hours = { "1h": 1, "24h": 24, "168h": 168 };

  async function load(w) {
    status.textContent = "Loading…";
    let since = w.since, until = w.until;
    if (w.range !== "custom" || !since || !until) {
      // The server's clock (a simulator's may run ahead of the wall's).
      const r = await fetch("/healthz", { credentials: "same-origin" });
      const now = new Date(r.headers.get("X-Claimstream-Now") || Date.now());
      until = now.toISOString();
      since = new Date(now.getTime() - (hours[w.range] || 1) * 3600e3).toISOString();
    }
    const tl = await api("/api/v1/timeline?since=" + encodeURIComponent(since) + "&until=" + encodeURIComponent(until));
    S.tl = tl;
    S.since = Date.parse(tl.since);
    S.dur = Date.parse(tl.until) - S.since;
    S.v0 = 0; S.v1 = S.dur;
    S.rowStart = index(tl.bars, 5, tl.slots.length);
    S.failStart = index(tl.failures, 4, tl.slots.length);
    spacer.style.height = AXIS + tl.slots.length * ROW + "px";
    // A few rows need no tall empty chart; many scroll within 60% of the view.
    scroll.style.height = Math.max(120, Math.min(window.innerHeight * 0.6, AXIS + tl.slots.length * ROW + 2)) + "px";
    status.textContent = tl.slots.length + " slots, " + (tl.bars.length / 5) + " phase intervals, " + (tl.failures.length / 4) +
      " failures, " + tl.events + " events from " + fmtTime(tl.since) + " to " + fmtTime(tl.until);
    canvas.setAttribute("aria-label", "Phases of " + tl.slots.length + " slots from " + fmtTime(tl.since) + " to " + fmtTime(tl.until));
    draw();
    if (!S.drawn) {
      S.drawn = true;
      // Time from navigation to the first full draw (docs/benchmarks.md).
      document.body.dataset.firstDrawMs = performance.now().toFixed(0);
    }
    document.body.dataset.drawnSeq = tl.seq;
    document.body.dataset.window = tl.since + "/" + tl.until;
    // ?slot= (the slot page's link): bring its row into view and put the
    // cursor at the window's end on it.
    const row = w.slot ? tl.slots.indexOf(w.slot) : -1;
    if (row >= 0) {
      scroll.scrollTop = Math.max(0, row * ROW - scroll.clientHeight / 2);
      showCursor(S.dur - 1, row);
    }
  }

  const xOf = (ms, W) => LABEL + ((ms - S.v0) / (S.v1 - S.v0)) * (W - LABEL);
  const msOf = (x, W) => S.v0 + ((x - LABEL) / (W - LABEL)) * (S.v1 - S.v0);

  function tickStep(span) {
    const steps = [1e3, 5e3, 15e3, 60e3, 300e3, 900e3, 3600e3, 3 * 3600e3, 6 * 3600e3, 12 * 3600e3, 86400e3];
    for (const s of steps) if (span / s <= 8) return s;
    return 86400e3 * Math.ceil(span / 86400e3 / 8);
  }

  function draw() {
    const tl = S.tl;
    if (!tl) return;
    const dpr = window.devicePixelRatio || 1;
    const W = scroll.clientWidth, H = scroll.clientHeight;
    if (canvas.width !== W * dpr || canvas.height !== H * dpr) {
      canvas.width = W * dpr; canvas.height = H * dpr;
      canvas.style.height = H + "px";
      canvas.style.marginBottom = -H + "px";
    }
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, W, H);
    const top = scroll.scrollTop;
    const first = Math.max(0, Math.floor(top / ROW));
    const last = Math.min(tl.slots.length, Math.ceil((top + H - AXIS) / ROW) + 1);
    ctx.font = "12px system-ui, sans-serif";
    ctx.textBaseline = "middle";
    for (let r = first; r < last; r++) {
      const y = AXIS + r * ROW - top;
      ctx.fillStyle = r % 2 ? "#f3f3f3" : "#fbfbfb";
      ctx.fillRect(LABEL, y, W - LABEL, ROW);
      for (let k = S.rowStart[r]; k < S.rowStart[r + 1]; k += 5) {
        const a = tl.bars[k + 1], b = tl.bars[k + 2];
        if (b < S.v0 || a > S.v1) continue;
        const x0 = Math.max(LABEL, xOf(a, W)), x1 = Math.min(W, xOf(b, W));
        const w = Math.max(1, x1 - x0);
        const phase = tl.phases[tl.bars[k + 3]];
        ctx.fillStyle = COLORS[phase];
        ctx.fillRect(x0, y + 2, w, ROW - 4);
        const p = pattern(phase);
        if (p && w > 3) { ctx.fillStyle = p; ctx.fillRect(x0, y + 2, w, ROW - 4); }
      }
      for (let k = S.failStart[r]; k < S.failStart[r + 1]; k += 4) {
        const t = tl.failures[k + 1];
        if (t < S.v0 || t > S.v1) continue;
        const x = xOf(t, W);
        ctx.fillStyle = "#000";
        ctx.beginPath(); ctx.moveTo(x, y + 1); ctx.lineTo(x + 5, y + ROW - 1); ctx.lineTo(x - 5, y + ROW - 1); ctx.closePath(); ctx.fill();
        ctx.fillStyle = "#fff"; ctx.fillRect(x - 0.5, y + 6, 1, 5);
        if ((S.v1 - S.v0) / (W - LABEL) < 2000) { // zoomed in enough: the reason in words
          ctx.fillStyle = "#000"; ctx.fillText(tl.reasons[tl.failures[k + 3]], x + 7, y + ROW / 2);
        }
      }
      ctx.fillStyle = "#fff"; ctx.fillRect(0, y, LABEL, ROW);
      ctx.fillStyle = "#1a1a1a";
      ctx.fillText(tl.slots[r].length > 22 ? tl.slots[r].slice(0, 21) + "…" : tl.slots[r], 4, y + ROW / 2);
    }
    // Axis.
    ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, W, AXIS);
    ctx.fillStyle = "#1a1a1a"; ctx.strokeStyle = "#999";
    const step = tickStep(S.v1 - S.v0);
    const abs0 = S.since + S.v0;
    for (let t = Math.ceil(abs0 / step) * step; t <= S.since + S.v1; t += step) {
      const x = xOf(t - S.since, W);
      ctx.beginPath(); ctx.moveTo(x, AXIS - 5); ctx.lineTo(x, AXIS); ctx.stroke();
      const d = new Date(t).toISOString();
      ctx.fillText(step >= 86400e3 ? d.slice(5, 10) : step >= 60e3 ? d.slice(5, 16).replace("T", " ") : d.slice(11, 19), x + 2, AXIS / 2);
    }
    if (S.cursor !== null && S.cursor >= S.v0 && S.cursor <= S.v1) {
      const x = xOf(S.cursor, W);
      ctx.strokeStyle = "#000"; ctx.lineWidth = 2;
      ctx.beginPath(); ctx.moveTo(x, 0); ctx.lineTo(x, H); ctx.stroke();
      ctx.lineWidth = 1;
    }
  }

  function zoom(f, centerMs) {
    const c = centerMs ?? (S.v0 + S.v1) / 2;
    const span = Math.max(1000, Math.min(S.dur, (S.v1 - S.v0) * f));
    S.v0 = Math.max(0, c - (c - S.v0) * (span / (S.v1 - S.v0)));
    S.v1 = Math.min(S.dur, S.v0 + span);
    S.v0 = Math.max(0, S.v1 - span);
    draw();
  }
  function pan(f) {
    const span = S.v1 - S.v0;
    S.v0 = Math.max(0, Math.min(S.dur - span, S.v0 + span * f));
    S.v1 = S.v0 + span;
    draw();
  }

  // showCursor puts the cursor at ms and shows the pool then, rebuilt by
  // the API's replay (the same code as `claimstream replay --at`).
  let cursorReq = 0;
  async function showCursor(ms, row) {
    S.cursor = Math.max(0, Math.min(S.dur, ms));
    draw();
    const at = new Date(S.since + S.cursor).toISOString();
    const mine = ++cursorReq;
    cursorBox.replaceChildren(el("p", {}, "The pool at " + fmtTime(at) + ": loading…"));
    try {
      const rp = await api("/api/v1/replay?at=" + encodeURIComponent(at));
      if (mine !== cursorReq) return;
      const focus = row !== undefined ? S.tl.slots[row] : null;
      const counts = {};
      for (const s of rp.slots) { const p = CS.slotPhase(s); counts[p] = (counts[p] || 0) + 1; }
      const parts = [el("h2", {}, "The pool at " + fmtTime(rp.at) + " (seq " + rp.seq + ")")];
      if (focus) {
        const s = rp.slots.find((x) => x.name === focus);
        parts.push(el("p", { id: "cursor-slot" }, slotLink(focus), ": ", chip(s ? CS.slotPhase(s) : "off"),
          s && s.liveClaim ? [" claim ", claimLink(s.liveClaim)] : s && s.lastClaim ? [" last claim ", claimLink(s.lastClaim.claim), " (" + s.lastClaim.phase + (s.lastClaim.reason ? ", " + s.lastClaim.reason : "") + ")"] : ""));
      }
      if (row !== undefined) {
        // A failure marker within a few pixels of the click: its reason.
        const W = scroll.clientWidth, tl = S.tl;
        for (let k = S.failStart[row]; k < S.failStart[row + 1]; k += 4) {
          if (Math.abs(xOf(tl.failures[k + 1], W) - xOf(S.cursor, W)) <= 6) {
            parts.push(el("p", { class: "error", id: "cursor-failure" }, "Failed at " + fmtTime(new Date(S.since + tl.failures[k + 1]).toISOString()) + ": ",
              claimLink(tl.claims[tl.failures[k + 2]]), " — " + tl.reasons[tl.failures[k + 3]]));
          }
        }
      }
      parts.push(el("p", {}, Object.entries(counts).map(([p, n]) => [chip(p), " " + n + "  "])));
      parts.push(el("div", { class: "table-wrap" }, el("table", {},
        el("caption", { class: "sr-only" }, "Groups at the cursor"),
        el("thead", {}, el("tr", {}, ["group", "target", "live", "max", "free"].map((h) => el("th", { scope: "col" }, h)))),
        el("tbody", {}, rp.groups.map((g) => el("tr", {}, el("td", {}, groupLink(g.name)), el("td", {}, g.targetSize), el("td", {}, g.live), el("td", {}, g.effectiveMaxSize), el("td", {}, g.free)))))));
      const live = rp.claims.filter((c) => c.phase !== "failed" && c.phase !== "completed");
      if (live.length) {
        parts.push(el("p", {}, "Live claims: ", live.slice(0, 50).map((c, i) => [i ? ", " : "", claimLink(c.name), " (" + (c.phase || "pending") + ")"]), live.length > 50 ? " and " + (live.length - 50) + " more" : ""));
      }
      cursorBox.replaceChildren(...parts);
    } catch (e) {
      if (mine === cursorReq) cursorBox.replaceChildren(el("p", { class: "error", role: "alert" }, "Cannot show the pool then: " + e.message));
    }
  }

  // Pointer: drag pans, a click puts the cursor (or, on a row's name, opens
  // the slot), Ctrl+wheel zooms.
  let drag = null;
  canvas.addEventListener("pointerdown", (e) => { drag = { x: e.clientX, v0: S.v0, moved: false }; canvas.setPointerCapture(e.pointerId); });
  canvas.addEventListener("pointermove", (e) => {
    if (!drag) return;
    const dx = e.clientX - drag.x;
    if (Math.abs(dx) > 3) drag.moved = true;
    if (!drag.moved) return;
    const span = S.v1 - S.v0, W = scroll.clientWidth;
    S.v0 = Math.max(0, Math.min(S.dur - span, drag.v0 - (dx / (W - LABEL)) * span));
    S.v1 = S.v0 + span;
    draw();
  });
  canvas.addEventListener("pointerup", (e) => {
    const d = drag;
    drag = null;
    if (!d || d.moved || !S.tl) return;
    const rect = canvas.getBoundingClientRect();
    const x = e.clientX - rect.left, y = e.clientY - rect.top;
    const row = Math.floor((y - AXIS + scroll.scrollTop) / ROW);
    const valid = y > AXIS && row >= 0 && row < S.tl.slots.length;
    if (x < LABEL) { if (valid) location.href = CS.slotHref(S.tl.slots[row]); return; }
    showCursor(msOf(x, scroll.clientWidth), valid ? row : undefined);
  });
  scroll.addEventListener("wheel", (e) => {
    if (!e.ctrlKey || !S.tl) return;
    e.preventDefault();
    const rect = canvas.getBoundingClientRect();
    zoom(e.deltaY > 0 ? 1.25 : 0.8, msOf(e.clientX - rect.left, scroll.clientWidth));
  }, { passive: false });
  scroll.addEventListener("scroll", () => requestAnimationFrame(draw));
  window.addEventListener("resize", () => requestAnimationFrame(draw));
  canvas.addEventListener("keydown", (e) => {
    if (!S.tl) return;
    const span = S.v1 - S.v0;
    const keys = {
      "+": () => zoom(0.5, S.cursor ?? undefined), "=": () => zoom(0.5, S.cursor ?? undefined), "-": () => zoom(2, S.cursor ?? undefined),
      ArrowLeft: () => showCursor((S.cursor ?? (S.v0 + S.v1) / 2) - span / 50),
      ArrowRight: () => showCursor((S.cursor ?? (S.v0 + S.v1) / 2) + span / 50),
      Enter: () => showCursor(S.cursor ?? (S.v0 + S.v1) / 2),
    };
    if (keys[e.key]) { e.preventDefault(); keys[e.key](); }
  });
  document.getElementById("zoom-in").addEventListener("click", () => zoom(0.5));
  document.getElementById("zoom-out").addEventListener("click", () => zoom(2));
  document.getElementById("pan-left").addEventListener("click", () => pan(-0.25));
  document.getElementById("pan-right").addEventListener("click", () => pan(0.25));
  document.getElementById("zoom-reset").addEventListener("click", () => { S.v0 = 0; S.v1 = S.dur; draw(); });

  const form = document.getElementById("window");
  const range = document.getElementById("range");
  const custom = document.getElementById("custom");
  const localToISO = (v) => (v ? new Date(v + "Z").toISOString() : null);
  function navigate(w) {
    const q = new URLSearchParams({ range: w.range });
    if (w.range === "custom") { q.set("since", w.since); q.set("until", w.until); }
    history.replaceState(null, "", "?" + q);
    load(w).catch((e) => { status.textContent = "Cannot load the timeline: " + e.message; });
  }
  range.addEventListener("change", () => {
    custom.hidden = range.value !== "custom";
    if (range.value !== "custom") navigate({ range: range.value });
  });
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    const since = localToISO(document.getElementById("since").value), until = localToISO(document.getElementById("until").value);
    if (range.value === "custom") {
      if (!since || !until) { status.textContent = "Give both ends of the range (UTC)."; return; }
      navigate({ range: "custom", since, until });
    }
  });

  CS.legend();
  CS.setLive("");
  const w = fromQuery();
  custom.hidden = w.range !== "custom";
  if (w.range === "custom" && w.since && w.until) {
    document.getElementById("since").value = w.since.slice(0, 19);
    document.getElementById("until").value = w.until.slice(0, 19);
  }
  load(w).catch((e) => { status.textContent = "Cannot load the timeline: " + e.message; });
})();
