// Signature Version 4 for a server started with --auth sigv4: the page signs every request it makes with the key
// the user signed in with, as an SDK would, using the browser's Web Crypto (SHA-256, HMAC-SHA256). The key lives
// in this tab's sessionStorage only, and is forgotten when the tab closes or the user signs out.

const STORED = "statewright.credentials";
const SERVICE = "states";
const encoder = new TextEncoder();

// {accessKeyId, secretAccessKey, sessionToken, region} or null.
export function credentials() {
  try {
    return JSON.parse(sessionStorage.getItem(STORED));
  } catch {
    return null;
  }
}

export function signIn(given) {
  sessionStorage.setItem(STORED, JSON.stringify(given));
}

export function signOut() {
  sessionStorage.removeItem(STORED);
}

// Web Crypto exists only on https pages and on localhost: elsewhere the page cannot sign.
export function canSign() {
  return Boolean(globalThis.crypto && crypto.subtle);
}

function hex(bytes) {
  return [...new Uint8Array(bytes)].map((byte) => byte.toString(16).padStart(2, "0")).join("");
}

async function sha256(text) {
  return hex(await crypto.subtle.digest("SHA-256", encoder.encode(text)));
}

async function hmac(key, text) {
  const imported = await crypto.subtle.importKey("raw", typeof key === "string" ? encoder.encode(key) : key,
    {name: "HMAC", hash: "SHA-256"}, false, ["sign"]);
  return new Uint8Array(await crypto.subtle.sign("HMAC", imported, encoder.encode(text)));
}

// RFC 3986 encoding, as SigV4 encodes each segment of the path (once more over what the URL already encoded).
function encodeSegment(segment) {
  return encodeURIComponent(segment).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

// The query's pairs as they were sent, sorted by name, then value.
function canonicalQuery(query) {
  const pairs = query.split("&").filter(Boolean).map((pair) => {
    const at = pair.indexOf("=");
    return at < 0 ? [pair, ""] : [pair.slice(0, at), pair.slice(at + 1)];
  });
  pairs.sort(([a, x], [b, y]) => (a < b ? -1 : a > b ? 1 : x < y ? -1 : x > y ? 1 : 0));
  return pairs.map(([name, value]) => `${name}=${value}`).join("&");
}

// The headers that sign ``method`` ``url`` with ``body`` (a string): X-Amz-Date, the session token if any, and
// Authorization. ``headers`` are the request's own, all of them signed; the browser adds Host, signed as it sends it.
export async function signedHeaders(method, url, headers, body, given = credentials()) {
  const target = new URL(url, location.href);
  const amzDate = new Date().toISOString().replace(/[-:]|\.\d{3}/g, "");
  const day = amzDate.slice(0, 8);
  const added = {"x-amz-date": amzDate, ...(given.sessionToken ? {"x-amz-security-token": given.sessionToken} : {})};
  const signing = {host: target.host, ...added};
  for (const [name, value] of Object.entries(headers)) signing[name.toLowerCase()] = value;
  const names = Object.keys(signing).sort();
  const canonical = [
    method,
    target.pathname.split("/").map(encodeSegment).join("/"),
    canonicalQuery(target.search.slice(1)),
    names.map((name) => `${name}:${String(signing[name]).trim().replace(/\s+/g, " ")}\n`).join(""),
    names.join(";"),
    await sha256(body || ""),
  ].join("\n");
  const scope = `${day}/${given.region}/${SERVICE}/aws4_request`;
  const toSign = ["AWS4-HMAC-SHA256", amzDate, scope, await sha256(canonical)].join("\n");
  let key = await hmac(`AWS4${given.secretAccessKey}`, day);
  for (const part of [given.region, SERVICE, "aws4_request"]) key = await hmac(key, part);
  const signature = hex(await hmac(key, toSign));
  return {
    ...added,
    Authorization: `AWS4-HMAC-SHA256 Credential=${given.accessKeyId}/${scope}, SignedHeaders=${names.join(";")}, `
      + `Signature=${signature}`,
  };
}
