// The console's pages: state machines, one state machine (its graph, versions, aliases, executions), one execution
// (its graph coloured as it ran, live; its history as a table and a timeline; its map runs), a map run, an Express
// execution this node kept, activities, the cluster. Routes are the URL's fragment: #/, #/state-machine/<arn>,
// #/execution/<arn>, #/express/<arn>, #/map-run/<arn>, #/activities, #/cluster.

import {ApiError, all, call, eventsAfter, history, stream, view} from "./api.js";
import {canSign, credentials, signIn, signOut} from "./signing.js";
import {drawGraph} from "./graph.js";
import {runsOf, statusByState} from "./history.js";

const HISTORY_PAGE = 1000; // events per read of the history
const TABLE_ROWS = 100; // events per page of the history table
const TIMELINE_ROWS = 200; // state runs per page of the timeline
const DETAIL_RUNS = 20; // runs of one state shown when it is clicked
const main = document.getElementById("main");
const dialog = document.getElementById("dialog");
let leave = () => {}; // what the current page stops when another one opens (a stream, a timer)

// -- small helpers

function h(tag, attributes = {}, ...children) {
  const created = document.createElement(tag);
  for (const [key, value] of Object.entries(attributes)) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on")) created.addEventListener(key.slice(2), value);
    else if (key === "text") created.textContent = value;
    else created.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat(Infinity)) {
    if (child !== null && child !== undefined && child !== false) {
      created.append(child instanceof Node ? child : String(child));
    }
  }
  return created;
}

function when(seconds) {
  return seconds === undefined || seconds === null ? "" : new Date(seconds * 1000).toLocaleString();
}

function duration(seconds) {
  if (seconds < 1) return `${Math.round(seconds * 1000)} ms`;
  if (seconds < 120) return `${seconds.toFixed(seconds < 10 ? 2 : 1)} s`;
  return `${Math.floor(seconds / 60)} min ${Math.round(seconds % 60)} s`;
}

function pretty(text) {
  if (text === undefined || text === null) return "";
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return String(text);
  }
}

function status(value) {
  return h("span", {class: `status ${value}`, "data-testid": "status"}, value);
}

function nameOf(arn, express = false) {
  return arn.split(":").at(express ? -2 : -1);
}

function link(route, text) {
  return h("a", {href: `#/${route}`}, text);
}

function showError(error) {
  const box = document.getElementById("error");
  box.hidden = !error;
  box.textContent = error ? (error instanceof ApiError ? error.message : String(error)) : "";
}

// A modal dialog; resolves with what ``collect`` returns on confirm (or null when cancelled). ``collect`` may
// throw to keep the dialog open with its message shown.
function ask(title, body, confirmText, {danger = false, collect = () => true} = {}) {
  return new Promise((resolve) => {
    const invalid = h("div", {class: "invalid", "data-testid": "dialog-invalid"});
    const done = (value) => {
      dialog.close();
      resolve(value);
    };
    const confirm = h("button", {class: `primary${danger ? " danger" : ""}`, "data-testid": "dialog-confirm",
                                 onclick: () => {
                                   try {
                                     done(collect());
                                   } catch (error) {
                                     invalid.textContent = error.message;
                                   }
                                 }}, confirmText);
    dialog.replaceChildren(h("h3", {}, title), body, invalid,
      h("div", {class: "actions"}, h("button", {onclick: () => done(null), "data-testid": "dialog-cancel"}, "Cancel"),
        confirm));
    dialog.onclose = () => resolve(null);
    dialog.showModal();
  });
}

// A table whose columns sort on a click: ``columns`` [{title, key(row) -> sortable value, cell(row) -> node}].
function sortableTable(rows, columns, initial = 0, descending = true, testid = "table") {
  let sortBy = initial;
  let down = descending;
  const body = h("tbody");
  const heads = columns.map((column, index) => h("th", {class: "sortable", onclick: () => {
    down = sortBy === index ? !down : false;
    sortBy = index;
    render();
  }}, column.title));
  function render() {
    const key = columns[sortBy].key;
    const sorted = [...rows].sort((a, b) => {
      const [x, y] = [key(a), key(b)];
      return (x < y ? -1 : x > y ? 1 : 0) * (down ? -1 : 1);
    });
    heads.forEach((head, index) => {
      head.textContent = columns[index].title + (index === sortBy ? (down ? " ▼" : " ▲") : "");
    });
    body.replaceChildren(...sorted.map((row) => h("tr", {}, columns.map((column) => h("td", {}, column.cell(row))))));
  }
  render();
  return h("table", {"data-testid": testid}, h("thead", {}, h("tr", {}, heads)), body);
}

// -- pages

