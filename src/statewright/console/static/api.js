// The public AWS JSON API, called from the page as any SDK calls it (same origin). Unsigned, a call acts in the
// server's default region and account; once the user signed in (a server started with --auth sigv4), every call,
// view and stream is signed with that key (signing.js).

import {credentials, signedHeaders} from "./signing.js";

// The errors a server answers a request it does not admit: the page then asks the user to sign in.
export const SIGN_IN_ERRORS = new Set(["MissingAuthenticationTokenException", "UnrecognizedClientException",
  "InvalidSignatureException", "IncompleteSignatureException", "ExpiredTokenException"]);

export class ApiError extends Error {
  constructor(type, message, status) {
    super(`${type}: ${message}`);
    this.type = type;
    this.status = status;
  }

  get needsSignIn() {
    return SIGN_IN_ERRORS.has(this.type);
  }
}

let pending = 0;

function busy(delta) {
  pending += delta;
  document.getElementById("busy").hidden = pending === 0;
}

// ``fetch`` with the request signed when the user signed in.
async function send(method, url, headers = {}, body = undefined, signal = undefined) {
  const signed = credentials() ? await signedHeaders(method, url, headers, body) : {};
  return fetch(url, {method, headers: {...headers, ...signed}, body, signal});
}

async function answer(response) {
  const body = await response.json().catch(() => ({}));
  if (!response.ok) {
    const type = (body.__type || `HTTP ${response.status}`).split("#").pop();
    throw new ApiError(type, body.message || body.Message || response.statusText, response.status);
  }
  return body;
}

export async function call(operation, params = {}) {
  busy(1);
  try {
    return await answer(await send("POST", "/", {
      "Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": `AWSStepFunctions.${operation}`,
    }, JSON.stringify(params)));
  } finally {
    busy(-1);
  }
}

// Every page of a listing (at most ``cap`` items): its ``key``'s items in order.
export async function all(operation, params, key, cap = 10000) {
  const items = [];
  let nextToken;
  do {
    const page = await call(operation, {...params, ...(nextToken ? {nextToken} : {})});
    items.push(...(page[key] || []));
    nextToken = page.nextToken;
  } while (nextToken && items.length < cap);
  return items;
}

// The whole history, oldest first.
export async function history(executionArn) {
  return all("GetExecutionHistory", {executionArn, maxResults: 1000}, "events", 1e9);
}

// The events after ``afterId``, read newest first until a known one: a few calls however long the history.
export async function eventsAfter(executionArn, afterId) {
  const fresh = [];
  let nextToken;
  for (;;) {
    const page = await call("GetExecutionHistory",
      {executionArn, reverseOrder: true, maxResults: 100, ...(nextToken ? {nextToken} : {})});
    for (const event of page.events) {
      if (event.id <= afterId) return fresh.reverse();
      fresh.push(event);
    }
    nextToken = page.nextToken;
    if (!nextToken) return fresh.reverse();
  }
}

// One of the console's own views of this node (pages.py): what the public API has no call for.
export async function view(path) {
  busy(1);
  try {
    return await answer(await send("GET", path));
  } finally {
    busy(-1);
  }
}

// The server-sent events of ``path``: ``onEvent(name)`` for each, read with fetch (an EventSource cannot sign), and
// connected again 2 s after the stream ends or fails, until the returned function is called.
export function stream(path, onEvent) {
  let stopped = false;
  const stop = new AbortController();
  const run = async () => {
    while (!stopped) {
      try {
        const response = await send("GET", path, {Accept: "text/event-stream"}, undefined, stop.signal);
        if (!response.ok || !response.body) throw new Error(`HTTP ${response.status}`);
        const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
        let buffered = "";
        for (;;) {
          const {value, done} = await reader.read();
          if (done) break;
          buffered += value;
          let end;
          while ((end = buffered.indexOf("\n\n")) >= 0) {
            const name = buffered.slice(0, end).split("\n").find((line) => line.startsWith("event: "));
            buffered = buffered.slice(end + 2);
            if (name) onEvent(name.slice("event: ".length));
          }
        }
      } catch {
        // the server went away or refused: try again shortly
      }
      if (!stopped) await new Promise((resolve) => setTimeout(resolve, 2000));
    }
  };
  run();
  return () => {
    stopped = true;
    stop.abort();
  };
}
