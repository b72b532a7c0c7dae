// Reading a private key file in the browser (it never leaves it): PKCS#8
// (PEM or DER), PKCS#1 PEM, the credentials JSON `handled serve` writes, or
// a Handle.Net private key file (privkey.bin, as hdl-keygen writes it, plain
// or passphrase-encrypted). The key is imported as a non-extractable
// CryptoKey that can only sign.
//
// The Handle.Net layout is that of crates/proto/src/crypto/keyfile.rs (the
// server's and `handled import-config`'s reader); it is repeated here because
// the key must not leave the browser, and both are tested on the same files
// made by Handle.Net's hdl-keygen.

import { b64decode } from './dom.js';

const RSA = { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256' };
/** Handle.Net's encryption scheme word at the start of a private key file. */
const HDL_ENCRYPT_NONE = 1;
const HDL_ENCRYPT_PBKDF2_AES_CBC = 4;
/** More PBKDF2 work than this in a key file is refused (hdl-keygen writes 10 000). */
const HDL_MAX_ITERATIONS = 1000000;
const UNREADABLE =
  'This is not a key file the console reads: use an RSA key as PKCS#8 (PEM or DER), ' +
  'PKCS#1 PEM, or a Handle.Net private key file.';

/** {key: CryptoKey, id: identity the file names or null}; `passphrase` opens encrypted Handle.Net files. */
export async function readPrivateKey(bytes, passphrase = '') {
  const text = asText(bytes);
  if (text !== null && text.includes('-----BEGIN')) return { key: await fromPem(text), id: null };
  if (text !== null && text.trim().startsWith('{')) return fromCredentials(text);
  if (bytes[0] === 0x30) {
    // DER: PKCS#8, else PKCS#1.
    try {
      return { key: await importPkcs8(bytes), id: null };
    } catch {
      return { key: await importPkcs8(pkcs1ToPkcs8(bytes)), id: null };
    }
  }
  // Handle.Net files start with a small int: the encryption scheme.
  if (bytes.length > 8 && readInt(bytes, 0) <= 8) return { key: await fromHandleNet(bytes, passphrase), id: null };
  throw new Error(UNREADABLE);
}

function asText(bytes) {
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    return null;
  }
}

async function importPkcs8(der) {
  try {
    return await crypto.subtle.importKey('pkcs8', der, RSA, false, ['sign']);
  } catch {
    throw new Error(`${UNREADABLE} (WebCrypto refused the key; only RSA keys can sign here.)`);
  }
}

async function fromPem(text) {
  const m = /-----BEGIN ([A-Z0-9 ]+)-----([\s\S]*?)-----END \1-----/.exec(text);
  if (!m) throw new Error('The PEM file has no complete BEGIN/END key block.');
  const der = b64decode(m[2]);
  if (m[1] === 'PRIVATE KEY') return importPkcs8(der);
  if (m[1] === 'RSA PRIVATE KEY') return importPkcs8(pkcs1ToPkcs8(der));
  if (m[1] === 'ENCRYPTED PRIVATE KEY') {
    throw new Error('Encrypted keys cannot be read here; write a plain copy: openssl pkcs8 -in key.pem -out plain.pem');
  }
  throw new Error(`A PEM "${m[1]}" block is not a private key.`);
}

async function fromCredentials(text) {
  let j;
  try {
    j = JSON.parse(text);
  } catch {
    throw new Error(UNREADABLE);
  }
  const pk = j && j.public_key;
  if (!pk || typeof pk.private_key_pkcs8 !== 'string') throw new Error('The JSON file has no public_key.private_key_pkcs8.');
  const key = await importPkcs8(b64decode(pk.private_key_pkcs8));
  const id = typeof j.handle === 'string' && Number.isInteger(pk.index) ? `${pk.index}:${j.handle}` : null;
  return { key, id };
}

function readInt(bytes, at) {
  return ((bytes[at] << 24) | (bytes[at + 1] << 16) | (bytes[at + 2] << 8) | bytes[at + 3]) >>> 0;
}

/** Length-prefixed fields from `at` to the end. */
function readFields(bytes, at) {
  const fields = [];
  while (at + 4 <= bytes.length) {
    const len = readInt(bytes, at);
    if (at + 4 + len > bytes.length) throw new Error('The Handle.Net key file is truncated.');
    fields.push(bytes.subarray(at + 4, at + 4 + len));
    at += 4 + len;
  }
  return fields;
}

