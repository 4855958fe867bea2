// Coordinates of the interactive plan view (partition_lab.render.html; view.js draws them).
// Ranks and orders come from Python (render/layered.py); here each slot gets an x that keeps
// the order, sits near its neighbours in the adjacent rank and leaves room for the boxes.
// Pure geometry: it reads neither the page nor the plan's data.
const PlanLayout = (function () {
  "use strict";

  // Gaps between boxes, in SVG units at zoom 1 (a dummy is a slot an edge passes through).
  const GAP_X = 20, GAP_DUMMY = 6, GAP_Y = 36, DUMMY_W = 4;

  function place(layout, sizeOf) {
    const ranks = layout.ranks;
    const offsets = [];
    let n = 0;
    for (const row of ranks) { offsets.push(n); n += row.length; }
    const X = new Float64Array(n), W = new Float64Array(n), H = new Float64Array(n);
    const rankOfSlot = new Int32Array(n), dummy = new Uint8Array(n);
    const slotOf = new Map();
    ranks.forEach((row, r) => row.forEach((id, k) => {
      const s = offsets[r] + k;
      rankOfSlot[s] = r;
      if (id >= 0) {
        const size = sizeOf(id);
        W[s] = size.w; H[s] = size.h;
        slotOf.set(id, s);
      } else {
        W[s] = DUMMY_W; dummy[s] = 1;
      }
    }));
    const up = Array.from({length: n}, () => []), down = Array.from({length: n}, () => []);
    const chains = layout.edges.map((edge) => {
      const [u, v, path] = edge;
      const first = slotOf.get(u);
      const chain = [first];
      path.forEach((pos, k) => chain.push(offsets[rankOfSlot[first] + 1 + k] + pos));
      chain.push(slotOf.get(v));
      for (let k = 1; k < chain.length; k++) {
        down[chain[k - 1]].push(chain[k]);
        up[chain[k]].push(chain[k - 1]);
      }
      return chain;
    });
    const sep = (a, b) => (W[a] + W[b]) / 2 + (dummy[a] || dummy[b] ? GAP_DUMMY : GAP_X);
    ranks.forEach((row, r) => {
      let x = 0;
      for (let k = 0; k < row.length; k++) {
        const s = offsets[r] + k;
        if (k) x += sep(s - 1, s);
        X[s] = x;
      }
      for (let k = 0; k < row.length; k++) X[offsets[r] + k] -= x / 2;
    });
    for (let sweep = 0; sweep < 8; sweep++) {
      const downward = sweep % 2 === 0;
      const neighbours = downward ? up : down;
      for (let step = 1; step < ranks.length; step++) {
        const r = downward ? step : ranks.length - 1 - step;
        align(offsets[r], ranks[r].length, neighbours, X, sep);
      }
    }
    // Rank heights and tops; then shift so that the drawing starts at (0, 0).
    const rankTop = new Float64Array(ranks.length), rankH = new Float64Array(ranks.length);
    let y = 0, minX = Infinity, maxX = -Infinity;
    ranks.forEach((row, r) => {
      let h = 4;
      for (let k = 0; k < row.length; k++) {
        const s = offsets[r] + k;
        h = Math.max(h, H[s]);
        minX = Math.min(minX, X[s] - W[s] / 2);
        maxX = Math.max(maxX, X[s] + W[s] / 2);
      }
      rankTop[r] = y; rankH[r] = h;
      y += h + GAP_Y;
    });
    if (!n) { minX = 0; maxX = 0; }
    for (let s = 0; s < n; s++) X[s] -= minX;
    return {X, W, H, rankOfSlot, rankTop, rankH, slotOf, chains, edges: layout.edges,
      width: maxX - minX, height: Math.max(0, y - GAP_Y)};
  }

  // One rank towards its neighbours' mean x, keeping order and spacing: the mean of a pass
  // that pushes boxes right and one that pushes them left keeps both constraints.
  function align(offset, count, neighbours, X, sep) {
    if (!count) return;
    const want = new Float64Array(count);
    for (let k = 0; k < count; k++) {
      const near = neighbours[offset + k];
      if (!near.length) { want[k] = X[offset + k]; continue; }
      let sum = 0;
      for (const s of near) sum += X[s];
      want[k] = sum / near.length;
    }
    const right = new Float64Array(count), left = new Float64Array(count);
    for (let k = 0; k < count; k++) {
      right[k] = k ? Math.max(want[k], right[k - 1] + sep(offset + k - 1, offset + k)) : want[k];
    }
    for (let k = count - 1; k >= 0; k--) {
      left[k] = k < count - 1 ? Math.min(want[k], left[k + 1] - sep(offset + k, offset + k + 1))
        : want[k];
    }
    for (let k = 0; k < count; k++) X[offset + k] = (right[k] + left[k]) / 2;
  }

  function boxAt(placed, id) {
    const s = placed.slotOf.get(id), r = placed.rankOfSlot[s];
    return {x: placed.X[s] - placed.W[s] / 2, y: placed.rankTop[r] + (placed.rankH[r] - placed.H[s]) / 2,
      w: placed.W[s], h: placed.H[s]};
  }

  function edgePath(placed, chain) {
    const points = [];
    const a = chain[0], b = chain[chain.length - 1];
    const ra = placed.rankOfSlot[a], rb = placed.rankOfSlot[b];
    points.push([placed.X[a], placed.rankTop[ra] + (placed.rankH[ra] + placed.H[a]) / 2]);
    for (let k = 1; k < chain.length - 1; k++) {
      const s = chain[k], r = placed.rankOfSlot[s];
      points.push([placed.X[s], placed.rankTop[r]]);
      points.push([placed.X[s], placed.rankTop[r] + placed.rankH[r]]);
    }
    points.push([placed.X[b], placed.rankTop[rb] + (placed.rankH[rb] - placed.H[b]) / 2]);
    let d = "M" + points[0][0].toFixed(1) + "," + points[0][1].toFixed(1);
    for (let k = 1; k < points.length; k++) {
      const [x0, y0] = points[k - 1], [x1, y1] = points[k];
      const ym = ((y0 + y1) / 2).toFixed(1);
      d += "C" + x0.toFixed(1) + "," + ym + " " + x1.toFixed(1) + "," + ym + " " +
        x1.toFixed(1) + "," + y1.toFixed(1);
    }
    return {d, points};
  }

  return {place, boxAt, edgePath};
})();