async function machinesPage() {
  const machines = await all("ListStateMachines", {maxResults: 1000}, "stateMachines");
  const create = h("p", {class: "muted"},
    "Create state machines with the AWS CLI, an SDK or statewright import; they appear here.");
  main.replaceChildren(h("h1", {}, "State machines"), create, machines.length === 0
    ? h("p", {class: "muted", "data-testid": "empty"}, "No state machines yet.")
    : sortableTable(machines, [
      {title: "Name", key: (m) => m.name, cell: (m) => link(`state-machine/${encodeURIComponent(m.stateMachineArn)}`,
                                                            m.name)},
      {title: "Type", key: (m) => m.type, cell: (m) => m.type},
      {title: "Created", key: (m) => m.creationDate, cell: (m) => when(m.creationDate)},
    ], 2, true, "machines"));
}

async function machinePage(arn) {
  const [machine, versions, aliases] = await Promise.all([
    call("DescribeStateMachine", {stateMachineArn: arn}),
    all("ListStateMachineVersions", {stateMachineArn: arn, maxResults: 1000}, "stateMachineVersions"),
    all("ListStateMachineAliases", {stateMachineArn: arn, maxResults: 100}, "stateMachineAliases"),
  ]);
  const routed = await Promise.all(aliases.map((alias) =>
    call("DescribeStateMachineAlias", {stateMachineAliasArn: alias.stateMachineAliasArn})));
  const definition = JSON.parse(machine.definition);
  const graph = h("div", {class: "graph"});
  const executions = h("div", {"data-testid": "executions"});
  main.replaceChildren(
    h("p", {}, link("", "State machines"), " / "),
    h("h1", {}, machine.name),
    h("div", {class: "panel"}, h("dl", {class: "facts"},
      h("dt", {}, "ARN"), h("dd", {}, machine.stateMachineArn),
      h("dt", {}, "Type"), h("dd", {}, machine.type),
      h("dt", {}, "Role"), h("dd", {}, machine.roleArn),
      h("dt", {}, "Created"), h("dd", {}, when(machine.creationDate)))),
    h("div", {class: "toolbar"},
      h("button", {class: "primary", "data-testid": "start", onclick: () => startExecution(arn, machine.type)},
        "Start execution")),
    h("h2", {}, "Executions"), executions,
    h("h2", {}, "Definition"), h("div", {class: "graph-wrap"}, graph),
    h("details", {}, h("summary", {}, "Definition as JSON"), h("pre", {"data-testid": "definition"},
                                                                 pretty(machine.definition))),
    h("h2", {}, "Versions"),
    versions.length === 0 ? h("p", {class: "muted"}, "No versions published.")
      : sortableTable(versions, [
        {title: "Version", key: (v) => Number(v.stateMachineVersionArn.split(":").pop()),
         cell: (v) => v.stateMachineVersionArn.split(":").pop()},
        {title: "Created", key: (v) => v.creationDate, cell: (v) => when(v.creationDate)},
      ], 0, true, "versions"),
    h("h2", {}, "Aliases"),
    routed.length === 0 ? h("p", {class: "muted"}, "No aliases.")
      : sortableTable(routed, [
        {title: "Alias", key: (a) => a.name, cell: (a) => a.name},
        {title: "Routing", key: (a) => a.routingConfiguration.length, cell: (a) => a.routingConfiguration.map(
          (route) => `version ${route.stateMachineVersionArn.split(":").pop()}: ${route.weight} %`).join(", ")},
        {title: "Description", key: (a) => a.description || "", cell: (a) => a.description || ""},
      ], 0, false, "aliases"),
  );
  drawGraph(graph, definition, () => {})(new Map(), null);
  if (machine.type === "EXPRESS") await expressList(executions, arn);
  else await executionList(executions, arn);
}

// An Express state machine's executions: the last ones this node kept (AWS keeps no history of them).
async function expressList(container, machineArn) {
  const kept = await view(`/console/express?stateMachineArn=${encodeURIComponent(machineArn)}`);
  container.replaceChildren(h("p", {class: "muted"}, kept.kept === 0
    ? "This server keeps no Express executions (--console-express-executions 0)."
    : `The last ${kept.kept} Express executions this node ran, with their events (kept in memory).`),
  kept.executions.length === 0 ? h("p", {class: "muted"}, "None yet.") : sortableTable(kept.executions, [
    {title: "Name", key: (e) => e.name, cell: (e) => link(`express/${encodeURIComponent(e.executionArn)}`, e.name)},
    {title: "Status", key: (e) => e.status, cell: (e) => status(e.status)},
    {title: "Started", key: (e) => e.startDate, cell: (e) => when(e.startDate)},
    {title: "Ended", key: (e) => e.stopDate, cell: (e) => when(e.stopDate)},
  ], 2, true, "express-list"));
}

