// Slot page: the slot's state, its claims and its whole story (the audit
// narration), live; buttons to claim, decommission or recommission it
// (absent from the page of a read-only session).
"use strict";
(() => {
  const { api, el, slotPhase, claimLink, groupLink, fmtTime, facts, story, chip, follow, debounce } = CS;
  const name = document.body.dataset.name;
  const box = document.getElementById("slot");
  const storyBox = document.getElementById("story");
  const actions = document.getElementById("actions");
  const result = document.getElementById("action-result");

  async function load() {
    const [s, a] = await Promise.all([api("/api/v1/slots/" + encodeURIComponent(name)), api("/api/v1/audit/slots/" + encodeURIComponent(name))]);
    const phase = slotPhase(s);
    document.body.dataset.phase = phase;
    const lc = s.lastClaim;
    box.replaceChildren(facts([
      ["phase", chip(phase)],
      ["group", groupLink(s.group)],
      ["live claim", s.liveClaim ? claimLink(s.liveClaim) : "none"],
      ["last claim", lc ? [claimLink(lc.claim), " — " + (lc.phase || "pending") + ", attempt " + lc.attempt + ", asked by " + lc.requestedBy + " (" + lc.call + ") at " + fmtTime(lc.requestedAt) + (lc.reason ? ", " + lc.reason : "")] : "none"],
      ["next attempt", s.nextAttempt],
      ["node", s.node && s.node.present ? (s.node.ready ? "Ready" : "NotReady") + (s.node.unschedulable ? ", cordoned" : "") : "absent"],
      ["decommissioned", s.decommissioned ? "by " + (s.decommissioned.by || "?") + " at " + fmtTime(s.decommissioned.at) + (s.decommissioned.reason ? ": " + s.decommissioned.reason : "") : "no"],
      ["provider ID", s.providerID],
      ["claims in the views", s.claims && s.claims.length ? s.claims.map((c, i) => [i ? ", " : "", claimLink(c)]) : "none"],
      ["timeline", el("a", { href: "/ui/timeline?range=1h&slot=" + encodeURIComponent(name) }, "this slot on the timeline")],
    ]));
    box.setAttribute("aria-busy", "false");
    storyBox.replaceChildren(story(a.lines));
    if (actions) {
      actions.hidden = false;
      document.getElementById("do-claim").disabled = !!s.liveClaim || !!s.decommissioned;
      document.getElementById("do-decommission").disabled = !!s.decommissioned;
      document.getElementById("do-recommission").disabled = !s.decommissioned;
    }
    return a.lines.length ? a.lines[a.lines.length - 1].seq : 0;
  }

  // Each button appends its command's events through the API (with the
  // session's CSRF token); the page then shows what the log now says.
  function command(id, verb, confirmText) {
    document.getElementById(id).addEventListener("click", async () => {
      if (confirmText && !window.confirm(confirmText)) return;
      result.textContent = "…";
      try {
        const r = await api("/api/v1/slots/" + encodeURIComponent(name) + "/" + verb, { method: "POST", body: { by: "dashboard", reason: document.getElementById("reason").value } });
        result.textContent = r.events.length ? verb + ": " + r.events.map((e) => e.type).join(", ") + " (seq " + r.seq + ")" : verb + ": nothing to do";
      } catch (e) {
        result.textContent = verb + " refused: " + e.message;
      }
      refresh();
    });
  }
  if (actions) {
    command("do-claim", "claim");
    command("do-decommission", "decommission", "Decommission " + name + "? No claim may be made on it until it is recommissioned.");
    command("do-recommission", "recommission");
  }

  const refresh = debounce(() => load().catch((e) => CS.setLive("error: " + e.message)), 250, 1000);
  load().then(() => {
    follow("slot=" + encodeURIComponent(name) + "&last=1", () => refresh());
  }).catch((e) => { CS.showError(box, e); storyBox.replaceChildren(); });
})();
