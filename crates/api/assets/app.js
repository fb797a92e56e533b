// nfvswitch dashboard. Polls the node's REST API once a second and draws
// everything by hand: gauges and topology in SVG, rate charts on a canvas,
// tables in HTML. No libraries and nothing fetched from elsewhere.
//
// Robustness: every field is read through num/arr/obj/str, so a missing or
// unknown field shows "–" and never throws; each panel renders inside its
// own guard; a failed poll shows the "disconnected — retrying" banner and
// polling goes on.
//
// For tests: <body data-updated> counts successful refreshes and
// data-state is connecting|live|disconnected; VNF cards carry
// data-test="vnf-gauge" data-name data-mpps data-gbps; PMD rows
// data-pmd data-mpps data-busy data-cpp; charts data-samples
// data-last-time data-series; topology boxes data-test="topo-node"; the
// demo panel (shown only while `nfvswitch demo` runs the node)
// data-test="demo" data-run data-runs data-phase data-topology data-vnfs
// data-size data-node.
//
// A node replaced behind the same address (the demo starts a node per
// run) is noticed by its start time: the samples and gauges of the old
// node are dropped and the page draws the new one from scratch.
"use strict";

const REFRESH_MS = 1000;
const TIMEOUT_MS = 2500;
const WINDOW_S = 300;
const FLOWS_EVERY = 5; // refreshes between reads of the flow table
const PALETTE = ["#22d3ee", "#f5a524", "#a78bfa", "#34d399", "#f87171",
  "#60a5fa", "#f472b6", "#facc15", "#2dd4bf", "#fb923c"];
const TYPE_COLORS = { generator: "#34d399", sink: "#94a3b8", receiver: "#2dd4bf",
  "vhost-user": "#a78bfa", ring: "#fb923c", pcap: "#60a5fa", memif: "#f472b6",
  afxdp: "#facc15", afpacket: "#facc15", tap: "#f5a524" };

// ---------------------------------------------------------------------------
// Safe access and formatting.

const num = (x) => (typeof x === "number" && Number.isFinite(x) ? x : null);
const arr = (x) => (Array.isArray(x) ? x : []);
const obj = (x) => (x !== null && typeof x === "object" && !Array.isArray(x) ? x : {});
const str = (x) => (x === null || x === undefined ? "" : String(x));
const $ = (id) => document.getElementById(id);

function rate(x) {
  const v = num(x);
  if (v === null) return "–";
  if (v === 0) return "0";
  if (Math.abs(v) >= 100) return v.toFixed(1);
  if (Math.abs(v) >= 10) return v.toFixed(2);
  return v.toFixed(3);
}

function fixed(x, digits) {
  const v = num(x);
  return v === null ? "–" : v.toFixed(digits);
}

/** 1234567 → "1.23 M". */
function count(x) {
  const v = num(x);
  if (v === null) return "–";
  const a = Math.abs(v);
  for (const [d, s] of [[1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"]]) {
    if (a >= d) return (v / d).toPrecision(3) + " " + s;
  }
  return a >= 10 || v === 0 ? String(Math.round(v)) : v.toPrecision(2);
}

function duration(x) {
  let s = num(x);
  if (s === null) return "–";
  s = Math.floor(s);
  const pad = (n) => String(n).padStart(2, "0");
  if (s < 60) return s + " s";
  if (s < 3600) return Math.floor(s / 60) + " m " + pad(s % 60) + " s";
  if (s < 86400) return Math.floor(s / 3600) + " h " + pad(Math.floor(s / 60) % 60) + " m";
  return Math.floor(s / 86400) + " d " + Math.floor(s / 3600) % 24 + " h";
}

/** The next "nice" number (1, 2, 5 × 10^k) at or above v (at least floor). */
function niceCeil(v, floor) {
  v = Math.max(num(v) ?? 0, floor);
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 5, 10]) if (m * p >= v * 0.9999) return m * p;
  return 10 * p;
}

function scaleLabel(v) {
  return v >= 10 ? String(Math.round(v)) : String(Number(v.toPrecision(3)));
}

// ---------------------------------------------------------------------------
// DOM helpers.

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined) continue;
    if (k === "class") e.className = v;
    else if (k === "text") e.textContent = v;
    else e.setAttribute(k, v);
  }
  for (const k of kids) if (k !== null && k !== undefined) e.append(k);
  return e;
}

const SVG = "http://www.w3.org/2000/svg";
function sv(tag, attrs, parent) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "text") e.textContent = v;
    else e.setAttribute(k, v);
  }
  if (parent) parent.appendChild(e);
  return e;
}

/** Runs one panel's renderer; an error is shown in that panel only. */
function guard(panelId, f) {
  const panel = $(panelId);
  const old = panel && panel.querySelector(":scope > .panel-error");
  try {
    f();
    if (old) old.remove();
  } catch (e) {
    console.error(panelId, e);
    if (!panel) return;
    const msg = "cannot show this: " + (e && e.message ? e.message : e);
    if (old) old.textContent = msg;
    else panel.append(el("p", { class: "panel-error", text: msg }));
  }
}

// ---------------------------------------------------------------------------
// State and polling.

