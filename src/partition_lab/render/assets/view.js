// The interactive plan view (partition_lab.render.html). Plain JS and SVG, no library.
// Every name from the model reaches the page through textContent or an attribute value, never
// as markup: model files are untrusted input.
(function () {
  "use strict";

  const DATA = JSON.parse(document.getElementById("plan-data").textContent);
  const P = DATA.pool, OPS = DATA.ops, REGIONS = DATA.regions, DEVICES = DATA.devices;
  const R = REGIONS.length, NIN = DATA.inputs.length;
  const NS = "http://www.w3.org/2000/svg";
  // Coordinates (layout.js): a ranked layout placed, a box and an edge in it.
  const {place, boxAt, edgePath} = PlanLayout;

  // Geometry, in SVG units at zoom 1.
  const LINE = 14, PAD = 6;
  const HEAD = 22, FRAME_PAD = 10, MAX_CHARS = 48, CONTENT_LINES = 5, REASON_LINES = 2;
  const RESULTS_SHOWN = 200, OPS_LISTED = 300, MAX_LABELLED = 300;

  const svg = document.getElementById("graph");
  const viewport = document.getElementById("viewport");
  const searchBox = document.getElementById("search");

  const expanded = new Set(DATA.expanded);
  const innerCache = new Map();
  let top = null;           // the current placement of the region graph
  let selected = null;      // {kind: "op" | "region", id}
  let matches = [], matchIndex = -1, matchSet = new Set(), regionHits = new Map();
  let tx = 0, ty = 0, scale = 1;

  // ------------------------------------------------------------------ text and DOM helpers
  const measure = document.createElement("canvas").getContext("2d");
  const widths = new Map();
  function textWidth(text, bold) {
    const key = (bold ? "b" : "n") + text;
    let w = widths.get(key);
    if (w === undefined) {
      measure.font = (bold ? "bold " : "") + "11px Helvetica, Arial, sans-serif";
      w = measure.measureText(text).width;
      widths.set(key, w);
    }
    return w;
  }

  function clip(text) {
    return text.length > MAX_CHARS ? text.slice(0, MAX_CHARS - 1) + "\u2026" : text;
  }

  // A module path's end says most ("...attention.self/scaled_dot_product_attention#9"):
  // keep its start and its end.
  function clipMiddle(text) {
    if (text.length <= MAX_CHARS) return text;
    const head = 12;
    return text.slice(0, head) + "\u2026" + text.slice(text.length - (MAX_CHARS - head - 1));
  }

  function svgEl(tag, attrs, parent) {
    const el = document.createElementNS(NS, tag);
    for (const name in attrs) el.setAttribute(name, attrs[name]);
    if (parent) parent.appendChild(el);
    return el;
  }

  // An HTML element with text children (strings become text nodes, never markup).
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const name in attrs || {}) {
      if (name === "onclick") node.addEventListener("click", attrs[name]);
      else node.setAttribute(name, attrs[name]);
    }
    for (const child of children) {
      if (child === null || child === undefined) continue;
      node.appendChild(typeof child === "string" ? document.createTextNode(child) : child);
    }
    return node;
  }

  function formatTime(s) {
    if (s === null || s === undefined) return "-";
    if (s === 0) return "0";
    if (s >= 1) return s.toFixed(2) + " s";
    if (s >= 1e-3) return (s * 1e3).toPrecision(3) + " ms";
    if (s >= 1e-6) return (s * 1e6).toPrecision(3) + " us";
    return (s * 1e9).toPrecision(3) + " ns";
  }

  function formatCount(x) {
    if (x >= 1e9) return (x / 1e9).toPrecision(3) + " G";
    if (x >= 1e6) return (x / 1e6).toPrecision(3) + " M";
    if (x >= 1e3) return (x / 1e3).toPrecision(3) + " k";
    return String(x);
  }

  // ------------------------------------------------------------------ what each box shows
  function opLines(i) {
    const op = OPS[i];
    const lines = [op.o];
    const name = op.s || op.n;
    if (name !== op.o + "_" + i) lines.push(clipMiddle(name));
    if (op.sh !== null) lines.push(clip(P[op.sh]));
    return lines;
  }

  function regionHead(r) {
    return REGIONS[r].label + ": " + DEVICES[REGIONS[r].d].name;
  }

  function regionLines(r) {
    const region = REGIONS[r];
    return [regionHead(r), region.size,
      ...region.contents.slice(0, CONTENT_LINES).map(clip),
      ...region.reasons.slice(0, REASON_LINES).map(clip)];
  }

  function nodeLines(id) {
    if (id < R) return regionLines(id);
    if (id < R + NIN) return ["input " + clip(DATA.inputs[id - R].name), DATA.inputs[id - R].spec];
    return ["output"];
  }

  function boxSize(lines) {
    let w = 0;
    lines.forEach((line, k) => { w = Math.max(w, textWidth(line, k === 0)); });
    return {w: Math.ceil(w) + 2 * PAD + 4, h: lines.length * LINE + 2 * PAD};
  }

  function inner(r) {
    let placed = innerCache.get(r);
    if (!placed) {
      placed = place(REGIONS[r].layout, (i) => boxSize(opLines(i)));
      innerCache.set(r, placed);
    }
    return placed;
  }

  function frameSize(r) {
    const placed = inner(r);
    const head = textWidth(regionHead(r) + ", " + REGIONS[r].size + "  \u25B4 collapse", true);
    return {w: Math.max(placed.width + 2 * FRAME_PAD, head + 2 * PAD),
      h: placed.height + HEAD + 2 * FRAME_PAD};
  }

  function topSize(id) {
    return id < R && expanded.has(id) ? frameSize(id) : boxSize(nodeLines(id));
  }

  // ------------------------------------------------------------------ drawing
  function colours(device) {
    const dev = DEVICES[device];
    return {line: dev.line, fill: dev.fill, host: dev.host};
  }

  function drawText(group, lines, x, y) {
    const text = svgEl("text", {x: x, y: y}, group);
    lines.forEach((line, k) => {
      const span = svgEl("tspan", {x: x, dy: k ? LINE : 11}, text);
      if (k === 0) span.setAttribute("class", "title");
      span.textContent = line;
    });
    return text;
  }

  function drawBox(parent, box, lines, cls, fill, line, dashed) {
    const group = svgEl("g", {class: cls, transform: "translate(" + box.x.toFixed(1) + "," +
      box.y.toFixed(1) + ")"}, parent);
    svgEl("rect", {width: box.w, height: box.h, rx: 6, fill: fill, stroke: line,
      "stroke-width": 1.4, "stroke-dasharray": dashed ? "5 3" : "none"}, group);
    drawText(group, lines, PAD + 2, PAD);
    return group;
  }

  function drawEdges(parent, placed, styled) {
    const group = svgEl("g", {}, parent);
    // Past a few hundred copies the labels cover each other: the tooltip keeps them.
    const labelled = placed.edges.length <= MAX_LABELLED;
    const into = new Map();  // labels already placed above each head: the next goes higher
    placed.chains.forEach((chain, k) => {
      const edge = placed.edges[k];
      const cut = styled && edge[4];
      const path = edgePath(placed, chain);
      const el = svgEl("path", {d: path.d, class: cut ? "edge cut" : "edge",
        "marker-end": cut ? "url(#arrow-cut)" : "url(#arrow)"}, group);
      if (cut) el.style.stroke = DATA.cut_colour;  // a style: it must beat the stylesheet
      if (styled && edge[3]) {
        svgEl("title", {}, el).textContent = edge[3].join("\n");
        if (cut && labelled) {
          // Midway along the last segment, where the edge is nearest its consumer.
          const [a, b] = path.points.slice(-2);
          const stacked = into.get(edge[1]) || 0;
          into.set(edge[1], stacked + 1);
          const label = svgEl("text", {x: (a[0] + b[0]) / 2 + 4,
            y: (a[1] + b[1]) / 2 - stacked * LINE, class: "edge-label"}, group);
          label.style.fill = DATA.cut_colour;
          label.textContent = edge[3].join(", ");
        }
      }
    });
  }

  function drawRegion(parent, r, box) {
    const c = colours(REGIONS[r].d);
    if (!expanded.has(r)) {
      const group = drawBox(parent, box, regionLines(r), "box", c.host ? "#f2f2f2" : c.fill,
        c.line, c.host);
      group.setAttribute("data-region", r);
      const hits = regionHits.get(r);
      if (hits) {
        group.classList.add("has-match");
        badge(group, box.w, String(hits));
      }
      if (selected && selected.kind === "region" && selected.id === r) group.classList.add("selected");
      return;
    }
    const frame = svgEl("g", {class: "frame", "data-frame": r,
      transform: "translate(" + box.x.toFixed(1) + "," + box.y.toFixed(1) + ")"}, parent);
    svgEl("rect", {width: box.w, height: box.h, rx: 8, fill: c.host ? "#fafafa" : c.fill,
      stroke: c.line, "stroke-width": 1.6, "stroke-dasharray": c.host ? "6 3" : "none"}, frame);
    const head = svgEl("g", {class: "head", "data-region-head": r}, frame);
    svgEl("rect", {width: box.w, height: HEAD, rx: 8, fill: c.line, "fill-opacity": 0.18}, head);
    drawText(head, [regionHead(r) + ", " + REGIONS[r].size + "  \u25B4 collapse"], PAD + 2, 4);
    if (selected && selected.kind === "region" && selected.id === r) frame.classList.add("selected");
    const placed = inner(r);
    const body = svgEl("g", {transform: "translate(" + FRAME_PAD + "," + (HEAD + FRAME_PAD) + ")"},
      frame);
    drawEdges(body, placed, false);
    for (const i of placed.slotOf.keys()) {
      const op = OPS[i];
      const oc = colours(op.d);
      const group = drawBox(body, boxAt(placed, i), opLines(i), "op",
        oc.host ? "#f2f2f2" : "#ffffff", oc.line, oc.host);
      group.setAttribute("data-op", i);
      if (matchSet.has(i)) group.classList.add("match");
      if (selected && selected.kind === "op" && selected.id === i) group.classList.add("selected");
    }
  }

  function badge(group, width, text) {
    const w = textWidth(text, true) + 10;
    svgEl("rect", {x: width - w / 2, y: -9, width: w, height: 16, rx: 8, class: "badge"}, group);
    const label = svgEl("text", {x: width - w / 2 + 5, y: 3, class: "badge-text"}, group);
    label.textContent = text;
  }

  function render() {
    top = place(DATA.top, topSize);
    viewport.textContent = "";
    drawEdges(viewport, top, true);
    const nodes = svgEl("g", {}, viewport);
    for (const id of top.slotOf.keys()) {
      const box = boxAt(top, id);
      if (id < R) {
        drawRegion(nodes, id, box);
      } else {
        const group = drawBox(nodes, box, nodeLines(id), "io", "#ffffff", "#7f7f7f", false);
        group.setAttribute("data-io", id);
        group.firstChild.setAttribute("rx", box.h / 2);
      }
    }
  }

  // ------------------------------------------------------------------ pan and zoom
  function applyTransform() {
    viewport.setAttribute("transform", "translate(" + tx.toFixed(2) + "," + ty.toFixed(2) +
      ") scale(" + scale.toFixed(5) + ")");
  }

  function zoomAt(px, py, factor) {
    const next = Math.min(4, Math.max(0.02, scale * factor));
    tx = px - (px - tx) * (next / scale);
    ty = py - (py - ty) * (next / scale);
    scale = next;
    applyTransform();
  }

  function fit() {
    const w = svg.clientWidth || 800, h = svg.clientHeight || 600;
    const whole = Math.min(w / (top.width + 40), h / (top.height + 40), 1.5);
    // A plan too big to read whole opens at a readable scale, at its top.
    scale = whole >= 0.25 ? whole : 0.8;
    if (whole >= 0.25) {
      tx = (w - top.width * scale) / 2;
      ty = (h - top.height * scale) / 2;
    } else {  // centred on the first rank, which may sit far from the middle of the widest
      const row = top.rankTop.length ? DATA.top.ranks[0] : [];
      let sum = 0;
      for (let k = 0; k < row.length; k++) sum += top.X[k];
      tx = w / 2 - (row.length ? sum / row.length : top.width / 2) * scale;
      ty = 20;
    }
    applyTransform();
  }

  function centreOn(box, minScale) {
    const w = svg.clientWidth || 800, h = svg.clientHeight || 600;
    scale = Math.max(scale, minScale);
    tx = w / 2 - (box.x + box.w / 2) * scale;
    ty = h / 2 - (box.y + box.h / 2) * scale;
    applyTransform();
  }

  let drag = null;
  svg.addEventListener("pointerdown", (e) => {
    if (e.button !== 0) return;
    drag = {x: e.clientX, y: e.clientY, tx, ty, moved: false};
  });
  window.addEventListener("pointermove", (e) => {
    if (!drag) return;
    const dx = e.clientX - drag.x, dy = e.clientY - drag.y;
    if (!drag.moved && Math.abs(dx) + Math.abs(dy) < 4) return;
    drag.moved = true;
    svg.classList.add("dragging");
    tx = drag.tx + dx; ty = drag.ty + dy;
    applyTransform();
  });
  window.addEventListener("pointerup", () => {
    svg.classList.remove("dragging");
    // A drag's own click must not expand what it ended on; clear after that click.
    if (drag && drag.moved) setTimeout(() => { drag = null; }, 0); else drag = null;
  });
  svg.addEventListener("wheel", (e) => {
    e.preventDefault();
    const rect = svg.getBoundingClientRect();
    zoomAt(e.clientX - rect.left, e.clientY - rect.top, Math.exp(-e.deltaY * 0.0015));
  }, {passive: false});

  // ------------------------------------------------------------------ expand, collapse, jump
  // Re-lays out the region graph keeping region r where it was on the screen.
  function relayout(r) {
    const before = top && top.slotOf.has(r) ? boxAt(top, r) : null;
    render();
    if (before) {
      const after = boxAt(top, r);
      tx += (before.x - after.x) * scale;
      ty += (before.y - after.y) * scale;
      applyTransform();
    }
  }

  function setExpanded(r, open) {
    if (open === expanded.has(r)) return;
    if (open) expanded.add(r); else expanded.delete(r);
    relayout(r);
  }

  function opBox(i) {
    const r = OPS[i].r;
    const frame = boxAt(top, r), box = boxAt(inner(r), i);
    return {x: frame.x + FRAME_PAD + box.x, y: frame.y + HEAD + FRAME_PAD + box.y, w: box.w, h: box.h};
  }

  function jumpTo(i) {
    const r = OPS[i].r;
    if (!expanded.has(r)) { expanded.add(r); render(); }
    selectOp(i);
    centreOn(opBox(i), 1);
  }

  // ------------------------------------------------------------------ selection and panel
  function markSelected() {
    for (const node of viewport.querySelectorAll(".selected")) node.classList.remove("selected");
    if (!selected) return;
    const attr = selected.kind === "op" ? "data-op" : null;
    const query = attr ? "[data-op=\"" + selected.id + "\"]"
      : "[data-region=\"" + selected.id + "\"], [data-frame=\"" + selected.id + "\"]";
    for (const node of viewport.querySelectorAll(query)) node.classList.add("selected");
  }

  function deviceBadge(d) {
    const dev = DEVICES[d];
    const swatch = el("span", {class: dev.host ? "swatch host" : "swatch"});
    swatch.style.borderColor = dev.line;
    swatch.style.background = dev.host ? "#f2f2f2" : dev.fill;
    return el("span", {}, swatch, dev.name);
  }

  function regionLink(r) {
    return el("button", {type: "button", class: "link", onclick: () => selectRegion(r, true)},
      REGIONS[r].label);
  }

  function opLink(i) {
    const op = OPS[i];
    return el("button", {type: "button", class: "link", onclick: () => jumpTo(i)},
      (op.s || op.n) + " (" + op.o + ")");
  }

  function rows(pairs) {
    const dl = el("dl", {});
    for (const [key, value] of pairs) {
      dl.appendChild(el("dt", {}, key));
      dl.appendChild(el("dd", {}, value));
    }
    return dl;
  }

  function tensorList(title, ids) {
    if (!ids.length) return null;
    return el("div", {}, el("h3", {}, title), el("ul", {}, ...ids.map((t) => el("li", {}, P[t]))));
  }

  function selectOp(i) {
    selected = {kind: "op", id: i};
    markSelected();
    const op = OPS[i], why = P[op.w];
    const panel = document.getElementById("details");
    panel.textContent = "";
    panel.appendChild(el("h2", {}, op.n));
    panel.appendChild(rows([
      ["op", op.o], ["source name", op.s || "-"], ["device", deviceBadge(op.d)],
      ["region", el("span", {}, regionLink(op.r), " (" + REGIONS[op.r].size + ")")],
      ["predicted", formatTime(op.t)], ["FLOPs", op.f === null ? "-" : formatCount(op.f)],
    ]));
    panel.appendChild(el("h3", {}, "Why on " + DEVICES[op.d].name));
    panel.appendChild(el("div", {class: "reason", "data-role": "reason"}, P[op.re]));
    const detail = [why.code, why.rule && "rule " + why.rule, why.device && "decided by " + why.device];
    panel.appendChild(el("p", {class: "muted"}, detail.filter(Boolean).join(", ")));
    panel.appendChild(el("h3", {}, "Support per device"));
    panel.appendChild(el("ul", {}, ...op.v.map((v, d) => {
      const verdict = P[v];
      return el("li", {}, el("span", {class: verdict.supported ? "ok" : "no"},
        verdict.supported ? "\u2713 " : "\u2717 "), el("b", {}, DEVICES[d].name + ": "),
        verdict.reason + (verdict.rule ? " [" + verdict.rule + "]" : "") +
        (verdict.anchor ? " (anchor)" : ""));
    })));
    for (const part of [tensorList("Inputs", op.i), tensorList("Outputs", op.u),
      tensorList("Weights", op.k)]) if (part) panel.appendChild(part);
  }

  function selectRegion(r, centre) {
    selected = {kind: "region", id: r};
    markSelected();
    const region = REGIONS[r];
    const panel = document.getElementById("details");
    panel.textContent = "";
    panel.appendChild(el("h2", {}, region.label));
    panel.appendChild(rows([["device", deviceBadge(region.d)], ["size", region.size],
      ["predicted", formatTime(region.time)], ["ops", region.histogram]]));
    panel.appendChild(el("p", {}, el("button", {type: "button",
      onclick: () => { setExpanded(r, !expanded.has(r)); selectRegion(r, false); }},
    expanded.has(r) ? "Collapse" : "Expand")));
    if (region.reasons_full.length) {
      panel.appendChild(el("h3", {}, "Why its ops are here"));
      panel.appendChild(el("ul", {}, ...region.reasons_full.map((t) => el("li", {}, t))));
    }
    const members = region.layout.ranks.flat().filter((id) => id >= 0);
    panel.appendChild(el("h3", {}, "Ops (" + members.length + ")"));
    const list = el("ul", {}, ...members.slice(0, OPS_LISTED).map((i) => el("li", {}, opLink(i))));
    if (members.length > OPS_LISTED) list.appendChild(el("li", {class: "muted"},
      "and " + (members.length - OPS_LISTED) + " more (search to find them)"));
    panel.appendChild(list);
    if (centre && top.slotOf.has(r)) centreOn(boxAt(top, r), 0);
  }

  function showOverview() {
    const panel = document.getElementById("details");
    panel.textContent = "";
    panel.appendChild(el("h2", {}, DATA.title));
    panel.appendChild(el("ul", {}, ...DATA.summary.map((line) => el("li", {}, line))));
    panel.appendChild(el("p", {class: "muted"}, "Drag to pan, scroll to zoom. Click a region " +
      "to expand it (its header collapses it), an op for its device, reason, shapes and " +
      "predicted time. Search matches op types, names and module paths; Enter jumps to the " +
      "next match."));
  }

  function showLegend() {
    const legend = document.getElementById("legend");
    legend.appendChild(el("h3", {}, "Legend"));
    const items = DEVICES.filter((dev) => dev.ops || dev.host).map((dev) => {
      const d = DEVICES.indexOf(dev);
      const count = dev.ops + " op" + (dev.ops === 1 ? "" : "s");
      const text = dev.host ? " (" + dev.role + "): on the CPU, " + count + ", dashed"
        : " (" + dev.role + "): " + count + " in " + dev.regions + " region" +
          (dev.regions === 1 ? "" : "s");
      return el("li", {"data-device": dev.name}, deviceBadge(d), text);
    });
    const cut = el("span", {class: "swatch cut"});
    cut.style.borderColor = DATA.cut_colour;
    items.push(el("li", {}, cut, "copy between devices (shape, size, predicted copy time)"));
    const match = el("span", {class: "swatch"});
    match.style.borderColor = "#ff00c8";
    items.push(el("li", {}, match, "search match (dashed: inside a collapsed region)"));
    legend.appendChild(el("ul", {}, ...items));
  }

  // ------------------------------------------------------------------ search
  const haystack = OPS.map((op) => (op.o + "\n" + op.n + "\n" + (op.s || "")).toLowerCase());

  function search(text) {
    const query = text.trim().toLowerCase();
    matches = [];
    if (query) haystack.forEach((h, i) => { if (h.includes(query)) matches.push(i); });
    matchSet = new Set(matches);
    regionHits = new Map();
    for (const i of matches) regionHits.set(OPS[i].r, (regionHits.get(OPS[i].r) || 0) + 1);
    matchIndex = -1;
    document.getElementById("count").textContent = query ? matches.length + " match" +
      (matches.length === 1 ? "" : "es") : "";
    showResults(query);
    render();
  }

  function showResults(query) {
    const box = document.getElementById("results");
    box.textContent = "";
    box.hidden = !query;
    if (!query) return;
    box.appendChild(el("h3", {}, matches.length + " op" + (matches.length === 1 ? "" : "s") +
      " match \u201c" + query + "\u201d"));
    const list = el("ul", {}, ...matches.slice(0, RESULTS_SHOWN).map((i) => el("li", {},
      opLink(i), " \u2014 ", REGIONS[OPS[i].r].label + ", " + DEVICES[OPS[i].d].name)));
    if (matches.length > RESULTS_SHOWN) list.appendChild(el("li", {class: "muted"},
      "and " + (matches.length - RESULTS_SHOWN) + " more (Enter steps through all)"));
    box.appendChild(list);
  }

  function step(by) {
    if (!matches.length) return;
    matchIndex = (matchIndex + by + matches.length) % matches.length;
    document.getElementById("count").textContent = (matchIndex + 1) + " / " + matches.length;
    jumpTo(matches[matchIndex]);
  }

  let pending = 0;
  searchBox.addEventListener("input", () => {
    clearTimeout(pending);
    pending = setTimeout(() => search(searchBox.value), 150);
  });
  searchBox.addEventListener("keydown", (e) => {
    if (e.key !== "Enter") return;
    e.preventDefault();
    clearTimeout(pending);
    const current = document.getElementById("count").dataset.query;
    if (current !== searchBox.value) {
      search(searchBox.value);
      document.getElementById("count").dataset.query = searchBox.value;
    }
    step(e.shiftKey ? -1 : 1);
  });
  document.getElementById("next").addEventListener("click", () => step(1));
  document.getElementById("prev").addEventListener("click", () => step(-1));
  document.addEventListener("keydown", (e) => {
    if (e.key === "/" && document.activeElement !== searchBox) {
      e.preventDefault();
      searchBox.focus();
    }
  });

  // ------------------------------------------------------------------ clicks
  svg.addEventListener("click", (e) => {
    if (drag && drag.moved) return;
    const target = e.target.closest("[data-op], [data-region], [data-region-head], [data-io]");
    if (!target) return;
    if (target.hasAttribute("data-op")) {
      selectOp(Number(target.getAttribute("data-op")));
    } else if (target.hasAttribute("data-region")) {
      const r = Number(target.getAttribute("data-region"));
      setExpanded(r, true);
      selectRegion(r, false);
    } else if (target.hasAttribute("data-region-head")) {
      const r = Number(target.getAttribute("data-region-head"));
      setExpanded(r, false);
      selectRegion(r, false);
    }
  });
  document.getElementById("fit").addEventListener("click", fit);
  document.getElementById("expand-all").addEventListener("click", () => {
    for (let r = 0; r < R; r++) expanded.add(r);
    render(); fit();
  });
  document.getElementById("collapse-all").addEventListener("click", () => {
    expanded.clear();
    render(); fit();
  });

  // ------------------------------------------------------------------ start
  document.getElementById("title").textContent = DATA.title;
  document.querySelector("#arrow-cut path").style.fill = DATA.cut_colour;
  const started = performance.now();
  render();
  fit();
  showOverview();
  showLegend();
  // For tests and the bench: the page is drawn, and how long drawing took.
  document.body.setAttribute("data-render-ms", String(Math.round(performance.now() - started)));
  document.body.setAttribute("data-ready", "true");
})();