async function executionList(container, machineArn, mapRunArn = null) {
  const filter = h("select", {"data-testid": "status-filter"}, ["All", "RUNNING", "SUCCEEDED", "FAILED", "TIMED_OUT",
    "ABORTED", "PENDING_REDRIVE"].map((value) => h("option", {value}, value)));
  const search = h("input", {type: "search", placeholder: "Name starts with", "data-testid": "search"});
  const list = h("div");
  const more = h("button", {hidden: true}, "Load more");
  let loaded = [];
  let nextToken = null;
  async function load(fresh) {
    if (fresh) {
      loaded = [];
      nextToken = null;
    }
    const page = await call("ListExecutions", {...(mapRunArn ? {mapRunArn} : {stateMachineArn: machineArn}),
      maxResults: 100,
      ...(filter.value === "All" ? {} : {statusFilter: filter.value}), ...(nextToken ? {nextToken} : {})});
    loaded.push(...page.executions);
    nextToken = page.nextToken || null;
    more.hidden = !nextToken;
    render();
  }
  function render() {
    const prefix = search.value.trim();
    const shown = prefix ? loaded.filter((execution) => execution.name.startsWith(prefix)) : loaded;
    list.replaceChildren(shown.length === 0 ? h("p", {class: "muted"}, "No executions.") : sortableTable(shown, [
      {title: "Name", key: (e) => e.name,
       cell: (e) => link(`execution/${encodeURIComponent(e.executionArn)}`, e.name)},
      {title: "Status", key: (e) => e.status, cell: (e) => status(e.status)},
      {title: "Started", key: (e) => e.startDate, cell: (e) => when(e.startDate)},
      {title: "Ended", key: (e) => e.stopDate || 0, cell: (e) => when(e.stopDate)},
    ], 2, true, "execution-list"));
  }
  filter.addEventListener("change", () => load(true).catch(showError));
  search.addEventListener("input", render);
  more.addEventListener("click", () => load(false).catch(showError));
  container.replaceChildren(h("div", {class: "toolbar"}, filter, search), list, more);
  await load(true);
}

async function startExecution(machineArn, type) {
  const name = h("input", {placeholder: "(a generated name)", "data-testid": "execution-name", size: 40});
  const input = h("textarea", {rows: 10, "data-testid": "execution-input"}, '{\n  "Comment": "Insert your JSON here"\n}');
  const body = h("div", {}, h("p", {}, "Name (optional)"), name, h("p", {}, "Input (JSON)"), input,
    type === "EXPRESS" ? h("p", {class: "muted"}, "No history is kept of Express executions: the console shows "
                                                  + "this one, with its events, once it has finished.") : null);
  const started = await ask("Start execution", body, "Start execution", {collect: () => {
    try {
      JSON.parse(input.value);
    } catch (error) {
      throw new Error(`The input is not valid JSON: ${error.message}`);
    }
    return {stateMachineArn: machineArn, input: input.value, ...(name.value.trim() ? {name: name.value.trim()} : {})};
  }});
  if (!started) return;
  try {
    const answer = await call("StartExecution", started);
    const page = type === "EXPRESS" ? "express" : "execution";
    location.hash = `#/${page}/${encodeURIComponent(answer.executionArn)}`;
  } catch (error) {
    showError(error);
  }
}