const state = {
  updated: 0,
  failures: 0,
  tick: 0,
  tsOk: false,
  series: [], // rate samples, oldest first (GET /api/v1/timeseries)
  flows: [], // rule strings (GET /api/v1/flows), read every few refreshes
  prevDrops: new Map(), // "port/dir/reason" → [packets, seconds]
  gauges: new Map(), // VNF key → card
  nodeId: null, // name and start time of the node shown
};

async function getJSON(path) {
  const ctl = new AbortController();
  const timer = setTimeout(() => ctl.abort(), TIMEOUT_MS);
  try {
    const r = await fetch(path, { signal: ctl.signal, cache: "no-store" });
    if (!r.ok) throw new Error(path + ": HTTP " + r.status);
    return await r.json();
  } catch (e) {
    throw new Error(e && e.name === "AbortError" ? path + ": no answer" : str(e && e.message ? e.message : e));
  } finally {
    clearTimeout(timer);
  }
}

/** Appends new samples; a clock going backwards (node restarted) resets. */
function mergeSeries(samples) {
  const got = arr(samples).filter((s) => num(obj(s).time) !== null);
  if (!got.length) return;
  const last = () => (state.series.length ? state.series[state.series.length - 1].time : -Infinity);
  if (got[got.length - 1].time < last()) state.series = [];
  for (const s of got) if (s.time > last()) state.series.push(s);
  const cut = last() - WINDOW_S - 1;
  while (state.series.length && state.series[0].time < cut) state.series.shift();
}

/** Ports, PMDs and chains are needed; the rest is optional (an older node
 * may lack an endpoint: its panel stays empty, the rest renders). */
async function refresh() {
  const catchUp = state.series.length === 0 || state.failures > 0 || !state.tsOk;
  const wantFlows = state.tick % FLOWS_EVERY === 0 || state.failures > 0;
  const optional = (p) => getJSON(p).catch(() => null);
  const [ports, pmds, chains, node, ts, flows, demo] = await Promise.all([
    getJSON("api/v1/ports"),
    getJSON("api/v1/pmd"),
    getJSON("api/v1/chains"),
    optional("api/v1/node"),
    optional("api/v1/timeseries?seconds=" + (catchUp ? WINDOW_S : 10)),
    wantFlows ? optional("api/v1/flows") : Promise.resolve(null),
    optional("api/v1/demo"),
  ]);
  if (nodeChanged(obj(node))) {
    // Read again: the samples above may predate the switch-over.
    return refresh();
  }
  state.tsOk = ts !== null;
  mergeSeries(obj(ts).samples);
  if (flows !== null) state.flows = arr(flows).map((f) => str(obj(f).rule));
  const d = { node: obj(node), ports: arr(ports).map(obj), pmds: arr(pmds).map(obj),
    chains: arr(chains).map(obj) };
  guard("header", () => renderHeader(d));
  guard("demo-panel", () => renderDemo(demo === null ? null : obj(demo), d));
  guard("gauges-panel", () => renderGauges(d));
  guard("topology-panel", () => renderTopology(d));
  guard("pmd-panel", () => renderPmds(d));
  guard("ports-panel", () => renderPorts(d));
  guard("drops-panel", () => renderDrops(d));
  guard("port-chart-panel", () => renderPortChart());
  guard("chain-chart-panel", () => renderChainChart());
}

/** True (once) when the node behind the address is another one than last
 * time: forgets what the old node showed. */
function nodeChanged(node) {
  const started = num(node.started);
  if (started === null) return false;
  const id = str(node.name) + "@" + started;
  const was = state.nodeId;
  state.nodeId = id;
  if (was === null || was === id) return false;
  state.series = [];
  state.prevDrops = new Map();
  state.flows = [];
  state.tsOk = false;
  for (const card of state.gauges.values()) card.root.remove();
  state.gauges.clear();
  return true;
}

function connected() {
  state.failures = 0;
  state.updated += 1;
  document.body.dataset.updated = String(state.updated);
  document.body.dataset.state = "live";
  $("banner").hidden = true;
  $("status-text").textContent = "live · " + new Date().toLocaleTimeString();
}

function disconnected(e) {
  state.failures += 1;
  document.body.dataset.state = "disconnected";
  const b = $("banner");
  b.textContent = "disconnected — retrying (" + state.failures + " failed " +
    (state.failures === 1 ? "attempt" : "attempts") + ": " + str(e && e.message ? e.message : e) + ")";
  b.hidden = false;
  $("status-text").textContent = "disconnected";
}

async function loop() {
  const t0 = performance.now();
  try {
    await refresh();
    connected();
  } catch (e) {
    disconnected(e);
  }
  state.tick += 1;
  setTimeout(loop, Math.max(100, REFRESH_MS - (performance.now() - t0)));
}

// ---------------------------------------------------------------------------
// Header.

function renderHeader({ node }) {
  $("node-name").textContent = str(node.name);
  const f = $("facts");
  const cores = arr(node.pmd_cores).map((c) => (num(c) === null ? "unpinned" : "core " + c));
  const mem = obj(node.memory);
  const bits = [
    ["v", str(node.version) || "–"],
    ["up ", duration(node.uptime_secs)],
    ["", (num(node.pmds) ?? "–") + " PMD" + (node.pmds === 1 ? "" : "s") +
      (cores.length ? " (" + cores.join(", ") + ")" : "")],
    ["", (num(node.ports) ?? "–") + " ports"],
    ["", (num(node.flows) ?? "–") + " flows"],
    ["", (num(node.chains) ?? "–") + " chains"],
    ["memory ", str(mem.backing) || "–"],
  ];
  f.replaceChildren();
  bits.forEach(([k, v], i) => {
    if (i) f.append(" · ");
    f.append(k, el("b", { text: v }));
  });
}

