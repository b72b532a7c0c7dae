// Signing in through the /api/sessions challenge (Handle.Net v9): open a
// session, answer its nonce with HMAC-SHA256 of the secret key or an RSA
// signature made with the private key, then make sure the identity is a
// server administrator. Secrets and keys are used here and dropped.

import { administeredPrefixes, call, setSession, forgetSession, session } from './api.js';
import { b64encode, b64decode } from './dom.js';

function quoted(v) {
  return `"${String(v).replace(/["\\]/g, '\\$&')}"`;
}

/**
 * Sign in as `id` (`index:handle`) with {secret} or {key: CryptoKey}.
 * Resolves to the server's homed prefixes (proof of admin rights).
 */
export async function signIn(id, credential) {
  forgetSession();
  const opened = await call('POST', '/api/sessions');
  const nonce = b64decode(opened.nonce);
  const cnonce = crypto.getRandomValues(new Uint8Array(16));
  const signed = new Uint8Array(nonce.length + cnonce.length);
  signed.set(nonce);
  signed.set(cnonce, nonce.length);
  let type;
  let alg;
  let signature;
  if (credential.secret !== undefined) {
    const mac = await crypto.subtle.importKey(
      'raw',
      new TextEncoder().encode(credential.secret),
      { name: 'HMAC', hash: 'SHA-256' },
      false,
      ['sign'],
    );
    signature = await crypto.subtle.sign('HMAC', mac, signed);
    [type, alg] = ['HS_SECKEY', 'HMAC-SHA256'];
  } else {
    signature = await crypto.subtle.sign('RSASSA-PKCS1-v1_5', credential.key, signed);
    [type, alg] = ['HS_PUBKEY', 'SHA256'];
  }
  const header =
    `Handle version="0", sessionId=${quoted(opened.sessionId)}, id=${quoted(encodeURIComponent(id))}, ` +
    `type=${quoted(type)}, cnonce=${quoted(b64encode(cnonce))}, alg=${quoted(alg)}, ` +
    `signature=${quoted(b64encode(signature))}`;
  const proved = await call('PUT', '/api/sessions/this', { authorization: header });
  if (!proved || !proved.authenticated) throw new Error('The server did not accept the answer.');
  setSession(opened.sessionId, proved.id || id);
  try {
    return await administeredPrefixes();
  } catch (e) {
    await signOut();
    throw new Error(`${id} signed in, but may not administer this server. ${e.message}`);
  }
}

/** End the session on the server too. */
export async function signOut() {
  if (session()) {
    try {
      await call('DELETE', '/api/sessions/this');
    } catch {
      // Already gone on the server: forgetting it here is all that is left.
    }
  }
  forgetSession();
}