// One execution. ``express``: one of the Express executions this node keeps (no history is stored of those: its
// events come from the console's view, whole, and it cannot be stopped or redriven).
async function executionPage(arn, express = false) {
  let execution;
  let machine;
  let events;
  let nextToken = null;
  if (express) {
    try {
      execution = await view(`/console/express?executionArn=${encodeURIComponent(arn)}`);
    } catch (error) {
      if (error.status !== 404) throw error;
      main.replaceChildren(h("h1", {}, nameOf(arn, true)), h("p", {"data-testid": "express-waiting"},
        "Not among the finished Express executions this node keeps: it is still running, or it ran elsewhere or "
        + "long ago. This page looks again every second."));
      const timer = setTimeout(() => location.hash.includes(encodeURIComponent(arn)) && route(), 1000);
      leave = () => clearTimeout(timer);
      return;
    }
    events = execution.events;
    machine = await call("DescribeStateMachine", {stateMachineArn: execution.stateMachineArn});
  } else {
    execution = await call("DescribeExecution", {executionArn: arn});
    // The first page of the history now; the rest page by page behind it, the graph repainted as each comes.
    let first;
    [machine, first] = await Promise.all([
      call("DescribeStateMachineForExecution", {executionArn: arn}),
      call("GetExecutionHistory", {executionArn: arn, maxResults: HISTORY_PAGE})]);
    events = first.events;
    nextToken = first.nextToken || null;
  }
  let tablePage = 0;
  let timelinePage = 0;
  const definition = JSON.parse(machine.definition);
  const machineArn = execution.stateMachineArn;
  const resources = new Map();
  const resourceOf = (name) => {
    if (!resources.has(name)) resources.set(name, findState(definition, name)?.Resource ?? null);
    return resources.get(name);
  };
  let selected = null;
  let pane = "graph";
  const facts = h("div", {class: "panel"});
  const mapRuns = h("div", {"data-testid": "map-runs"});
  const hasDistributedMap = machine.definition.includes('"DISTRIBUTED"');
  const actions = h("div", {class: "toolbar"});
  const graph = h("div", {class: "graph"});
  const detail = h("div", {class: "details panel", "data-testid": "state-details"},
    h("p", {class: "muted"}, "Choose a state to see its input, output and attempts."));
  const table = h("div", {"data-testid": "history"});
  const timeline = h("div", {class: "timeline", "data-testid": "timeline"});
  const tabs = h("div", {class: "tabs"});
  const panes = {graph: h("div", {}, legend(), h("div", {class: "graph-wrap"}, graph, detail)), history: table,
                 timeline};
  const body = h("div");
  const paint = drawGraph(graph, definition, (name) => {
    selected = name;
    refresh();
  });

  function legend() {
    return h("div", {class: "legend"}, [["succeeded", "Succeeded"], ["failed", "Failed"], ["caught", "Caught error"],
      ["running", "In progress"], ["aborted", "Aborted"]].map(([kind, text]) =>
      h("span", {}, h("i", {style: `border-color: var(--${kind})`}), text)));
  }

  function show(name) {
    pane = name;
    tabs.replaceChildren(...Object.keys(panes).map((each) => h("button", {class: each === pane ? "current" : "",
      "data-testid": `tab-${each}`, onclick: () => show(each)}, {graph: "Graph view", history: "Event history",
      timeline: "Timeline"}[each])));
    body.replaceChildren(panes[pane]);
  }

  function refresh() {
    const runs = runsOf(events, execution, resourceOf);
    paint(statusByState(runs), selected);
    renderFacts();
    renderDetail(runs);
    renderTable();
    renderTimeline(runs);
  }

  function renderFacts() {
    facts.replaceChildren(h("dl", {class: "facts"},
      h("dt", {}, "Status"), h("dd", {}, status(execution.status)),
      h("dt", {}, execution.mapRunArn ? "Map run" : "State machine"), h("dd", {}, execution.mapRunArn
        ? link(`map-run/${encodeURIComponent(execution.mapRunArn)}`, execution.mapRunArn.split("/").pop())
        : link(`state-machine/${encodeURIComponent(machineArn)}`, nameOf(machineArn))),
      h("dt", {}, "ARN"), h("dd", {}, execution.executionArn),
      h("dt", {}, "Started"), h("dd", {}, when(execution.startDate)),
      h("dt", {}, "Ended"), h("dd", {}, when(execution.stopDate)),
      execution.redriveCount ? [h("dt", {}, "Redrives"), h("dd", {}, execution.redriveCount)] : null,
      execution.error ? [h("dt", {}, "Error"), h("dd", {"data-testid": "error"}, execution.error)] : null,
      execution.cause ? [h("dt", {}, "Cause"), h("dd", {}, h("pre", {}, pretty(execution.cause)))] : null),
    h("details", {}, h("summary", {}, "Input and output"), h("p", {}, "Input"), h("pre", {}, pretty(execution.input)),
      h("p", {}, "Output"), h("pre", {"data-testid": "output"}, pretty(execution.output))));
    const redrivable = ["FAILED", "TIMED_OUT", "ABORTED"].includes(execution.status)
      && (execution.redriveStatus ?? "REDRIVABLE") === "REDRIVABLE";
    actions.replaceChildren(
      ...(express ? [h("span", {class: "muted"}, "An Express execution kept by this node for the console "
                                                  + "(no history is stored of Express executions).")] : [
        h("button", {class: "danger", disabled: execution.status !== "RUNNING", "data-testid": "stop",
                     onclick: stop}, "Stop execution"),
        h("button", {disabled: !redrivable, "data-testid": "redrive", onclick: redrive}, "Redrive")]),
      execution.mapRunArn ? null : h("button", {"data-testid": "new-execution",
                                                onclick: () => startExecution(machineArn, machine.type)},
                                     "New execution"),
      h("button", {"data-testid": "download", onclick: download}, "Download history (JSON)"));
  }

  function renderDetail(runs) {
    if (!selected) return;
    const all = runs.filter((run) => run.name === selected);
    const mine = all.slice(-DETAIL_RUNS); // a Map's state may have run thousands of times: the latest
    const state = findState(definition, selected);
    const inChildren = insideDistributedMap(definition, selected);
    detail.replaceChildren(...[h("h3", {"data-testid": "selected-state"}, selected),
      h("p", {class: "muted"}, `${state?.Type ?? ""} state`),
      state?.Type === "Fail" ? h("dl", {class: "facts"}, h("dt", {}, "Error"), h("dd", {}, state.Error ?? "—"),
                                 h("dt", {}, "Cause"), h("dd", {}, state.Cause ?? "—")) : null,
      all.length > mine.length ? h("p", {class: "muted"}, `The last ${mine.length} of ${all.length} runs.`) : null,
      mine.length === 0 ? h("p", {class: "muted"}, inChildren
        ? "It runs in the child executions of this execution's map runs (above)." : "Not entered in this execution.")
        : mine.map((run, index) => h("div", {"data-testid": "state-run"},
        all.length > 1 ? h("h4", {}, `Run ${all.length - mine.length + index + 1} of ${all.length}`) : null,
        h("dl", {class: "facts"},
          h("dt", {}, "Status"), h("dd", {"data-testid": "run-status"}, run.status),
          h("dt", {}, "Entered"), h("dd", {}, when(run.entered)),
          h("dt", {}, "Duration"), h("dd", {}, run.exited !== null ? duration(run.exited - run.entered) : "—")),
        run.attempts.length ? [h("p", {}, `Attempts (${run.attempts.length})`), h("table", {"data-testid": "attempts"},
          h("thead", {}, h("tr", {}, ["#", "Scheduled", "Took", "Outcome"].map((title) => h("th", {}, title)))),
          h("tbody", {}, run.attempts.map((attempt, number) => h("tr", {},
            h("td", {}, `#${number + 1}`), h("td", {}, when(attempt.scheduled)),
            h("td", {}, attempt.ended ? duration(attempt.ended - attempt.scheduled) : "…"),
            h("td", {}, attempt.outcome ?? "in progress", attempt.error ? ` — ${attempt.error}` : "")))))] : null,
        h("p", {}, "Input"), h("pre", {"data-testid": "state-input"}, pretty(run.input)),
        h("p", {}, "Output"), h("pre", {"data-testid": "state-output"}, run.exited !== null ? pretty(run.output) : "—"),
        errorOf(run)))].flat());
  }

  function errorOf(run) {
    const failed = [...run.attempts].reverse().find((attempt) => attempt.error) || (run.error ? run : null);
    if (!failed) return null;
    return [h("p", {}, "Error"), h("pre", {"data-testid": "state-error"}, failed.error),
            failed.cause ? [h("p", {}, "Cause"), h("pre", {}, pretty(failed.cause))] : null];
  }

  // Rows ``size`` at a time, with the controls to move between pages (``move(page)``).
  function pager(count, size, current, move, testid) {
    const pages = Math.max(1, Math.ceil(count / size));
    return h("div", {class: "toolbar", "data-testid": testid},
      h("button", {disabled: current === 0, onclick: () => move(current - 1), "data-testid": `${testid}-previous`},
        "Previous"),
      h("span", {"data-testid": `${testid}-where`}, `Page ${current + 1} of ${pages}`),
      h("button", {disabled: current >= pages - 1, onclick: () => move(current + 1), "data-testid": `${testid}-next`},
        "Next"),
      h("span", {class: "muted"}, `${count.toLocaleString()} ${testid === "history-pages" ? "events" : "runs"}`
        + (nextToken ? " so far (reading the rest)" : "")));
  }

  function renderTable() {
    const pages = Math.max(1, Math.ceil(events.length / TABLE_ROWS));
    tablePage = Math.min(tablePage, pages - 1);
    const shown = events.slice(tablePage * TABLE_ROWS, (tablePage + 1) * TABLE_ROWS);
    table.replaceChildren(pager(events.length, TABLE_ROWS, tablePage, (page) => {
      tablePage = page;
      renderTable();
    }, "history-pages"), h("table", {"data-testid": "history-table"}, h("thead", {}, h("tr", {},
      ["ID", "Type", "Step", "Elapsed", "Time", "Details"].map((title) => h("th", {}, title)))),
    h("tbody", {}, shown.map((event) => {
      const details = Object.entries(event).find(([key]) => key.endsWith("EventDetails"));
      const step = details && details[1].name;
      return h("tr", {}, h("td", {}, event.id), h("td", {}, event.type), h("td", {}, step || ""),
        h("td", {}, duration(event.timestamp - events[0].timestamp)), h("td", {}, when(event.timestamp)),
        h("td", {}, details ? h("pre", {}, JSON.stringify(details[1], null, 1)) : ""));
    }))));
  }

  function renderTimeline(runs) {
    if (!runs.length) {
      timeline.replaceChildren(h("p", {class: "muted"}, "No state entered yet."));
      return;
    }
    const start = execution.startDate;
    const end = Math.max(execution.stopDate || Date.now() / 1000, ...runs.map((run) => run.exited || 0));
    const span = Math.max(end - start, 0.001);
    const at = (seconds) => `${(100 * (seconds - start) / span).toFixed(3)}%`;
    const count = new Map(); // a state run more than once (a Map's iterations, a loop) is numbered
    const number = new Map();
    for (const run of runs) {
      count.set(run.name, (count.get(run.name) || 0) + 1);
      number.set(run, count.get(run.name));
    }
    const pages = Math.max(1, Math.ceil(runs.length / TIMELINE_ROWS));
    timelinePage = Math.min(timelinePage, pages - 1);
    timeline.replaceChildren(pager(runs.length, TIMELINE_ROWS, timelinePage, (page) => {
      timelinePage = page;
      renderTimeline(runsOf(events, execution, resourceOf));
    }, "timeline-pages"),
      h("div", {class: "axis"}, h("span", {}, "State"), h("span", {}, `0 — ${duration(span)}`)),
      ...runs.slice(timelinePage * TIMELINE_ROWS, (timelinePage + 1) * TIMELINE_ROWS).map((run) => {
        const until = run.exited ?? (execution.stopDate || Date.now() / 1000);
        const bar = h("div", {class: `bar ${run.status}`, title: `${run.name}: ${duration(until - run.entered)}`,
          style: `left: ${at(run.entered)}; width: calc(${at(until)} - ${at(run.entered)})`});
        const marks = run.attempts.slice(1).map((attempt) => h("div", {class: "mark", style: `left: ${at(
          attempt.scheduled)}`, title: `retry at ${when(attempt.scheduled)}`}));
        const label = count.get(run.name) > 1 ? `${run.name} #${number.get(run)}` : run.name;
        return h("div", {class: "row", "data-testid": "timeline-row"}, h("span", {class: "name", title: label}, label),
          h("div", {class: "lane"}, bar, marks));
      }));
  }

  async function stop() {
    const confirmed = await ask("Stop execution?", h("p", {}, `Stop ${execution.name}? Its running state is `
      + "interrupted and it ends ABORTED.", h("br"), "It can be redriven afterwards, from the states that did not "
      + "succeed."),
    "Stop execution", {danger: true});
    if (!confirmed) return;
    await call("StopExecution", {executionArn: arn}).catch(showError);
    await wake();
  }

  async function redrive() {
    const confirmed = await ask("Redrive execution?", h("p", {}, `Redrive ${execution.name}? It restarts from the `
      + "states that did not succeed, keeping the results of those that did."), "Redrive");
    if (!confirmed) return;
    await call("RedriveExecution", {executionArn: arn}).catch(showError);
    await wake();
  }

  async function download() {
    const whole = express ? events : await history(arn);
    const blob = new Blob([JSON.stringify({events: whole}, null, 2)], {type: "application/json"});
    const anchor = h("a", {href: URL.createObjectURL(blob), download: `${execution.name}-history.json`});
    document.body.append(anchor);
    anchor.click();
    anchor.remove();
  }

  async function update() {
    if (nextToken) {  // still reading the history forward: the next page brings the new events too
      const page = await call("GetExecutionHistory", {executionArn: arn, maxResults: HISTORY_PAGE, nextToken});
      events.push(...page.events);
      nextToken = page.nextToken || null;
      if (nextToken) again = true;
    } else {
      events.push(...await eventsAfter(arn, events.length ? events.at(-1).id : 0));
    }
    execution = await call("DescribeExecution", {executionArn: arn});
    if (hasDistributedMap) await listMapRuns(mapRuns, arn);
    refresh();
  }

  // Live: a commit on this node that added to the history wakes the stream; a timer covers executions another
  // node runs (and servers with no stream).
  let updating = false;
  let again = false; // woken while reading: read once more after
  const wake = async () => {
    if (updating) {
      again = true;
      return;
    }
    updating = true;
    try {
      do {
        again = false;
        await update();
      } while (again);
    } catch (error) {
      showError(error);
    } finally {
      updating = false;
    }
  };
  if (!express) {
    const unwatch = stream(`/console/events?executionArn=${encodeURIComponent(arn)}`,
      (name) => name === "committed" && wake());
    const timer = setInterval(() => execution.status === "RUNNING" && wake(), 5000);
    leave = () => {
      unwatch();
      clearInterval(timer);
    };
  }

  main.replaceChildren(h("p", {}, link("", "State machines"), " / ", execution.mapRunArn
    ? link(`map-run/${encodeURIComponent(execution.mapRunArn)}`, `map run ${execution.mapRunArn.split("/").pop()}`)
    : link(`state-machine/${encodeURIComponent(machineArn)}`, nameOf(machineArn)), " / "),
  h("h1", {}, execution.name), facts, actions, mapRuns, tabs, body);
  if (!express) listMapRuns(mapRuns, arn).catch(showError);
  show(pane);
  refresh();
  if (nextToken) wake();
}

