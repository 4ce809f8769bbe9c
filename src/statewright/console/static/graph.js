// A definition drawn as a graph: a node per state, Choice rules as labelled edges, Catch edges dashed, Retry as an
// edge back to its state, Parallel branches and Map iterations as nested groups between the state and a join. Laid
// out by dagre (vendor/, MIT), drawn as SVG.

import dagre from "./vendor/dagre-3.1.4.esm.js";

const SVG = "http://www.w3.org/2000/svg";
const NODE_HEIGHT = 36;
const COMPARATORS = /^(String|Numeric|Boolean|Timestamp)(Equals|LessThan|GreaterThan|LessThanEquals|GreaterThanEquals|Matches)(Path)?$|^Is(Null|Present|Numeric|String|Boolean|Timestamp)$/;

function ruleLabel(rule) {
  if (typeof rule.Condition === "string") return clip(rule.Condition, 42);
  for (const combinator of ["And", "Or"]) {
    if (Array.isArray(rule[combinator])) return rule[combinator].map(ruleLabel).join(` ${combinator.toLowerCase()} `);
  }
  if (rule.Not) return `not (${ruleLabel(rule.Not)})`;
  const operator = Object.keys(rule).find((key) => COMPARATORS.test(key));
  if (!operator) return "rule";
  return clip(`${rule.Variable ?? ""} ${operator} ${JSON.stringify(rule[operator])}`, 42);
}

function clip(text, length) {
  return text.length > length ? `${text.slice(0, length - 1)}…` : text;
}

function textWidth(text, size = 12) {
  return Math.ceil(text.length * size * 0.58);
}

// The graph of a definition: {nodes: Map(id -> {id, name, type, pseudo, retry}), edges: [...], clusters: [...]}.
export function buildGraph(definition) {
  const g = new dagre.graphlib.Graph({compound: true, multigraph: true});
  g.setGraph({rankdir: "TB", nodesep: 28, ranksep: 38, edgesep: 12, marginx: 16, marginy: 16});
  g.setDefaultEdgeLabel(() => ({}));
  const states = new Map(); // node id -> the state's facts
  let edgeCount = 0;

  function node(id, label, facts, parent) {
    const box = Math.max(facts.pseudo ? 60 : 110, textWidth(label) + 28);
    // A Retry is a loop back into its state, drawn on its right with its label: the layout keeps room for it on
    // both sides, so that edges still meet the box in its middle.
    const room = facts.retry ? 34 + textWidth(facts.retry, 10.5) : 0;
    const width = box + 2 * room;
    facts.box = box;
    g.setNode(id, {label, width, height: facts.join ? 10 : NODE_HEIGHT});
    if (parent) g.setParent(id, parent);
    states.set(id, {id, label, ...facts});
  }

  function edge(from, to, label = "", kind = "") {
    const size = label ? {width: textWidth(label, 10.5) + 6, height: 14, labelpos: "c"} : {};
    g.setEdge(from, to, {label, kind, ...size}, `e${edgeCount++}`);
  }

  // A scope's states (the top level, a branch, an iteration): returns its first node and the nodes that end it.
  function scope(body, prefix, parent) {
    const ids = new Map();
    const exits = [];
    const tails = new Map(); // state name -> the node its outgoing edges leave from (a join for Parallel/Map)
    for (const [name, state] of Object.entries(body.States || {})) {
      const id = `${prefix}${name}`;
      ids.set(name, id);
      node(id, name, {name, type: state.Type, retry: (state.Retry || []).map((retrier) =>
        `Retry ${clip((retrier.ErrorEquals || []).join(", "), 24)} up to ${retrier.MaxAttempts ?? 3}`).join("; ")},
      parent);
      let tail = id;
      const inner = state.Type === "Parallel" ? state.Branches || []
        : state.Type === "Map" ? [state.ItemProcessor || state.Iterator || {States: {}}] : null;
      if (inner) {
        tail = `${id}#join`;
        node(tail, "", {pseudo: true, join: true}, parent);
        inner.forEach((branch, index) => {
          const cluster = `${id}#group${index}`;
          const title = state.Type === "Map" ? `${name}: each item` : `${name}: branch ${index + 1}`;
          g.setNode(cluster, {label: title, clusterLabelPos: "top"});
          if (parent) g.setParent(cluster, parent);
          const sub = scope(branch, `${cluster}/`, cluster);
          if (sub.first) edge(id, sub.first);
          for (const exit of sub.exits) edge(exit, tail);
          if (!sub.first) edge(id, tail);
        });
      }
      tails.set(name, tail);
    }
    for (const [name, state] of Object.entries(body.States || {})) {
      const tail = tails.get(name);
      if (state.Type === "Choice") {
        (state.Choices || []).forEach((rule) => ids.has(rule.Next) && edge(tail, ids.get(rule.Next), ruleLabel(rule)));
        if (ids.has(state.Default)) edge(tail, ids.get(state.Default), "Default");
      } else if (state.Next && ids.has(state.Next)) {
        edge(tail, ids.get(state.Next));
      }
      for (const catcher of state.Catch || []) {
        if (ids.has(catcher.Next)) {
          edge(tail, ids.get(catcher.Next), `Catch ${clip((catcher.ErrorEquals || []).join(", "), 30)}`, "catch");
        }
      }
      if (state.End || state.Type === "Succeed" || state.Type === "Fail") exits.push(tail);
    }
    return {first: ids.get(body.StartAt), exits};
  }

  node("#start", "Start", {pseudo: true});
  node("#end", "End", {pseudo: true});
  const top = scope(definition, "", null);
  if (top.first) edge("#start", top.first);
  for (const exit of top.exits) edge(exit, "#end");
  dagre.layout(g);
  return {g, states};
}

