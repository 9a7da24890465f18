// claimstream dashboard: helpers shared by every page. No framework, no
// inline script (the Content-Security-Policy forbids it), no innerHTML of
// data: text goes in through textContent only.
"use strict";

const CS = (() => {
  const csrf = document.querySelector('meta[name="csrf-token"]').content;
  const PHASES = ["off", "pending", "booting", "ready", "draining", "failed", "decommissioned"];

  function toLogin() {
    location.href = "/ui/login?next=" + encodeURIComponent(location.pathname + location.search);
  }

  // api reads (or, with a method, writes) the REST API with the session
  // cookie; a write carries the session's CSRF token.
  async function api(path, opts = {}) {
    const init = { credentials: "same-origin", method: opts.method || "GET", headers: { Accept: "application/json" } };
    if (init.method !== "GET") {
      init.headers["X-CSRF-Token"] = csrf;
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(opts.body || {});
    }
    const r = await fetch(path, init);
    if (r.status === 401) {
      toLogin();
      throw new Error("the session ended; log in again");
    }
    const body = await r.json().catch(() => ({}));
    if (!r.ok) throw new Error(body.error || r.status + " " + r.statusText);
    return body;
  }

  // el builds an element: el("a", {href: "/x", class: "y"}, "text", child).
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === "class") e.className = v;
      else if (k === "dataset") Object.assign(e.dataset, v);
      else e.setAttribute(k, v === true ? "" : String(v));
    }
    for (const c of children.flat(Infinity)) {
      if (c === undefined || c === null || c === false) continue;
      e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return e;
  }

  // slotPhase is the phase a slot is shown in: the API's derived phase, and
  // failed for a slot that is off after its last claim failed.
  function slotPhase(s) {
    if (s.phase === "off" && s.lastClaim && s.lastClaim.phase === "failed") return "failed";
    return s.phase || "off";
  }

  const enc = encodeURIComponent;
  const slotHref = (n) => "/ui/slots/" + enc(n);
  const claimHref = (n) => "/ui/claims/" + enc(n);
  const groupHref = (n) => "/ui/#group-" + enc(n);
  const slotLink = (n) => el("a", { href: slotHref(n) }, n);
  const claimLink = (n) => (n ? el("a", { href: claimHref(n) }, n) : "—");
  const groupLink = (n) => (n ? el("a", { href: groupHref(n) }, n) : "—");

  function chip(phase) {
    return el("span", { class: "chip phase-" + phase }, phase);
  }

  function legend() {
    const l = document.getElementById("legend");
    if (l) l.replaceChildren(...PHASES.map(chip));
  }

  function fmtTime(iso) {
    if (!iso) return "—";
    const d = new Date(iso);
    if (isNaN(d)) return String(iso);
    return d.toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z");
  }

  function setLive(text) {
    const l = document.getElementById("live");
    if (l) l.textContent = text;
  }

  // plainEvent adds the short names the pages use to a log entry as the
  // API sends it (a structured CloudEvent): seq from the sequence, the
  // catalog type from "dev.claimstream.<Type>.v1", and the data's cause.
  function plainEvent(e) {
    e.seq = Number(e.sequence);
    const t = /^dev\.claimstream\.(.+)\.v\d+$/.exec(e.type || "");
    if (t) e.type = t[1];
    e.cause = (e.data && e.data.cause) || "";
    return e;
  }

  // follow opens the log's live stream (server-sent events) with query,
  // calling onEvent for each event. The browser reconnects by itself after
  // a cut and resumes from the last id (Last-Event-ID = log sequence); a
  // refused stream (the session ended) sends the page to the login.
  function follow(query, onEvent) {
    const es = new EventSource("/api/v1/events/stream?" + query);
    let last = 0;
    es.onopen = () => setLive(last ? "live · seq " + last : "live");
    es.onmessage = (m) => {
      let e;
      try { e = plainEvent(JSON.parse(m.data)); } catch (_) { return; }
      last = e.seq;
      setLive("live · seq " + last);
      onEvent(e);
    };
    es.onerror = () => {
      if (es.readyState === EventSource.CLOSED) {
        setLive("disconnected");
        api("/api/v1/groups").catch(() => {});
      } else {
        setLive("reconnecting…");
      }
    };
    return es;
  }

  // debounce runs fn once things are quiet for ms (and at least every max).
  function debounce(fn, ms, max) {
    let t = null, first = 0;
    return () => {
      const now = Date.now();
      if (!t) first = now;
      clearTimeout(t);
      const wait = Math.max(0, Math.min(ms, first + max - now));
      t = setTimeout(() => { t = null; fn(); }, wait);
    };
  }

  function facts(pairs) {
    const dl = el("dl", { class: "facts" });
    for (const [k, v] of pairs) dl.append(el("dt", {}, k), el("dd", {}, v === undefined || v === "" ? "—" : v));
    return dl;
  }

  // story renders audit lines (provider/audit) as a table.
  function story(lines) {
    if (!lines || !lines.length) return el("p", {}, "No events.");
    return el("div", { class: "table-wrap" }, el("table", { class: "story" },
      el("caption", { class: "sr-only" }, "The story, oldest first"),
      el("thead", {}, el("tr", {}, el("th", { scope: "col" }, "time"), el("th", { scope: "col" }, "claim"), el("th", { scope: "col" }, "what happened"))),
      el("tbody", {}, lines.map((l) => el("tr", { dataset: { seq: l.seq, type: l.type } },
        el("td", {}, fmtTime(l.at)), el("td", {}, l.claim ? claimLink(l.claim) : ""), el("td", {}, l.text))))));
  }

  function showError(container, err) {
    container.setAttribute("aria-busy", "false");
    container.replaceChildren(el("p", { class: "error", role: "alert" }, String(err.message || err)));
  }

  return { api, el, slotPhase, slotLink, claimLink, groupLink, slotHref, claimHref, chip, legend, fmtTime, follow, debounce, facts, story, showError, PHASES, setLive };
})();
