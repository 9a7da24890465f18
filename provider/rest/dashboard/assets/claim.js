// Claim page: who asked, which call, attempts, Jobs, deadline and outcome,
// and the claim's story from the log (it survives the claim's collection).
"use strict";
(() => {
  const { api, el, claimLink, slotLink, groupLink, fmtTime, facts, story, chip, follow, debounce } = CS;
  const name = document.body.dataset.name;
  const box = document.getElementById("claim");
  const storyBox = document.getElementById("story");
  let slot = "";

  async function load() {
    const a = await api("/api/v1/audit/claims/" + encodeURIComponent(name));
    slot = a.slot;
    let c = null;
    try { c = await api("/api/v1/claims/" + encodeURIComponent(name)); } catch (_) { /* collected: the story tells it */ }
    const rows = [["slot", slotLink(a.slot)], ["group", groupLink(a.group)]];
    if (c) {
      const phase = c.phase || "pending";
      document.body.dataset.phase = phase;
      rows.push(
        ["phase", [chip(phase === "completed" ? "off" : phase), " " + phase + (c.overdue ? " (overdue)" : "")]],
        ["asked by", c.requestedBy + " at " + fmtTime(c.requestedAt)],
        ["call", (c.request && (c.request.call || c.request.method)) || JSON.stringify(c.request || {})],
        ["attempt", c.attempt],
        ["deadline", c.deadlineAt ? fmtTime(c.deadlineAt) : "none (past the boot window)"],
        ["startup Job", c.startupJob || "none yet"],
        ["shutdown Job", c.lastShutdownJob || "none"],
        ["node", c.node || "—"],
        ["ready at", c.readyAt ? fmtTime(c.readyAt) : "—"],
        ["outcome", c.finishedAt ? (c.phase + (c.reason ? " — " + c.reason : "") + (c.message ? ": " + c.message : "") + " at " + fmtTime(c.finishedAt)) : "still live"],
      );
    } else {
      document.body.dataset.phase = "collected";
      rows.push(["in the views", "no: collected; the story below is from the log"]);
    }
    rows.push(["timeline", el("a", { href: "/ui/timeline?range=1h&slot=" + encodeURIComponent(a.slot) }, "its slot on the timeline")]);
    box.replaceChildren(facts(rows));
    box.setAttribute("aria-busy", "false");
    storyBox.replaceChildren(story(a.lines));
  }

  const refresh = debounce(() => load().catch((e) => CS.setLive("error: " + e.message)), 250, 1000);
  load().then(() => {
    follow("claim=" + encodeURIComponent(name) + (slot ? "&slot=" + encodeURIComponent(slot) : "") + "&last=1", () => refresh());
  }).catch((e) => { CS.showError(box, e); storyBox.replaceChildren(); });
})();
