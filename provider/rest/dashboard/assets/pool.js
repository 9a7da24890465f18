// Pool page: each group's numbers and last decision, and a grid of its
// slots coloured by phase, kept current from the live event stream.
"use strict";
(() => {
  const { api, el, slotPhase, slotHref, groupLink, claimLink, fmtTime, follow, debounce } = CS;
  const root = document.getElementById("groups");
  const tiles = new Map(); // slot name -> tile element
  let shape = ""; // the groups and slots the page was built for

  function label(phase, s) {
    return s && s.liveClaim ? phase + " · attempt " + ((s.lastClaim && s.lastClaim.attempt) || 1) : phase;
  }

  // setPhase shows phase on a slot's tile (colour, pattern and words).
  function setPhase(tile, phase, s) {
    tile.className = "slot phase-" + phase;
    tile.dataset.phase = phase;
    tile.querySelector(".label").textContent = label(phase, s);
    tile.setAttribute("aria-label", tile.dataset.slot + ": " + phase);
  }

  function decision(g) {
    const d = g.lastDecision;
    if (!d) return "none yet";
    return d.action + " to " + d.target + " (demand " + d.demand + ") at " + fmtTime(d.at) + (d.reason ? ": " + d.reason : "");
  }

  function numbers(g) {
    return el("ul", { class: "numbers" },
      el("li", {}, "target ", el("strong", { dataset: { n: "target" } }, g.targetSize)),
      el("li", {}, "min ", el("strong", {}, g.spec.minSize)),
      el("li", {}, "max ", el("strong", {}, g.effectiveMaxSize)),
      el("li", {}, "live claims ", el("strong", { dataset: { n: "live" } }, g.live)),
      el("li", {}, "free slots ", el("strong", {}, g.free)),
      el("li", {}, "scaler ", el("strong", {}, g.spec.scaler || "cluster-autoscaler")));
  }

  function render(groups, slots) {
    const bySlot = new Map(slots.map((s) => [s.name, s]));
    const newShape = JSON.stringify(groups.map((g) => [g.name, g.slots]));
    if (newShape !== shape) {
      shape = newShape;
      tiles.clear();
      root.replaceChildren(...groups.map((g) => {
        const grid = el("ul", { class: "grid", "aria-label": "Slots of " + g.name });
        for (const name of g.slots) {
          const tile = el("a", { class: "slot", href: slotHref(name), dataset: { slot: name } },
            el("span", { class: "name" }, name), el("span", { class: "label" }));
          tiles.set(name, tile);
          grid.append(el("li", {}, tile));
        }
        return el("section", { class: "card group", id: "group-" + g.name, "aria-labelledby": "h-" + g.name, dataset: { group: g.name } },
          el("h2", { id: "h-" + g.name }, g.name),
          el("div", { class: "nums" }), el("p", { class: "decision" }), grid);
      }));
    }
    for (const g of groups) {
      const sec = document.getElementById("group-" + g.name);
      sec.querySelector(".nums").replaceChildren(numbers(g));
      sec.querySelector(".decision").replaceChildren("Last decision: ", decision(g));
    }
    for (const [name, tile] of tiles) {
      const s = bySlot.get(name);
      if (s) setPhase(tile, slotPhase(s), s);
    }
    root.setAttribute("aria-busy", "false");
  }

  async function load() {
    const [g, s] = await Promise.all([api("/api/v1/groups"), api("/api/v1/slots")]);
    render(g.items, s.items);
    document.body.dataset.seq = Math.min(g.seq, s.seq);
    return Math.min(g.seq, s.seq);
  }

  // A claim's first moves are shown as their events arrive (a claim can be
  // created and booting within milliseconds); the views then confirm.
  const immediate = { ClaimCreated: "pending", ClaimBooting: "booting" };
  const refresh = debounce(() => load().catch((e) => CS.setLive("error: " + e.message)), 250, 1000);

  CS.legend();
  load().then((seq) => {
    follow("from=" + (seq + 1), (e) => {
      const tile = e.slot && tiles.get(e.slot);
      if (tile && immediate[e.type]) setPhase(tile, immediate[e.type], null);
      refresh();
    });
  }).catch((e) => CS.showError(root, e));
})();