/** Handle.Net: int32 encryption scheme, then the key body (plain or encrypted). */
async function fromHandleNet(bytes, passphrase) {
  const scheme = readInt(bytes, 0);
  let body;
  if (scheme === HDL_ENCRYPT_NONE) body = bytes.subarray(4);
  else if (scheme === HDL_ENCRYPT_PBKDF2_AES_CBC) body = await decryptHandleNet(bytes, passphrase);
  else throw new Error(`Handle.Net key encryption ${scheme} is too old to read here; re-save the key with hdl-keyutil.`);
  const fields = readFields(body, 0);
  const kind = fields.length ? new TextDecoder().decode(fields[0]) : '';
  if (kind !== 'RSA_PRIVCRT_KEY' || fields.length < 9) {
    throw new Error(`Handle.Net keys of type ${kind || '(none)'} cannot sign here; only RSA keys with CRT parameters.`);
  }
  const [n, e, d, p, q, dp, dq, qi] = fields.slice(1, 9).map(base64url);
  const jwk = { kty: 'RSA', n, e, d, p, q, dp, dq, qi, alg: 'RS256', ext: false };
  try {
    return await crypto.subtle.importKey('jwk', jwk, RSA, false, ['sign']);
  } catch {
    throw new Error('The Handle.Net key file holds an RSA key WebCrypto refused.');
  }
}

/**
 * salt, int32 iterations, int32 key bits, iv, ciphertext: AES-CBC (PKCS#5)
 * keyed by PBKDF2-HMAC-SHA1 of the passphrase, whose UTF-8 bytes the Java
 * tools widen to characters and encode again.
 */
async function decryptHandleNet(bytes, passphrase) {
  if (!passphrase) throw new Error('This Handle.Net key file is encrypted: type its passphrase.');
  const truncated = () => new Error('The Handle.Net key file is truncated.');
  let at = 4;
  const int = () => {
    if (at + 4 > bytes.length) throw truncated();
    at += 4;
    return readInt(bytes, at - 4);
  };
  const take = () => {
    const len = int();
    if (at + len > bytes.length) throw truncated();
    at += len;
    return bytes.subarray(at - len, at);
  };
  const salt = take();
  const iterations = int();
  const keyBits = int();
  const iv = take();
  const ciphertext = take();
  if (iv.length !== 16 || ![128, 192, 256].includes(keyBits)) {
    throw new Error('The Handle.Net key file has encryption parameters the console cannot use.');
  }
  if (iterations < 1 || iterations > HDL_MAX_ITERATIONS) throw new Error(`The key file asks for ${iterations} PBKDF2 iterations.`);
  const utf8 = new TextEncoder().encode(passphrase);
  const widened = new TextEncoder().encode(String.fromCharCode(...utf8));
  const base = await crypto.subtle.importKey('raw', widened, 'PBKDF2', false, ['deriveBits']);
  const raw = await crypto.subtle.deriveBits({ name: 'PBKDF2', hash: 'SHA-1', salt, iterations }, base, keyBits);
  const aes = await crypto.subtle.importKey('raw', raw, 'AES-CBC', false, ['decrypt']);
  try {
    return new Uint8Array(await crypto.subtle.decrypt({ name: 'AES-CBC', iv }, aes, ciphertext));
  } catch {
    throw new Error('Wrong passphrase: the Handle.Net key file does not decrypt.');
  }
}

/** Unsigned big-endian integer bytes as JWK base64url (no leading zeros). */
function base64url(bytes) {
  let i = 0;
  while (i < bytes.length - 1 && bytes[i] === 0) i += 1;
  let s = '';
  for (const b of bytes.subarray(i)) s += String.fromCharCode(b);
  return btoa(s).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

function derLength(n) {
  if (n < 0x80) return [n];
  const out = [];
  for (let v = n; v > 0; v = Math.floor(v / 256)) out.unshift(v & 0xff);
  return [0x80 | out.length, ...out];
}

/** Wrap an RSAPrivateKey (PKCS#1) in a PKCS#8 PrivateKeyInfo. */
function pkcs1ToPkcs8(pkcs1) {
  const version = [0x02, 0x01, 0x00];
  const rsaAlgorithm = [0x30, 0x0d, 0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01, 0x05, 0x00];
  const octets = [0x04, ...derLength(pkcs1.length)];
  const inner = version.length + rsaAlgorithm.length + octets.length + pkcs1.length;
  const out = new Uint8Array([0x30, ...derLength(inner), ...version, ...rsaAlgorithm, ...octets, ...pkcs1]);
  return out;
}

/** An HS_PUBKEY pasted as PEM (SPKI) → JWK {kty,n,e} for the API. */
export async function publicKeyJwk(pem) {
  const m = /-----BEGIN PUBLIC KEY-----([\s\S]*?)-----END PUBLIC KEY-----/.exec(pem);
  if (!m) throw new Error('Paste a PEM public key (BEGIN PUBLIC KEY), a JWK, or base64 Handle key data.');
  let key;
  try {
    key = await crypto.subtle.importKey('spki', b64decode(m[1]), RSA, true, ['verify']);
  } catch {
    throw new Error('The PEM public key is not an RSA key the browser can read.');
  }
  const jwk = await crypto.subtle.exportKey('jwk', key);
  return { kty: 'RSA', n: jwk.n, e: jwk.e };
}