// ---------------------------------------------------------------------------
// Demo: which run of `nfvswitch demo` the node is, and what the finished
// runs delivered.

const PHASES = { starting: "starting: VNFs connecting, warming up", measuring: "measuring",
  holding: "holding: Ctrl-C in the demo's terminal stops it", finished: "finished" };

function runLabel(r) {
  return str(r.topology) + " · " + (num(r.vnfs) ?? "–") + " VNF" + (r.vnfs === 1 ? "" : "s") +
    " · " + (num(r.frame_size) ?? "–") + " B";
}

function renderDemo(demo, { chains }) {
  const panel = $("demo-panel");
  if (demo === null) {
    panel.hidden = true;
    return;
  }
  panel.hidden = false;
  const cur = obj(demo.current);
  const phase = str(demo.phase);
  Object.assign(panel.dataset, { run: str(num(demo.run) ?? ""), runs: str(num(demo.runs) ?? ""),
    phase, topology: str(cur.topology), vnfs: str(num(cur.vnfs) ?? ""),
    size: str(num(cur.frame_size) ?? ""), node: str(state.nodeId) });
  let mpps = 0, gbps = 0;
  for (const c of chains) {
    mpps += num(c.egress_mpps) ?? 0;
    gbps += num(c.egress_gbps) ?? 0;
  }
  const now = $("demo-now");
  now.replaceChildren(
    el("span", { text: "run " + (num(demo.run) ?? "–") + " of " + (num(demo.runs) ?? "–") }),
    el("span", { class: "what", text: (str(cur.title) || str(cur.topology)) + " · " +
      (num(cur.vnfs) ?? "–") + " VNF" + (cur.vnfs === 1 ? "" : "s") + " · " +
      (num(cur.frame_size) ?? "–") + " B frames" }),
    el("span", { class: "phase " + phase, text: PHASES[phase] || phase }),
    el("span", { class: "total" }, "delivered ", el("b", { text: rate(mpps) }), " Mpps · ",
      el("b", { class: "g", text: rate(gbps) }), " Gbps"));
  const runs = $("demo-runs");
  runs.replaceChildren();
  const done = arr(demo.done).map(obj);
  done.forEach((r, i) => {
    // While held, the last finished run is the one still running.
    const held = phase === "holding" && i === done.length - 1;
    runs.append(el("span", { class: "run" + (held ? " now" : ""), "data-test": "demo-run" },
      runLabel(obj(r.run)) + ": ", el("b", { text: rate(r.mpps) }), " Mpps ",
      el("b", { text: fixed(r.gbps, 2) }), " Gbps", held ? " · held" : ""));
  });
  if (phase === "starting" || phase === "measuring") {
    runs.append(el("span", { class: "run now" }, runLabel(cur) + ": ", el("b", { text: "now" })));
  }
}

// ---------------------------------------------------------------------------
// Gauges: one card per VNF, Mpps and Gbps semicircles.

const ARC = "M 20 100 A 80 80 0 0 1 180 100";
const ARC_LEN = Math.PI * 80;

function makeGauge(kind, unit) {
  const s = sv("svg", { class: "gauge " + kind, viewBox: "0 -18 200 162" });
  sv("path", { class: "track", d: ARC }, s);
  const arc = sv("path", { class: "arc", d: ARC, "stroke-dasharray": ARC_LEN.toFixed(2) }, s);
  arc.style.strokeDashoffset = ARC_LEN;
  for (let i = 0; i <= 10; i++) {
    const a = Math.PI * (1 - i / 10);
    const r0 = i % 5 === 0 ? 56 : 61;
    sv("line", { class: "tick", x1: 100 + r0 * Math.cos(a), y1: 100 - r0 * Math.sin(a),
      x2: 100 + 67 * Math.cos(a), y2: 100 - 67 * Math.sin(a) }, s);
  }
  sv("text", { class: "scale", x: 20, y: 119, "text-anchor": "middle", text: "0" }, s);
  const mid = sv("text", { class: "scale", x: 100, y: -4, "text-anchor": "middle" }, s);
  const max = sv("text", { class: "scale", x: 180, y: 119, "text-anchor": "middle" }, s);
  const needle = sv("polygon", { class: "needle", points: "96.5,100 100,36 103.5,100" }, s);
  needle.style.transform = "rotate(-90deg)";
  sv("circle", { class: "hub", cx: 100, cy: 100, r: 7 }, s);
  const value = sv("text", { class: "value", x: 100, y: 140 }, s);
  const v = sv("tspan", { text: "–" }, value);
  sv("tspan", { class: "unit", dx: 4, text: unit }, value);
  return { svg: s, arc, needle, v, mid, max };
}

function setGauge(g, value, max) {
  const frac = value === null ? 0 : Math.max(0, Math.min(1, value / max));
  g.arc.style.strokeDashoffset = String(ARC_LEN * (1 - frac));
  g.needle.style.transform = "rotate(" + (-90 + 180 * frac).toFixed(2) + "deg)";
  g.v.textContent = rate(value);
  g.mid.textContent = scaleLabel(max / 2);
  g.max.textContent = scaleLabel(max);
}

