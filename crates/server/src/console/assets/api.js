// The JSON API, called with the session in an Authorization header (never a
// cookie: a foreign page cannot make the browser send it). The session id is
// kept in memory and in sessionStorage (this tab only, gone when it closes);
// keys and secrets are never stored.

const KEY = 'handled.console.session';

let current = null;
try {
  current = JSON.parse(sessionStorage.getItem(KEY) || 'null');
} catch {
  current = null;
}

/** {sessionId, id} of the signed-in admin, or null. */
export function session() {
  return current;
}

export function setSession(sessionId, id) {
  current = { sessionId, id };
  sessionStorage.setItem(KEY, JSON.stringify(current));
}

export function forgetSession() {
  current = null;
  sessionStorage.removeItem(KEY);
}

const CODES = {
  2: 'the server failed',
  3: 'the server is too busy; try again shortly',
  4: 'the request was not understood',
  5: 'this server does not do that',
  100: 'no such handle',
  101: 'the handle already exists',
  102: 'that is not a valid handle',
  200: 'no such value',
  201: 'a value with that index already exists',
  202: 'the value is not valid',
  301: 'this server is not responsible for that prefix',
  400: 'that identity is not an administrator for it',
  401: 'the signed-in identity may not do that',
  402: 'signing in is needed',
  403: 'signing in failed',
  404: 'the credential is not valid',
};

/** An error from the API, with a sentence for people. */
export class ApiError extends Error {
  constructor(status, body, text) {
    super(describe(status, body, text));
    this.status = status;
    this.body = body;
  }
}

function describe(status, body, text) {
  const code = body && typeof body.responseCode === 'number' ? body.responseCode : null;
  const detail = body && (body.message || body.error);
  const meaning = code !== null && CODES[code] ? CODES[code] : null;
  const parts = [];
  if (meaning) parts.push(meaning[0].toUpperCase() + meaning.slice(1));
  if (detail && detail !== meaning) parts.push(detail);
  if (!parts.length) parts.push(text ? text.slice(0, 200) : `The server answered HTTP ${status}`);
  let sentence = parts.join(': ');
  if (!/[.!?]$/.test(sentence)) sentence += '.';
  return `${sentence} (HTTP ${status}${code !== null ? `, code ${code}` : ''})`;
}

/** Called when the server no longer knows the session (401): sign in again. */
let onExpired = () => {};
export function whenExpired(f) {
  onExpired = f;
}

/**
 * One API call. `body` is sent as JSON; `authorization` overrides the session
 * header; answers are parsed as JSON (or returned as text with `text: true`).
 */
export async function call(method, url, { body, authorization, text = false } = {}) {
  // X-Requested-With keeps the server from offering Basic (no browser login box).
  const headers = { Accept: 'application/json', 'X-Requested-With': 'XMLHttpRequest' };
  if (authorization) headers.Authorization = authorization;
  else if (current) headers.Authorization = `Handle sessionId="${current.sessionId}"`;
  let payload;
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    payload = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(url, { method, headers, body: payload, cache: 'no-store', credentials: 'omit' });
  } catch (e) {
    throw new ApiError(0, null, `The server could not be reached (${e.message})`);
  }
  const raw = await response.text();
  if (text && response.ok) return raw;
  let data = null;
  try {
    data = raw ? JSON.parse(raw) : null;
  } catch {
    data = null;
  }
  if (!response.ok) {
    const error = new ApiError(response.status, data, raw);
    if (response.status === 401 && current && !authorization) onExpired(error);
    throw error;
  }
  return data;
}

/** Percent-encode a handle for a URL path, keeping its slashes readable. */
export function handlePath(handle) {
  return handle.split('/').map(encodeURIComponent).join('/');
}

/**
 * The prefixes (without `0.NA/`) the signed-in identity administers: every
 * homed prefix for a server administrator, its own for a prefix administrator
 * (`<prefix>/ADMIN` unless `server_admins` is configured); others are refused.
 */
export async function administeredPrefixes() {
  const answer = await call('GET', '/api/prefixes');
  return (answer.prefixes || []).map((p) => p.replace(/^0\.NA\//i, ''));
}