// Where the line from ``outside`` to the node's centre crosses its box (``end`` when the box is the whole node).
function onBox(laid, facts, outside, end) {
  if (!facts || !facts.box || facts.box >= laid.width) return end;
  const dx = outside.x - laid.x;
  const dy = outside.y - laid.y;
  if (dx === 0 && dy === 0) return end;
  const scale = Math.min(dx === 0 ? Infinity : facts.box / 2 / Math.abs(dx),
                         dy === 0 ? Infinity : laid.height / 2 / Math.abs(dy));
  return {x: laid.x + dx * scale, y: laid.y + dy * scale};
}

function element(name, attributes = {}, parent = null) {
  const created = document.createElementNS(SVG, name);
  for (const [key, value] of Object.entries(attributes)) created.setAttribute(key, value);
  if (parent) parent.appendChild(created);
  return created;
}

// Draw the graph into ``container``; ``onSelect(stateName)`` on a click on a state. Returns a function that
// colours each state by ``statuses`` (state name -> status) and marks the selected one.
export function drawGraph(container, definition, onSelect) {
  const {g, states} = buildGraph(definition);
  const graph = g.graph();
  const svg = element("svg", {width: graph.width, height: graph.height, viewBox: `0 0 ${graph.width} ${graph.height}`,
                              "data-testid": "graph"});
  const defs = element("defs", {}, svg);
  const marker = element("marker", {id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7,
                                    markerHeight: 7, orient: "auto-start-reverse"}, defs);
  element("path", {d: "M 0 0 L 10 5 L 0 10 z", fill: "#7d8998"}, marker);
  for (const id of g.nodes()) {
    if (g.children(id).length === 0) continue;
    const cluster = g.node(id);
    const group = element("g", {class: "cluster"}, svg);
    element("rect", {x: cluster.x - cluster.width / 2, y: cluster.y - cluster.height / 2, width: cluster.width,
                     height: cluster.height, rx: 8}, group);
    const title = element("text", {x: cluster.x - cluster.width / 2 + 8, y: cluster.y - cluster.height / 2 + 13},
                          group);
    title.textContent = cluster.label;
  }
  for (const key of g.edges()) {
    const drawn = g.edge(key);
    const group = element("g", {class: `edge ${drawn.kind}`}, svg);
    const ends = drawn.points.map((point) => ({...point}));
    // A node with room for its Retry loop is wider than its box: its edges end on the box, not on the room.
    ends[0] = onBox(g.node(key.v), states.get(key.v), ends[1] || ends[0], ends[0]);
    ends[ends.length - 1] = onBox(g.node(key.w), states.get(key.w), ends.at(-2) || ends.at(-1), ends.at(-1));
    const points = ends.map((point) => `${point.x},${point.y}`);
    element("path", {d: `M ${points.join(" L ")}`, "marker-end": "url(#arrow)"}, group);
    if (drawn.label) {
      const label = element("text", {x: drawn.x, y: drawn.y + 4, "text-anchor": "middle"}, group);
      label.textContent = drawn.label;
    }
  }
  const shapes = new Map(); // state name -> its node's group
  for (const id of g.nodes()) {
    const facts = states.get(id);
    if (!facts) continue; // a cluster
    const laid = g.node(id);
    const group = element("g", {class: `node${facts.pseudo ? " pseudo" : ""}`, "data-state": facts.name ?? ""}, svg);
    element("rect", {x: laid.x - facts.box / 2, y: laid.y - laid.height / 2, width: facts.box, height: laid.height,
                     rx: facts.pseudo ? laid.height / 2 : 6}, group);
    if (facts.join) continue;
    const text = element("text", {x: laid.x, y: laid.y + 4, "text-anchor": "middle"}, group);
    text.textContent = facts.label;
    if (facts.retry) {
      const right = laid.x + facts.box / 2;
      const loop = element("g", {class: "edge retry"}, svg);
      element("path", {d: `M ${right} ${laid.y - 7} C ${right + 30} ${laid.y - 22}, ${right + 30} ${laid.y + 22}, `
                          + `${right + 1} ${laid.y + 8}`, "marker-end": "url(#arrow)"}, loop);
      const label = element("text", {x: right + 30, y: laid.y + 4}, loop);
      label.textContent = facts.retry;
    }
    if (!facts.pseudo) {
      group.addEventListener("click", () => onSelect(facts.name));
      if (!shapes.has(facts.name)) shapes.set(facts.name, []);
      shapes.get(facts.name).push(group);
    }
  }
  container.replaceChildren(svg);
  return (statuses, selected) => {
    for (const [name, groups] of shapes) {
      const status = statuses.get(name);
      for (const group of groups) {
        group.setAttribute("class", `node${status ? ` ${status}` : ""}${name === selected ? " selected" : ""}`);
        group.setAttribute("data-status", status || "not-started");
      }
    }
  };
}