/** Peak of `pick(vnf)` for this VNF over the kept samples. */
function vnfPeak(chain, name, pick) {
  let peak = 0;
  for (const s of state.series) {
    for (const c of arr(s.chains)) {
      if (obj(c).name !== chain) continue;
      for (const v of arr(c.vnfs)) {
        if (obj(v).name === name) peak = Math.max(peak, num(pick(v)) ?? 0);
      }
    }
  }
  return peak;
}

function latestVnfRates(chain, name) {
  const s = state.series[state.series.length - 1];
  for (const c of arr(s && s.chains)) {
    if (obj(c).name !== chain) continue;
    for (const v of arr(c.vnfs)) if (obj(v).name === name) return obj(v);
  }
  return {};
}

/** A card with an Mpps and a Gbps gauge. */
function makeCard(test, name, chain, footA, footB) {
  const mpps = makeGauge("mpps", "Mpps");
  const gbps = makeGauge("gbps", "Gbps");
  const root = el("div", { class: "card " + test, "data-test": test, "data-name": name, "data-chain": chain });
  const sub = el("span", { class: "sub" });
  const a = el("b"), b = el("b");
  root.append(
    el("div", { class: "title" }, el("span", { class: "dot" }), name, sub),
    el("div", { class: "pair" }, mpps.svg, gbps.svg),
    el("div", { class: "foot" }, el("span", {}, footA[0], a, footA[1]), el("span", {}, footB[0], b, footB[1])));
  return { root, mpps, gbps, sub, a, b };
}

function setCardRates(card, mpps, gbps, peakMpps, peakGbps) {
  card.root.dataset.mpps = mpps === null ? "" : String(mpps);
  card.root.dataset.gbps = gbps === null ? "" : String(gbps);
  setGauge(card.mpps, mpps, niceCeil(Math.max(peakMpps, mpps ?? 0) * 1.05, 0.1));
  setGauge(card.gbps, gbps, niceCeil(Math.max(peakGbps, gbps ?? 0) * 1.05, 0.1));
}

/** Peak of `pick(chain)` over the kept samples. */
function chainPeak(chain, pick) {
  let peak = 0;
  for (const s of state.series) {
    for (const c of arr(s.chains)) if (obj(c).name === chain) peak = Math.max(peak, num(pick(c)) ?? 0);
  }
  return peak;
}

function renderGauges({ chains }) {
  const box = $("gauges");
  const seen = new Set();
  const order = [];
  for (const c of chains) {
    for (const v of arr(c.vnfs).map(obj)) {
      const name = str(v.name);
      const key = str(c.name) + "/" + name;
      seen.add(key);
      let card = state.gauges.get(key);
      if (!card) {
        card = makeCard("vnf-gauge", name, str(c.name), ["out ", " Mpps"], ["drops ", "/s"]);
        state.gauges.set(key, card);
      }
      order.push(card.root);
      card.root.dataset.connected = String(v.connected !== false);
      card.root.classList.toggle("up", v.connected !== false);
      card.root.classList.toggle("down", v.connected === false);
      card.sub.textContent = "chain " + str(c.name) + " · port " + str(v.port) +
        (v.connected === false ? " · not connected" : "");
      setCardRates(card, num(v.rx_mpps), num(v.rx_gbps),
        vnfPeak(c.name, name, (x) => x.rx_mpps), vnfPeak(c.name, name, (x) => x.rx_gbps));
      card.a.textContent = rate(v.tx_mpps);
      card.b.textContent = count(latestVnfRates(c.name, name).drops_per_sec);
    }
  }
  // One card per chain: what its egress delivers.
  for (const c of chains) {
    const name = str(c.name);
    const key = "chain:" + name;
    seen.add(key);
    let card = state.gauges.get(key);
    if (!card) {
      card = makeCard("chain-gauge", name, name, ["in ", " Mpps"], ["loss ", " %"]);
      state.gauges.set(key, card);
    }
    order.push(card.root);
    const hops = arr(c.hops).map(str);
    card.sub.textContent = hops.length ? "chain · " + hops[0] + " → " + hops[hops.length - 1] : "chain";
    const loss = num(c.loss_percent);
    card.root.classList.toggle("up", loss === null || loss < 1);
    card.root.classList.toggle("lossy", loss !== null && loss >= 1);
    setCardRates(card, num(c.egress_mpps), num(c.egress_gbps),
      chainPeak(name, (x) => x.egress_mpps), chainPeak(name, (x) => x.egress_gbps));
    card.a.textContent = rate(c.ingress_mpps);
    card.b.textContent = fixed(loss, 1);
  }
  for (const [key, card] of state.gauges) {
    if (!seen.has(key)) {
      card.root.remove();
      state.gauges.delete(key);
    }
  }
  if (order.length === 0) {
    if (!box.querySelector(".empty")) box.replaceChildren(el("p", { class: "empty", text: "no chains configured: nothing to gauge" }));
  } else {
    box.querySelector(".empty")?.remove();
    order.forEach((c, i) => { if (box.children[i] !== c) box.insertBefore(c, box.children[i] || null); });
  }
}

// ---------------------------------------------------------------------------
// Topology: one row per chain (ingress → VNFs → egress), one per port
// steered by flow rules (in_port → output), then ports linked to nothing.