// The map runs a distributed Map of this execution started, with their counters.
async function listMapRuns(container, arn) {
  const runs = await all("ListMapRuns", {executionArn: arn, maxResults: 1000}, "mapRuns");
  if (!runs.length) return;
  const described = await Promise.all(runs.map((run) => call("DescribeMapRun", {mapRunArn: run.mapRunArn})));
  container.replaceChildren(h("h2", {}, "Map runs"), mapRunTable(described));
}

function mapRunTable(runs) {
  const counts = (counters) => `${counters.succeeded} succeeded, ${counters.failed} failed, ${counters.running} `
    + `running, ${counters.pending} pending, ${counters.aborted} aborted, ${counters.timedOut} timed out `
    + `(${counters.total} in all)`;
  return sortableTable(runs, [
    {title: "Map run", key: (r) => r.mapRunArn, cell: (r) => link(`map-run/${encodeURIComponent(r.mapRunArn)}`,
                                                                  r.mapRunArn.split("/").pop())},
    {title: "Status", key: (r) => r.status, cell: (r) => status(r.status)},
    {title: "Items", key: (r) => r.itemCounts.total, cell: (r) => counts(r.itemCounts)},
    {title: "Child executions", key: (r) => r.executionCounts.total, cell: (r) => counts(r.executionCounts)},
    {title: "Started", key: (r) => r.startDate, cell: (r) => when(r.startDate)},
  ], 4, true, "map-run-table");
}

