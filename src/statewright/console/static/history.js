// What an execution's history says of each state: its runs (entered, exited, input, output), the attempts of a
// Task within each run (retries with their timings), and a status per state for the graph. Pure: events in, data out.

const ATTEMPT_STARTS = new Set(["TaskScheduled", "LambdaFunctionScheduled", "ActivityScheduled"]);
const ATTEMPT_ENDS = {
  TaskSucceeded: "succeeded", LambdaFunctionSucceeded: "succeeded", ActivitySucceeded: "succeeded",
  TaskFailed: "failed", TaskTimedOut: "failed", TaskStartFailed: "failed", TaskSubmitFailed: "failed",
  LambdaFunctionFailed: "failed", LambdaFunctionTimedOut: "failed", LambdaFunctionStartFailed: "failed",
  LambdaFunctionScheduleFailed: "failed", ActivityFailed: "failed", ActivityTimedOut: "failed",
  ActivityScheduleFailed: "failed",
};
const STATE_FAILURES = new Set(["MapStateFailed", "ParallelStateFailed", "MapRunFailed"]);
const ENDINGS = new Set(["ExecutionAborted", "ExecutionFailed", "ExecutionTimedOut"]);
// Events named "...Started" that are not an attempt's start
const NOT_ATTEMPTS = /^(Execution|Map|Parallel|MapRun|MapIteration)/;
// Of several runs of one state (Map iterations), the status the graph shows: the first of these any run has.
const PRECEDENCE = ["running", "failed", "caught", "aborted", "succeeded"];

function details(event) {
  for (const [key, value] of Object.entries(event)) {
    if (key.endsWith("EventDetails") && value && typeof value === "object") return value;
  }
  return {};
}

// ``resourceOf(stateName)``: a Task state's Resource (its attempts' events name it, which is how attempts of Tasks
// running at once in Parallel branches are told apart).
export function runsOf(events, execution, resourceOf = () => null) {
  const runs = [];
  const open = new Map(); // state name -> its open runs, oldest first
  let attempts = []; // attempts not ended yet, oldest first
  events.forEach((event, index) => {
    const type = event.type;
    const eventDetails = details(event);
    if (type.endsWith("StateEntered")) {
      const {name, input} = event.stateEnteredEventDetails || {};
      const run = {name, type: type.slice(0, -"StateEntered".length), entered: event.timestamp, enteredId: event.id,
                   exited: null, ended: null, endedBy: null, input, output: null, attempts: [], error: null,
                   cause: null};
      runs.push(run);
      if (!open.has(name)) open.set(name, []);
      open.get(name).push(run);
    } else if (type.endsWith("StateExited")) {
      const {name, output} = event.stateExitedEventDetails || {};
      const run = (open.get(name) || []).shift();
      if (run) {
        run.exited = event.timestamp;
        run.output = output;
      }
    } else if (ENDINGS.has(type)) {
      // The execution ended (stopped, failed, timed out): every run still open ended with it; a redrive that
      // follows enters its states afresh.
      for (const run of [...open.values()].flat()) Object.assign(run, {ended: event.timestamp, endedBy: type});
      open.clear();
      attempts = [];
    } else if (ATTEMPT_STARTS.has(type)) {
      const run = taskRun(open, eventDetails, resourceOf);
      if (run) {
        const attempt = {scheduled: event.timestamp, started: null, ended: null, outcome: null, error: null,
                         cause: null, run};
        run.attempts.push(attempt);
        attempts.push(attempt);
      }
    } else if (type in ATTEMPT_ENDS || (type.endsWith("Started") && !NOT_ATTEMPTS.test(type))) {
      const attempt = attemptOf(attempts, event, eventDetails, events[index + 1], resourceOf,
                                type in ATTEMPT_ENDS ? () => true : (candidate) => !candidate.started);
      if (!attempt) return;
      if (!(type in ATTEMPT_ENDS)) {
        attempt.started = event.timestamp;
        return;
      }
      attempts.splice(attempts.indexOf(attempt), 1);
      attempt.ended = event.timestamp;
      attempt.outcome = ATTEMPT_ENDS[type];
      if (attempt.outcome === "failed") {
        Object.assign(attempt, {error: eventDetails.error ?? null, cause: eventDetails.cause ?? null});
      }
    } else if (STATE_FAILURES.has(type)) {
      const run = lastOpen(open, type.startsWith("Parallel") ? "Parallel" : "Map");
      if (run) Object.assign(run, {error: eventDetails.error ?? run.error, cause: eventDetails.cause ?? run.cause,
                                   failed: true});
    }
  });
  const closed = execution.status !== "RUNNING";
  for (const run of runs) run.status = statusOf(run, execution.status, closed);
  return runs;
}

// The open Task run an attempt's scheduling belongs to: the newest whose Resource the event names (the newest
// open Task run when it names none that matches).
function taskRun(open, eventDetails, resourceOf) {
  const named = eventDetails.resourceType ? `${eventDetails.resourceType}:${eventDetails.resource}`
    : eventDetails.resource;
  const tasks = [...open.values()].flat().filter((run) => run.type === "Task").sort((a, b) => b.enteredId - a.enteredId);
  return tasks.find((run) => named && sameResource(resourceOf(run.name), named)) || tasks[0] || null;
}

function sameResource(stateResource, named) {
  return Boolean(stateResource) && (stateResource === named || stateResource.endsWith(`:::${named}`)
    || stateResource.startsWith(`${named}:`) || stateResource.startsWith(`arn:aws:states:::${named}.`));
}

// The attempt an event of an attempt belongs to, among those ``wanted`` accepts: the one whose Resource the event
// names; else the one whose state the next event exits (a success is followed by its state's exit); else the oldest.
function attemptOf(attempts, event, eventDetails, next, resourceOf, wanted) {
  const candidates = attempts.filter(wanted);
  if (candidates.length <= 1) return candidates[0] || null;
  const named = eventDetails.resourceType ? `${eventDetails.resourceType}:${eventDetails.resource}` : null;
  const byResource = named && candidates.filter((attempt) => sameResource(resourceOf(attempt.run.name), named));
  if (byResource && byResource.length) return byResource[0];
  const exiting = next && next.type.endsWith("StateExited") && next.stateExitedEventDetails?.name;
  return candidates.find((attempt) => attempt.run.name === exiting) || candidates[0];
}

function lastOpen(open, type) {
  let latest = null;
  for (const runs of open.values()) {
    for (const run of runs) {
      if (run.type === type && (!latest || run.enteredId > latest.enteredId)) latest = run;
    }
  }
  return latest;
}

function statusOf(run, executionStatus, closed) {
  const last = run.attempts.at(-1);
  const erred = run.failed || (last && last.outcome === "failed");
  if (run.exited !== null) return erred ? "caught" : "succeeded";
  if (run.endedBy === "ExecutionAborted") return "aborted";
  if (run.endedBy) return "failed";
  if (!closed) return erred ? "caught" : "running";
  if (executionStatus === "SUCCEEDED") return erred ? "caught" : "succeeded";
  if (executionStatus === "ABORTED" && !erred) return "aborted";
  return "failed";
}

// Each state's status over all its runs (a state never entered has none).
export function statusByState(runs) {
  const byName = new Map();
  for (const run of runs) {
    const known = byName.get(run.name);
    if (!known || PRECEDENCE.indexOf(run.status) < PRECEDENCE.indexOf(known)) byName.set(run.name, run.status);
  }
  return byName;
}