/** [in_port, [outputs]] of rules with both. */
function ruleLinks() {
  const links = [];
  for (const r of state.flows) {
    const m = /in_port=(\d+)/.exec(r);
    if (!m) continue;
    const outs = [...r.matchAll(/output:(\d+)/g)].map((x) => Number(x[1]));
    if (outs.length) links.push([Number(m[1]), outs]);
  }
  return links;
}

function renderTopology({ ports, chains }) {
  const svg = $("topology");
  const byName = new Map(ports.map((p) => [str(p.name), p]));
  const byNo = new Map(ports.map((p) => [num(p.no), p]));
  const rows = []; // {label, nodes: [name], rates: [Mpps per edge], note}
  const placed = new Set();
  for (const c of chains) {
    const hops = arr(c.hops).map(str);
    if (hops.length < 2) continue;
    const vnfs = arr(c.vnfs).map(obj);
    const rates = hops.slice(1).map((h, i) =>
      i < vnfs.length ? num(vnfs[i].rx_mpps) : num(c.egress_mpps));
    const loss = num(c.loss_percent);
    rows.push({ label: "chain " + str(c.name), nodes: hops, rates,
      note: loss !== null && loss >= 0.05 ? "loss " + loss.toFixed(1) + " %" : "",
      vnfs: new Map(vnfs.map((v) => [str(v.name), v])) });
    hops.forEach((h) => placed.add(h));
  }
  const seenLink = new Set();
  for (const [from, outs] of ruleLinks()) {
    const src = byNo.get(from);
    if (!src || placed.has(str(src.name))) continue;
    for (const o of outs) {
      const dst = byNo.get(o);
      if (!dst || seenLink.has(from + ">" + o)) continue;
      seenLink.add(from + ">" + o);
      rows.push({ label: "rule", nodes: [str(src.name), str(dst.name)],
        rates: [num(obj(dst.tx).mpps)], note: "" });
    }
  }
  rows.forEach((r) => r.nodes.forEach((n) => placed.add(n)));
  const rest = ports.map((p) => str(p.name)).filter((n) => !placed.has(n));
  if (rest.length) rows.push({ label: "unlinked", nodes: rest, rates: null, note: "" });

  const W = Math.max(svg.clientWidth || 0, 400);
  const labelW = 84, rowH = 62, boxH = 44, noteW = 70;
  const most = Math.max(1, ...rows.map((r) => r.nodes.length));
  const avail = W - labelW - noteW;
  const boxW = Math.min(150, Math.max(70, (avail - (most - 1) * 78) / most));
  const gap = most > 1 ? Math.min(130, (avail - most * boxW) / (most - 1)) : 0;
  const H = Math.max(rows.length, 1) * rowH + 4;
  svg.replaceChildren();
  svg.setAttribute("viewBox", "0 0 " + W + " " + H);
  svg.setAttribute("height", H);
  const defs = sv("defs", {}, svg);
  const marker = sv("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5,
    markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" }, defs);
  sv("path", { d: "M 0 0 L 10 5 L 0 10 z", fill: "#5b7299" }, marker);
  if (!rows.length) {
    sv("text", { class: "label", x: 8, y: 30, text: "no ports" }, svg);
    return;
  }
  rows.forEach((r, ri) => {
    const y = 8 + ri * rowH;
    sv("text", { class: "label", x: 4, y: y + boxH / 2 + 4, text: r.label }, svg);
    r.nodes.forEach((name, i) => {
      const x = labelW + i * (boxW + gap);
      const p = obj(byName.get(name));
      const type = str(p.type) || "?";
      const g = sv("g", { "data-test": "topo-node", "data-name": name, "data-type": type }, svg);
      sv("rect", { class: "box", x, y, width: boxW, height: boxH, rx: 7 }, g);
      sv("rect", { class: "stripe", x, y, width: 5, height: boxH, rx: 2,
        fill: TYPE_COLORS[type] || "#64748b" }, g);
      sv("text", { class: "name", x: x + 13, y: y + 19, text: clip(name, boxW - 30, 7.6) }, g);
      sv("text", { class: "kind", x: x + 13, y: y + 35,
        text: clip(type + " · #" + str(p.no), boxW - 18, 6.2) }, g);
      const v = r.vnfs && r.vnfs.get(name);
      if (v || p.error) {
        const ok = v ? v.connected !== false : false;
        sv("circle", { cx: x + boxW - 10, cy: y + 11, r: 4, fill: ok ? "#34d399" : "#f87171" }, g);
      }
      if (r.rates && i + 1 < r.nodes.length) {
        const x1 = x + boxW + 3, x2 = x + boxW + gap - 4, ym = y + boxH / 2;
        const mp = r.rates[i];
        sv("line", { class: "edge" + (mp ? " hot" : ""), x1, y1: ym, x2, y2: ym,
          "marker-end": "url(#arrow)" }, svg);
        sv("text", { class: "rate", x: (x1 + x2) / 2, y: ym - 7, text: rate(mp) + " Mpps" }, svg);
      }
    });
    if (r.note) {
      const x = labelW + r.nodes.length * boxW + (r.nodes.length - 1) * gap + 8;
      sv("text", { class: "loss", x, y: y + boxH / 2 + 4, text: r.note }, svg);
    }
  });
}

/** Cuts `s` to about `width` px at `charW` px a character. */
function clip(s, width, charW) {
  const n = Math.max(3, Math.floor(width / charW));
  return s.length > n ? s.slice(0, n - 1) + "…" : s;
}

// ---------------------------------------------------------------------------
// PMD table and PMU panel.

const PMU_METRICS = [
  ["IPC", "ipc", (v) => v.toFixed(2)],
  ["cache miss", "cache_miss_pct", (v) => v.toFixed(1) + " %"],
  ["LLC miss/pkt", "llc_misses_per_pkt", (v) => v.toFixed(3)],
  ["dTLB miss/pkt", "dtlb_misses_per_pkt", (v) => v.toFixed(3)],
  ["ctx switch/s", "context_switches_per_s", (v) => count(v)],
];

/** Reasons that mean the counter cannot be read (not merely "no packets"). */
const UNSUPPORTED = /unsupported|not supported|not permitted|not available|cannot open|read failed|switched off|never scheduled/i;

/** "llc-load-misses unsupported: hardware event … (No such file … (os error 2))"
 * → "hardware event …"; the whole reason stays in the tooltip. */
function shortReason(r) {
  return r.replace(/^[\w-]+ unsupported: /, "").replace(/\s*\((?:[^()]|\([^()]*\))*\)$/, "");
}

function renderPmds({ pmds }) {
  const body = $("pmd-table").querySelector("tbody");
  body.replaceChildren();
  for (const p of pmds) {
    const busy = num(p.busy_percent);
    // Decisions without a classifier lookup, of all decisions.
    const [wide, emc, mf, cls, miss] = [p.port_wide_hits, p.emc_hits, p.megaflow_hits,
      p.classifier_hits, p.table_misses].map((x) => num(x) ?? 0);
    const cached = wide + emc + mf;
    const all = cached + cls + miss;
    const tr = el("tr", { "data-pmd": str(p.index), "data-mpps": str(num(p.mpps) ?? ""),
      "data-busy": str(busy ?? ""), "data-cpp": str(num(p.cycles_per_packet) ?? ""),
      title: "rx queues: " + (arr(p.rx_queues).map(str).join(", ") || "none") });
    const bar = el("span", { class: "bar" }, el("i", { style: "width:" + Math.min(100, busy ?? 0).toFixed(1) + "%" }));
    tr.append(
      el("td", { text: str(p.index) }),
      el("td", { text: num(p.core) === null ? "–" : str(p.core) }),
      el("td", { text: rate(p.mpps) }),
      el("td", { class: "busy" }, bar, fixed(busy, 1) + " %"),
      el("td", { text: fixed(p.cycles_per_packet, 0) }),
      el("td", { text: fixed(p.switch_cycles_per_packet, 0) }),
      el("td", { text: fixed(p.packets_per_batch, 1) }),
      el("td", { text: all ? (100 * cached / all).toFixed(1) + " %" : "–" }));
    body.append(tr);
  }
  if (!pmds.length) body.append(el("tr", {}, el("td", { colspan: 8, class: "l zero", text: "no PMD threads" })));

  const panel = $("pmu-panel");
  panel.replaceChildren();
  if (!pmds.some((p) => p.pmu && typeof p.pmu === "object")) {
    panel.append(el("p", { class: "pmu-none", "data-test": "pmu-not-reported",
      text: "PMU: not reported (this node does not send PMU counters)" }));
    return;
  }
  for (const p of pmds) {
    const pmu = obj(p.pmu);
    const card = el("div", { class: "pmu-card", "data-test": "pmu-card", "data-pmd": str(p.index) });
    const queues = arr(p.rx_queues).map(str).join(", ");
    card.append(el("div", { class: "head" }, "PMD " + str(p.index) + " ",
      el("span", { text: (num(p.core) === null ? "unpinned" : "core " + p.core) +
        (queues ? " · " + queues : "") })));
    if (!p.pmu || typeof p.pmu !== "object") {
      card.append(el("div", { class: "pmu-none", text: "PMU: not reported" }));
    } else if (pmu.enabled === false) {
      card.append(el("div", { class: "pmu-none", text: "PMU counting is switched off (pmu = false)" }));
    } else {
      const grid = el("div", { class: "pmu-metrics" });
      const derived = obj(pmu.derived);
      for (const [label, key, fmt] of PMU_METRICS) {
        const m = derived[key];
        const v = num(m) ?? num(obj(m).value);
        const reason = str(obj(m).reason) || (m === undefined ? "not reported" : "");
        const cell = el("div", { class: "metric", "data-metric": key });
        cell.append(el("div", { class: "k", text: label }));
        if (v !== null) {
          cell.append(el("div", { class: "v", text: fmt(v) }));
        } else {
          cell.classList.add("unsupported");
          cell.title = reason;
          cell.append(el("div", { class: "v", text: UNSUPPORTED.test(reason) ? "unsupported" : "–" }),
            el("div", { class: "why", text: shortReason(reason) }));
        }
        grid.append(cell);
      }
      card.append(grid);
      const userOnly = arr(pmu.counters).filter((c) => obj(c).user_only === true).map((c) => str(c.name));
      if (userOnly.length) {
        card.append(el("div", { class: "why", text: "user space only: " + userOnly.join(", ") }));
      }
    }
    panel.append(card);
  }
}

// ---------------------------------------------------------------------------
// Ports and drops.

function dropTotal(p) {
  let n = 0;
  for (const d of [obj(p.rx).drops, obj(p.tx).drops]) {
    for (const v of Object.values(obj(d))) n += num(v) ?? 0;
  }
  return n;
}

// How a port moves frames, for its type chip: vhost-user ports say how
// frames their guest sends are forwarded (one-copy, the default, or copy);
// an AF_XDP port with `zero_copy` says whether it receives straight into
// its VNF's buffers now, and its hover text gives the counts and every
// fallback reason seen.
function portMode(type, info) {
  const copyMode = str(info.copy_mode);
  if (copyMode) {
    return { text: type + " · " + copyMode,
      title: "frames forwarded in one copy: " + (str(info.one_copy_packets) || "0") };
  }
  const target = str(info.zero_copy_target);
  if (!target) return { text: type, title: "" };
  const rxMode = str(info.rx_mode);
  const live = rxMode.startsWith("zero-copy");
  const lines = [rxMode, "frames received into " + target + "'s buffers: " +
    (str(info.zero_copy_packets) || "0")];
  if (info.tx_zero_copy_packets !== undefined) {
    lines.push("frames sent in place from " + target + "'s buffers: " + str(info.tx_zero_copy_packets));
  }
  for (const [k, v] of Object.entries(info)) {
    if (k.startsWith("zc_fallback_") && (num(v) ?? 0) > 0) {
      lines.push("copied (" + k.slice("zc_fallback_".length) + "): " + str(v));
    }
  }
  return { text: type + " · " + (live ? "zero-copy → " + target : "copy, zero-copy waiting"),
    title: lines.join("\n") };
}

function renderPorts({ ports }) {
  const body = $("port-table").querySelector("tbody");
  body.replaceChildren();
  const sorted = [...ports].sort((a, b) => (num(a.no) ?? 0) - (num(b.no) ?? 0));
  for (const p of sorted) {
    const rx = obj(p.rx), tx = obj(p.tx);
    const type = str(p.type) || "?";
    const m = portMode(type, obj(p.info));
    const chip = el("span", { class: "type", text: m.text,
      style: "color:" + (TYPE_COLORS[type] || "#cbd5e1") });
    if (m.title) chip.title = m.title;
    const tr = el("tr", { "data-port": str(p.name) },
      el("td", { text: str(p.no) }),
      el("td", { class: "l", text: str(p.name) }),
      el("td", { class: "l" }, chip));
    if (p.error) {
      tr.append(el("td", { class: "err", colspan: 7, text: "not forwarding: " + str(p.error) }));
    } else {
      const drops = dropTotal(p);
      for (const x of [rx.mpps, rx.gbps, tx.mpps, tx.gbps]) {
        tr.append(el("td", { class: num(x) ? "" : "zero", text: rate(x) }));
      }
      tr.append(el("td", { text: count(rx.packets) }), el("td", { text: count(tx.packets) }),
        el("td", { class: drops ? "" : "zero", text: count(drops) }));
    }
    body.append(tr);
  }
}

function renderDrops({ ports }) {
  const body = $("drops-table").querySelector("tbody");
  body.replaceChildren();
  const now = performance.now() / 1000;
  const next = new Map();
  for (const p of ports) {
    for (const dir of ["rx", "tx"]) {
      for (const [reason, n] of Object.entries(obj(obj(p[dir]).drops))) {
        const v = num(n);
        if (!v) continue;
        const key = str(p.name) + "/" + dir + "/" + reason;
        const prev = state.prevDrops.get(key);
        const perSec = prev && now - prev[1] > 0.2 ? Math.max(0, (v - prev[0]) / (now - prev[1])) : null;
        next.set(key, [v, now]);
        body.append(el("tr", { "data-port": str(p.name), "data-dir": dir, "data-reason": reason },
          el("td", { class: "l", text: str(p.name) }),
          el("td", { class: "l", text: dir }),
          el("td", { class: "l", text: reason }),
          el("td", { text: count(v) }),
          el("td", { class: perSec ? "" : "zero", text: perSec === null ? "–" : count(perSec) })));
      }
    }
  }
  state.prevDrops = next;
  if (!next.size) body.append(el("tr", {}, el("td", { colspan: 5, class: "l zero", text: "no drops" })));
}

// ---------------------------------------------------------------------------
// Rate charts (canvas).

function drawChart(canvas, series, unit, empty) {
  const dpr = window.devicePixelRatio || 1;
  const w = Math.max(canvas.clientWidth || 0, 300);
  const h = Number(canvas.getAttribute("height")) || 220;
  if (canvas.width !== Math.round(w * dpr) || canvas.height !== Math.round(h * dpr)) {
    canvas.width = Math.round(w * dpr);
    canvas.height = Math.round(h * dpr);
    canvas.style.height = h + "px";
  }
  const ctx = canvas.getContext("2d");
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.clearRect(0, 0, w, h);
  const L = 52, R = 12, T = 10, B = 24;
  const times = state.series.map((s) => s.time);
  canvas.dataset.samples = String(times.length);
  canvas.dataset.series = String(series.length);
  canvas.dataset.lastTime = times.length ? String(times[times.length - 1]) : "";
  ctx.font = "11px system-ui, 'DejaVu Sans', sans-serif";
  if (times.length < 2 || !series.length) {
    ctx.fillStyle = "#8699b3";
    ctx.textAlign = "center";
    ctx.fillText(times.length < 2 ? "waiting for samples…" : empty, w / 2, h / 2);
    return;
  }
  const tMax = times[times.length - 1];
  const span = Math.min(WINDOW_S, Math.max(30, tMax - times[0]));
  const tMin = tMax - span;
  let top = 0;
  for (const s of series) for (const [, v] of s.points) if (v > top) top = v;
  const stepV = niceCeil((top * 1.08) / 4, 0.0025);
  const nTicks = Math.max(1, Math.ceil((top * 1.08) / stepV));
  const vMax = stepV * nTicks;
  const X = (t) => L + ((t - tMin) / span) * (w - L - R);
  const Y = (v) => T + (1 - v / vMax) * (h - T - B);

  // Grid and axes.
  ctx.strokeStyle = "#22304a";
  ctx.fillStyle = "#8699b3";
  ctx.lineWidth = 1;
  ctx.textAlign = "right";
  ctx.textBaseline = "middle";
  for (let i = 0; i <= nTicks; i++) {
    const v = stepV * i, y = Math.round(Y(v)) + 0.5;
    ctx.beginPath(); ctx.moveTo(L, y); ctx.lineTo(w - R, y); ctx.stroke();
    ctx.fillText(scaleLabel(v), L - 6, y);
  }
  ctx.save();
  ctx.translate(11, T + (h - T - B) / 2);
  ctx.rotate(-Math.PI / 2);
  ctx.textAlign = "center";
  ctx.fillText(unit, 0, 0);
  ctx.restore();
  ctx.textAlign = "center";
  ctx.textBaseline = "alphabetic";
  const step = span > 150 ? 60 : span > 70 ? 30 : span > 35 ? 15 : 10;
  for (let ago = 0; ago <= span + 0.01; ago += step) {
    const x = X(tMax - ago);
    ctx.fillText(ago === 0 ? "now" : ago >= 60 && ago % 60 === 0 ? "−" + ago / 60 + " min" : "−" + ago + " s", x, h - 7);
    ctx.beginPath(); ctx.moveTo(Math.round(x) + 0.5, T); ctx.lineTo(Math.round(x) + 0.5, h - B); ctx.stroke();
  }

  // Lines; a gap of more than 3 s in the samples breaks a line.
  ctx.save();
  ctx.beginPath(); ctx.rect(L, T - 2, w - L - R, h - T - B + 4); ctx.clip();
  ctx.lineWidth = 2;
  ctx.lineJoin = "round";
  for (const s of series) {
    ctx.strokeStyle = s.color;
    ctx.setLineDash(s.dash ? [6, 4] : []);
    ctx.beginPath();
    let prevT = null;
    for (const [t, v] of s.points) {
      if (prevT === null || t - prevT > 3) ctx.moveTo(X(t), Y(v));
      else ctx.lineTo(X(t), Y(v));
      prevT = t;
    }
    ctx.stroke();
  }
  ctx.restore();
}

function legend(id, series) {
  $(id).replaceChildren(...series.map((s) =>
    el("span", {}, el("i", { class: s.dash ? "dash" : "", style: "border-color:" + s.color }), s.label)));
}

/** Series of `pick(item)` over the samples, keyed by `key(item)`. */
function collect(listOf, key, pick) {
  const out = new Map();
  for (const s of state.series) {
    for (const it of arr(listOf(s)).map(obj)) {
      const v = num(pick(it));
      if (v === null) continue;
      const k = key(it);
      if (!out.has(k)) out.set(k, []);
      out.get(k).push([s.time, v]);
    }
  }
  return out;
}

function renderPortChart() {
  const names = new Map(); // port no → name, newest wins
  for (const s of state.series) for (const p of arr(s.ports).map(obj)) names.set(num(p.no), str(p.name));
  const nos = [...names.keys()].sort((a, b) => (a ?? 0) - (b ?? 0));
  const rx = collect((s) => s.ports, (p) => num(p.no), (p) => p.rx_mpps);
  const tx = collect((s) => s.ports, (p) => num(p.no), (p) => p.tx_mpps);
  const series = [];
  nos.forEach((no, i) => {
    const color = PALETTE[i % PALETTE.length];
    for (const [dir, m, dash] of [["rx", rx, false], ["tx", tx, true]]) {
      const pts = m.get(no) || [];
      if (pts.some(([, v]) => v > 0)) series.push({ label: names.get(no) + " " + dir, color, dash, points: pts });
    }
  });
  legend("port-legend", series);
  drawChart($("port-chart"), series, "Mpps", "no traffic in the window");
}

function renderChainChart() {
  const names = new Set();
  for (const s of state.series) for (const c of arr(s.chains).map(obj)) names.add(str(c.name));
  const eg = collect((s) => s.chains, (c) => str(c.name), (c) => c.egress_mpps);
  const ing = collect((s) => s.chains, (c) => str(c.name), (c) => c.ingress_mpps);
  const series = [];
  [...names].forEach((n, i) => {
    const color = PALETTE[(i + 3) % PALETTE.length];
    series.push({ label: n + " egress", color, dash: false, points: eg.get(n) || [] });
    series.push({ label: n + " ingress", color, dash: true, points: ing.get(n) || [] });
  });
  legend("chain-legend", series);
  drawChart($("chain-chart"), series, "Mpps", "no chains configured");
}

loop();