async function mapRunPage(arn) {
  const run = await call("DescribeMapRun", {mapRunArn: arn});
  const children = h("div", {"data-testid": "children"});
  main.replaceChildren(h("p", {}, link("", "State machines"), " / ",
    link(`execution/${encodeURIComponent(run.executionArn)}`, nameOf(run.executionArn)), " / "),
  h("h1", {}, `Map run ${arn.split("/").pop()}`), mapRunTable([run]),
  h("div", {class: "panel"}, h("dl", {class: "facts"},
    h("dt", {}, "Max concurrency"), h("dd", {}, run.maxConcurrency || "unbounded"),
    h("dt", {}, "Tolerated failures"), h("dd", {}, `${run.toleratedFailureCount} or ${run.toleratedFailurePercentage} %`),
    h("dt", {}, "Ended"), h("dd", {}, when(run.stopDate)))),
  h("h2", {}, "Child executions"), children);
  await executionList(children, null, arn);
}

// Whether the state is in the ItemProcessor of a distributed Map: it runs in the map run's child executions.
function insideDistributedMap(body, name, inside = false) {
  for (const [stateName, state] of Object.entries(body.States || {})) {
    if (stateName === name) return inside;
    const distributed = state.Type === "Map" && (state.ItemProcessor?.ProcessorConfig?.Mode === "DISTRIBUTED");
    for (const inner of [...(state.Branches || []), state.ItemProcessor, state.Iterator].filter(Boolean)) {
      const found = insideDistributedMap(inner, name, inside || distributed);
      if (found !== null) return found;
    }
  }
  return null;
}

