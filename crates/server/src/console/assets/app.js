// The console's pages, chosen by the URL fragment (#/handles, #/record/H,
// #/new, #/search, #/status): links, back button and bookmarks work, and no
// page needs the server to know about it.

import { session, whenExpired, forgetSession } from './api.js';
import { signIn, signOut } from './auth.js';
import { readPrivateKey } from './keys.js';
import { h, field, page, say, unsay, sayPending } from './dom.js';
import { prefixesPage, listPage, searchPage } from './handles.js';
import { recordPage, newHandlePage } from './record.js';
import { statusPage } from './status.js';

function signInPage(note) {
  const id = h('input', { type: 'text', name: 'identity', autocomplete: 'username', required: true, value: '300:' });
  const secretChoice = h('input', { type: 'radio', name: 'method', value: 'secret', checked: true });
  const keyChoice = h('input', { type: 'radio', name: 'method', value: 'key' });
  const secret = h('input', { type: 'password', name: 'secret', autocomplete: 'current-password' });
  const keyFile = h('input', { type: 'file', name: 'keyfile', accept: '.pem,.der,.key,.bin,.pk8,.json' });
  const passphrase = h('input', { type: 'password', name: 'passphrase', autocomplete: 'off' });
  const secretField = field('Secret key', secret);
  const keyField = field(
    'Private key file',
    keyFile,
    'RSA, as PKCS#8 (PEM or DER), PKCS#1 PEM, a Handle.Net privkey.bin, or the credentials ' +
      'JSON that handled serve writes. The key stays in this browser: only a signature is sent.',
  );
  const passphraseField = field('Key file passphrase', passphrase, 'Only for a passphrase-encrypted Handle.Net key file.');
  keyField.hidden = true;
  passphraseField.hidden = true;
  const chooseMethod = () => {
    secretField.hidden = !secretChoice.checked;
    keyField.hidden = !keyChoice.checked;
    passphraseField.hidden = !keyChoice.checked;
  };
  secretChoice.addEventListener('change', chooseMethod);
  keyChoice.addEventListener('change', chooseMethod);
  const button = h('button', { type: 'submit' }, 'Sign in');
  const form = h(
    'form',
    { class: 'card narrow', 'aria-label': 'Sign in' },
    field('Admin identity (index:handle)', id, 'For example 300:TEST/ADMIN (secret key) or 301:TEST/ADMIN (key file).'),
    h(
      'fieldset',
      {},
      h('legend', {}, 'Prove it with'),
      h('label', { class: 'inline' }, secretChoice, ' a secret key'),
      h('label', { class: 'inline' }, keyChoice, ' a private key file'),
    ),
    secretField,
    keyField,
    passphraseField,
    h('div', { class: 'actions' }, button),
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    button.disabled = true;
    say('Signing in…', 'info');
    try {
      let credential;
      let identity = id.value.trim();
      if (secretChoice.checked) {
        credential = { secret: secret.value };
      } else {
        const file = keyFile.files[0];
        if (!file) throw new Error('Choose a private key file.');
        const read = await readPrivateKey(new Uint8Array(await file.arrayBuffer()), passphrase.value);
        credential = { key: read.key };
        if (read.id && (identity === '' || identity === '300:')) identity = read.id;
      }
      if (!/^\d+:.+\/.+$/.test(identity)) throw new Error('The identity is index:handle, e.g. 300:TEST/ADMIN.');
      await signIn(identity, credential);
      secret.value = '';
      passphrase.value = '';
      keyFile.value = '';
      unsay();
      showNav();
      if (location.hash === '#/handles') route();
      else location.hash = '#/handles';
    } catch (e) {
      secret.value = '';
      passphrase.value = '';
      say(`Sign-in refused: ${e.message}`);
    } finally {
      button.disabled = false;
    }
  });
  page('Sign in', note ? h('p', { class: 'note' }, note) : null, form);
  id.focus();
}

function showNav() {
  const s = session();
  document.getElementById('nav').hidden = !s;
  document.getElementById('whoami').textContent = s ? s.id : '';
  for (const a of document.querySelectorAll('#nav a')) {
    const here = location.hash.startsWith(a.getAttribute('href'));
    if (here) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
}

/** `#/name/rest?query` → [name, rest, URLSearchParams]. */
function parseHash() {
  const raw = location.hash.replace(/^#\/?/, '');
  const [path, query] = raw.split('?', 2);
  const slash = path.indexOf('/');
  const name = slash < 0 ? path : path.slice(0, slash);
  const rest = slash < 0 ? '' : decodeURIComponent(path.slice(slash + 1));
  return [name, rest, new URLSearchParams(query || '')];
}

async function route() {
  showNav();
  if (!session()) {
    signInPage();
    return;
  }
  const [name, rest, query] = parseHash();
  try {
    if (name === 'handles' && rest) await listPage(rest, query);
    else if (name === 'record' && rest) await recordPage(rest);
    else if (name === 'new') await newHandlePage(query);
    else if (name === 'search') await searchPage(query);
    else if (name === 'status') await statusPage();
    else await prefixesPage();
    // Screen readers hear the new page's heading.
    document.querySelector('#main h1')?.focus({ preventScroll: true });
    sayPending();
  } catch (e) {
    if (session()) say(e.message);
  }
}

whenExpired(() => {
  forgetSession();
  showNav();
  signInPage('Your session ended (expired, or the server restarted). Sign in again.');
});

document.getElementById('signout').addEventListener('click', async () => {
  await signOut();
  unsay();
  location.hash = '';
  route();
});
// A nav link to the page already shown reloads it (no hashchange fires).
for (const a of document.querySelectorAll('#nav a')) {
  a.addEventListener('click', () => {
    if (location.hash === a.getAttribute('href')) {
      unsay();
      route();
    }
  });
}
window.addEventListener('hashchange', () => {
  unsay();
  route();
});
route();
