// meshd status page: renders the state snapshots and inbox items that
// GET /events streams. Everything from the mesh is set as text
// (textContent, SVG attributes), never parsed as markup.
"use strict";

(function () {
  const SVG_NS = "http://www.w3.org/2000/svg";
  const MAX_TAIL = 200;      // tail entries kept on the page
  const STALE_AFTER = 5000;  // ms without a snapshot before the badge says so

  const $ = (id) => document.getElementById(id);

  // el makes an element with a class and text content.
  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }

  function svg(tag, attrs) {
    const e = document.createElementNS(SVG_NS, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
    return e;
  }

  function row(cells) {
    const tr = document.createElement("tr");
    for (const c of cells) tr.appendChild(c);
    return tr;
  }

  function td(text, cls) { return el("td", cls, text); }

  // fmtAge renders seconds for people: 850ms, 42s, 4m12s, 2h3m, 3d4h.
  function fmtAge(s) {
    if (!isFinite(s) || s < 0) s = 0;
    if (s < 1) return Math.round(s * 1000) + "ms";
    if (s < 60) return Math.round(s) + "s";
    const m = Math.floor(s / 60);
    if (m < 60) return m + "m" + Math.round(s - m * 60) + "s";
    const h = Math.floor(m / 60);
    if (h < 48) return h + "h" + (m - h * 60) + "m";
    const d = Math.floor(h / 24);
    return d + "d" + (h - d * 24) + "h";
  }

  function fmtRate(x) {
    if (!isFinite(x)) return "–";
    return x >= 100 ? x.toFixed(0) : x.toFixed(1);
  }

  function fmtTime(iso) {
    const d = new Date(iso);
    return isNaN(d) ? "" : d.toLocaleTimeString();
  }

  function label(name, fp) { return name ? name : fp; }

  function presenceCell(state) {
    const c = el("td");
    c.appendChild(el("span", "dot " + (state || "unknown")));
    c.appendChild(document.createTextNode(state || "unknown"));
    return c;
  }

  function setEmpty(id, empty) { $(id).hidden = !empty; }

  // --- header -------------------------------------------------------------

  function renderSelf(snap) {
    const s = snap.self;
    $("self-name").textContent = label(s.name, s.fingerprint);
    $("self-role").textContent = s.role;
    $("self-fp").textContent = s.fingerprint + "  " + s.key;
    document.title = "meshd · " + label(s.name, s.fingerprint);
    const facts = [
      ["org", s.org],
      ["roster", "v" + s.roster_version + " · " + s.roster_members + " members"],
      ["links", s.links],
      ["uptime", fmtAge(s.uptime_seconds)],
      ["listen", (s.listen || []).join(" ")],
    ];
    const dl = $("self-facts");
    dl.replaceChildren();
    for (const [k, v] of facts) {
      const d = el("div");
      d.appendChild(el("dt", null, k));
      d.appendChild(el("dd", null, v));
      dl.appendChild(d);
    }
  }

  // --- traffic ------------------------------------------------------------

  let prev = null; // {at: ms, counters}

  function sumPrefix(c, prefix) {
    let n = 0;
    for (const [k, v] of Object.entries(c)) if (k.startsWith(prefix)) n += v;
    return n;
  }

  // drops are the counters of what the node dropped: drop.REASON for
  // envelopes, and the queue and send drops.
  function drops(c) {
    const out = {};
    for (const [k, v] of Object.entries(c)) {
      if (k.startsWith("drop.")) out[k.slice(5)] = v;
      else if (k.includes(".dropped.")) out[k] = v;
    }
    return out;
  }

  function renderTraffic(snap) {
    const c = snap.self.counters || {};
    const at = Date.parse(snap.time);
    const rate = (v, old) => {
      if (!prev || at <= prev.at) return NaN;
      return Math.max(0, v - (old || 0)) / ((at - prev.at) / 1000);
    };
    const pc = prev ? prev.counters : {};
    // Out counts first sends and re-sends of kept envelopes alike, as
    // meshctl top does.
    const sent = (x) => (x["tx.envelopes"] || 0) + (x["tx.forwarded"] || 0);
    const stats = [
      ["envelopes in /s", fmtRate(rate(c["rx.envelopes"] || 0, pc["rx.envelopes"]))],
      ["envelopes out /s", fmtRate(rate(sent(c), sent(pc)))],
      ["received", c["rx.envelopes"] || 0],
      ["sent", sent(c)],
      ["delivered to inbox", c["inbox.items"] || 0],
      ["dropped", sumPrefix(c, "drop.")],
    ];
    const dl = $("traffic");
    dl.replaceChildren();
    for (const [k, v] of stats) {
      const d = el("div");
      d.appendChild(el("dt", null, k));
      d.appendChild(el("dd", null, v));
      dl.appendChild(d);
    }
    const now = drops(c), before = drops(pc);
    const body = $("drops").tBodies[0];
    body.replaceChildren();
    const reasons = Object.keys(now).sort();
    for (const r of reasons) {
      body.appendChild(row([td(r, "mono"), td(now[r], "num"), td(fmtRate(rate(now[r], before[r])), "num")]));
    }
    setEmpty("drops-empty", reasons.length === 0);
    prev = { at: at, counters: c };
  }

  // --- peers, roster, channels ----------------------------------------------

  function presenceOf(snap) {
    const m = new Map();
    for (const e of (snap.presence && snap.presence.entries) || []) m.set(e.key, e.state);
    return m;
  }

  function renderPeers(snap, pres) {
    const at = Date.parse(snap.time);
    const body = $("peers").tBodies[0];
    body.replaceChildren();
    for (const p of snap.peers) {
      const tr = row([
        td(label(p.name, p.fingerprint), "name"),
        td(p.role),
        presenceCell(pres.get(p.key)),
        td(p.network),
        td(p.direction),
        td(p.address, "mono"),
        td(fmtAge(p.link_age_seconds), "num"),
        td(fmtAge((at - Date.parse(p.last_seen)) / 1000) + " ago", "num"),
      ]);
      tr.dataset.fingerprint = p.fingerprint;
      body.appendChild(tr);
    }
    $("peers-count").textContent = String(snap.peers.length);
    setEmpty("peers-empty", snap.peers.length === 0);
  }

  function renderRoster(snap, pres) {
    const linked = new Set(snap.peers.map((p) => p.key));
    const body = $("roster").tBodies[0];
    body.replaceChildren();
    const members = [...snap.roster.members].sort((a, b) =>
      label(a.name, a.fingerprint).localeCompare(label(b.name, b.fingerprint)));
    for (const m of members) {
      const self = m.key === snap.self.key;
      const link = self ? "this node" : linked.has(m.key) ? "linked" : "–";
      body.appendChild(row([
        td(label(m.name, m.fingerprint) + (m.archive ? " (archive)" : ""), "name"),
        td(m.role),
        td(m.fingerprint, "mono"),
        presenceCell(pres.get(m.key)),
        td(link),
      ]));
    }
    $("roster-version").textContent = snap.roster.org + " v" + snap.roster.version +
      " · quorum " + snap.roster.quorum;
  }

  function renderChannels(snap) {
    const body = $("channels").tBodies[0];
    body.replaceChildren();
    for (const c of snap.channels) {
      const access = [c.can_read ? "read" : "", c.can_write ? "write" : ""].filter(Boolean).join(", ") || "none";
      const hist = c.allow_history_fetch ? "fetchable" : "not fetchable";
      body.appendChild(row([td("#" + c.name, "name"), td(c.subscription), td(access), td(hist)]));
    }
    $("channels-count").textContent = String(snap.channels.length);
    setEmpty("channels-empty", snap.channels.length === 0);
  }

  // --- graph --------------------------------------------------------------

  function renderGraph(snap) {
    const g = snap.graph;
    const root = $("graph");
    root.replaceChildren();
    const W = 420, H = 380, cx = W / 2, cy = H / 2 - 6;
    const n = g.nodes.length;
    const r = n <= 1 ? 0 : Math.min(150, 40 + n * 22);
    const pos = new Map();
    g.nodes.forEach((node, i) => {
      const a = -Math.PI / 2 + (2 * Math.PI * i) / Math.max(n, 1);
      pos.set(node.key, { x: cx + r * Math.cos(a), y: cy + r * Math.sin(a) });
    });
    const edges = svg("g");
    for (const e of g.edges) {
      const a = pos.get(e.a), b = pos.get(e.b);
      if (!a || !b) continue;
      const line = svg("line", { x1: a.x, y1: a.y, x2: b.x, y2: b.y, class: "edge " + (e.kind === "link" ? "link" : "reported") });
      const t = svg("title");
      t.textContent = e.kind === "link" ? "link (" + (e.network || "?") + ")" : "reported by a peer";
      line.appendChild(t);
      edges.appendChild(line);
    }
    root.appendChild(edges);
    const rad = n > 12 ? 10 : 16;
    for (const node of g.nodes) {
      const p = pos.get(node.key);
      const cls = ["gnode", node.presence || "unknown"];
      if (node.self) cls.push("self");
      const grp = svg("g", { class: cls.join(" ") });
      grp.appendChild(svg("circle", { cx: p.x, cy: p.y, r: rad }));
      let name = label(node.name, node.fingerprint);
      if (name.length > 20) name = name.slice(0, 19) + "…";
      const below = p.y >= cy - 1;
      const ty = below ? p.y + rad + 14 : p.y - rad - 18;
      const t1 = svg("text", { x: p.x, y: ty });
      t1.textContent = name;
      const t2 = svg("text", { x: p.x, y: ty + 12, class: "sub" });
      t2.textContent = node.self ? node.role + " · this node" : node.role;
      const tip = svg("title");
      tip.textContent = label(node.name, "") + " " + node.fingerprint + " (" + (node.presence || "presence unknown") + ")";
      grp.appendChild(tip);
      grp.appendChild(t1);
      grp.appendChild(t2);
      root.appendChild(grp);
    }
  }

  // --- tail ---------------------------------------------------------------

  const shown = new Set(); // item ids on the page

  function itemText(it) {
    switch (it.kind) {
      case "request":
        return it.intent + (it.params ? " " + JSON.stringify(it.params) : "");
      case "response":
        return it.status + (it.result ? " " + JSON.stringify(it.result) : "");
      default:
        return it.body || "";
    }
  }

  function addItem(it, fresh) {
    if (!it || !it.id || shown.has(it.id)) return;
    shown.add(it.id);
    const li = el("li", "item" + (fresh ? " fresh" : ""));
    li.dataset.id = it.id;
    li.dataset.kind = it.kind;
    const meta = el("div", "meta");
    meta.appendChild(el("time", null, fmtTime(it.delivered)));
    meta.appendChild(el("span", "kind", it.kind));
    meta.appendChild(el("span", "from", label(it.from && it.from.name, it.from && it.from.fingerprint)));
    meta.appendChild(el("span", "to", "→ " + it.to));
    meta.appendChild(el("span", "prio-" + it.priority, it.priority));
    if (it.from_history) meta.appendChild(el("span", null, "from history"));
    li.appendChild(meta);
    li.appendChild(el("div", "body", itemText(it)));
    const tail = $("tail");
    tail.prepend(li);
    while (tail.children.length > MAX_TAIL) {
      const last = tail.lastElementChild;
      if (last.dataset.id) shown.delete(last.dataset.id);
      last.remove();
    }
    setEmpty("tail-empty", false);
  }

  function addNote(text) {
    $("tail").prepend(el("li", "note", text));
    setEmpty("tail-empty", false);
  }

  function renderAgents(snap) {
    const body = $("agents").tBodies[0];
    body.replaceChildren();
    const cards = snap.cards || [];
    for (const c of cards) {
      const intents = (c.intents || []).map((i) => i.name + (i.summary ? ": " + i.summary : "")).join("; ");
      const tr = row([
        td(label(c.name, c.fingerprint) + (c.self ? " (self)" : ""), "name"),
        presenceCell(c.presence),
        td(intents || "–"),
        td(c.description || "–"),
        td((c.tags || []).join(", ") || "–"),
      ]);
      tr.dataset.fingerprint = c.fingerprint;
      body.appendChild(tr);
    }
    $("agents-count").textContent = String(cards.length);
    setEmpty("agents-empty", cards.length === 0);
  }

  // --- stream -------------------------------------------------------------

  let lastState = 0;

  function setConn(state, text) {
    const b = $("conn");
    b.dataset.state = state;
    b.textContent = text;
  }

  function render(snap) {
    const pres = presenceOf(snap);
    renderSelf(snap);
    renderTraffic(snap);
    renderPeers(snap, pres);
    renderRoster(snap, pres);
    renderChannels(snap);
    renderAgents(snap);
    renderGraph(snap);
  }

  function parse(data) {
    try {
      return JSON.parse(data);
    } catch (_) {
      return null;
    }
  }

  function connect() {
    const es = new EventSource("/events");
    es.addEventListener("open", () => setConn("live", "live"));
    es.addEventListener("state", (e) => {
      const snap = parse(e.data);
      if (!snap) return;
      lastState = Date.now();
      setConn("live", "live");
      render(snap);
    });
    es.addEventListener("backlog", (e) => addItem(parse(e.data), false));
    es.addEventListener("item", (e) => addItem(parse(e.data), true));
    es.addEventListener("lagged", () => addNote("Some items were skipped: this page fell behind. meshctl inbox lists them."));
    es.addEventListener("error", () => {
      setConn("down", "reconnecting…");
    });
  }

  setInterval(() => {
    if (lastState && Date.now() - lastState > STALE_AFTER && $("conn").dataset.state === "live") {
      setConn("stale", "stale");
    }
  }, 1000);

  connect();
})();