function findState(body, name) {
  for (const [stateName, state] of Object.entries(body.States || {})) {
    if (stateName === name) return state;
    for (const inner of [...(state.Branches || []), state.ItemProcessor, state.Iterator].filter(Boolean)) {
      const found = findState(inner, name);
      if (found) return found;
    }
  }
  return null;
}

async function activitiesPage() {
  const [activities, here] = await Promise.all([all("ListActivities", {maxResults: 1000}, "activities"),
    view("/console/activities")]);
  const waiting = (activity) => here.activities[activity.activityArn] || {tasksWaiting: 0, workersPolling: {}};
  const workers = (activity) => Object.entries(waiting(activity).workersPolling).map(
    ([name, polls]) => `${name || "(unnamed)"}${polls > 1 ? ` ×${polls}` : ""}`).join(", ");
  main.replaceChildren(h("h1", {}, "Activities"), h("p", {class: "muted"},
    "Tasks waiting for a worker, and workers waiting for a task, on this node (GetActivityTask long polls). A task "
    + "whose execution stopped is counted until a worker's poll finds it gone."),
  activities.length === 0 ? h("p", {class: "muted", "data-testid": "empty"}, "No activities yet.")
    : sortableTable(activities, [
      {title: "Name", key: (a) => a.name, cell: (a) => a.name},
      {title: "Tasks waiting", key: (a) => waiting(a).tasksWaiting, cell: (a) => waiting(a).tasksWaiting},
      {title: "Workers polling", key: (a) => workers(a), cell: (a) => workers(a)},
      {title: "Created", key: (a) => a.creationDate, cell: (a) => when(a.creationDate)},
      {title: "ARN", key: (a) => a.activityArn, cell: (a) => a.activityArn},
    ], 0, false, "activities"));
  main.prepend(h("div", {class: "toolbar", style: "float: right"}, h("button", {onclick: route}, "Refresh")));
}

async function clusterPage() {
  const cluster = await view("/console/cluster");
  const owners = new Map();
  for (const shard of cluster.shards) owners.set(shard.owner, (owners.get(shard.owner) || 0) + 1);
  main.replaceChildren(h("h1", {}, "Cluster"), h("p", {class: "muted"}, `As node ${cluster.node} reads the store now.`),
    cluster.nodes.length === 0
      ? h("p", {"data-testid": "single-node"}, `One node, on SQLite: it serves all ${cluster.shards.length} shards, `
        + "held for as long as it runs (no other server may open its data directory), so their leases are not renewed.")
      : [h("h2", {}, "Nodes"), sortableTable(cluster.nodes, [
        {title: "Node", key: (n) => n.nodeId, cell: (n) => n.nodeId},
        {title: "Address", key: (n) => n.address, cell: (n) => n.address},
        {title: "Live", key: (n) => n.live, cell: (n) => (n.live ? "yes" : "no (its lease ran out)")},
        {title: "Shards", key: (n) => n.shards, cell: (n) => n.shards},
        {title: "Lease until", key: (n) => n.leaseUntil, cell: (n) => when(n.leaseUntil)},
      ], 0, false, "nodes")],
    h("h2", {}, "Shards"), sortableTable(cluster.shards, [
      {title: "Shard", key: (x) => x.shardId, cell: (x) => x.shardId},
      {title: "Owner", key: (x) => x.owner || "", cell: (x) => x.owner || "(free)"},
      {title: "Range id", key: (x) => x.rangeId, cell: (x) => x.rangeId},
      {title: "Lease until", key: (x) => x.leaseUntil, cell: (x) => when(x.leaseUntil)},
    ], 0, false, "shards"));
}

// -- signing in (a server started with --auth sigv4 answers unsigned requests with MissingAuthenticationToken)

function signInPage(refusal) {
  const field = (label, name, attributes = {}) => h("label", {}, label,
    h("input", {name, "data-testid": `sign-in-${name}`, autocomplete: "off", ...attributes}));
  const form = h("form", {class: "sign-in", "data-testid": "sign-in"},
    field("Access key ID", "accessKeyId", {required: true}),
    field("Secret access key", "secretAccessKey", {type: "password", required: true}),
    field("Session token (temporary keys only)", "sessionToken"),
    field("Region", "region", {value: credentials()?.region || "us-east-1", required: true}),
    h("button", {class: "primary", type: "submit", "data-testid": "sign-in-submit"}, "Sign in"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const given = Object.fromEntries(new FormData(form));
    if (!given.sessionToken) delete given.sessionToken;
    signIn(given);
    showWho();
    route();
  });
  main.replaceChildren(h("h1", {}, "Sign in"),
    h("p", {}, "This server takes only signed requests (", h("code", {}, "--auth sigv4"), "). Sign in with an ",
      "access key of its accounts file: the page signs each request with it, and keeps it in this tab only."),
    canSign() ? form : h("p", {class: "invalid"}, "This browser cannot sign requests on a page served over plain "
      + "HTTP from another host: open the console on localhost, or serve it over HTTPS."));
  if (credentials()) showError(refusal);
}

function showWho() {
  const who = document.getElementById("who");
  const given = credentials();
  who.hidden = !given;
  if (given) {
    who.replaceChildren(`${given.accessKeyId} (${given.region}) `, h("a", {href: "#/", "data-testid": "sign-out",
      onclick: () => {
        signOut();
        showWho();
        route();
      }}, "Sign out"));
  }
}

// -- the router

async function route() {
  leave();
  leave = () => {};
  showError(null);
  dialog.open && dialog.close();
  const [page, ...rest] = location.hash.replace(/^#\/?/, "").split("/");
  const arg = decodeURIComponent(rest.join("/"));
  for (const anchor of document.querySelectorAll("[data-nav]")) {
    anchor.classList.toggle("current", anchor.dataset.nav === (["activities", "cluster"].includes(page) ? page
      : "machines"));
  }
  try {
    if (page === "state-machine") await machinePage(arg);
    else if (page === "execution") await executionPage(arg);
    else if (page === "express") await executionPage(arg, true);
    else if (page === "map-run") await mapRunPage(arg);
    else if (page === "activities") await activitiesPage();
    else if (page === "cluster") await clusterPage();
    else if (page === "") await machinesPage();
    else main.replaceChildren(h("h1", {}, "No such page"), h("p", {}, link("", "State machines")));
  } catch (error) {
    if (error instanceof ApiError && error.needsSignIn) {
      signInPage(error);
      return;
    }
    main.replaceChildren(h("p", {class: "muted"}, "This page could not be shown."));
    showError(error);
  }
}

window.addEventListener("hashchange", route);
showWho();
route();
