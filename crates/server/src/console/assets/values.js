// One handle value: how it reads, and a form to edit it. The form builds the
// value JSON of the API (index, type, data {format, value}, ttl, permissions).

import { h, field, uid, b64decode } from './dom.js';
import { publicKeyJwk } from './keys.js';

/** HS_ADMIN permission bits, leftmost first as the API writes them. */
export const ADMIN_PERMISSIONS = [
  ['List handles', 'list the handles under the prefix'],
  ['Read values', 'read values that are not public'],
  ['Add admin', 'add HS_ADMIN values'],
  ['Remove admin', 'remove HS_ADMIN values'],
  ['Modify admin', 'change HS_ADMIN values'],
  ['Add value', 'add other values'],
  ['Remove value', 'remove other values'],
  ['Modify value', 'change other values'],
  ['Delete derived prefix', 'delete prefixes derived from this one'],
  ['Add derived prefix', 'create prefixes derived from this one'],
  ['Delete handle', 'delete the handle'],
  ['Add handle', 'create handles (on a prefix handle: under the prefix)'],
];

const VALUE_PERMISSIONS = [
  ['Admin read', 'administrators can read it'],
  ['Admin write', 'administrators can change it'],
  ['Public read', 'anyone can read it'],
  ['Public write', 'anyone can change it (rarely wise)'],
];

export const KNOWN_TYPES = ['URL', 'EMAIL', 'HS_ADMIN', 'HS_VLIST', 'HS_PUBKEY', '10320/loc', 'DESC', 'HS_SECKEY'];

/** Short readable text of a value's data. */
/** Bits of a JWK base64url integer (leading zero bytes not counted). */
function jwkBits(text) {
  const bytes = b64decode(text);
  let i = 0;
  while (i < bytes.length && bytes[i] === 0) i += 1;
  return (bytes.length - i) * 8;
}

export function describeData(v) {
  const d = v.data;
  // Secrets are not shown, even to administrators who may read them.
  if (v.type === 'HS_SECKEY') return 'secret key (hidden)';
  if (!d || typeof d !== 'object') return String(d ?? '');
  switch (d.format) {
    case 'admin': {
      const granted = ADMIN_PERMISSIONS.filter((_, i) => d.value.permissions[i] === '1').map(([n]) => n);
      return `${d.value.index}:${d.value.handle} may ${granted.length === 12 ? 'do everything' : granted.join(', ').toLowerCase() || 'do nothing'}`;
    }
    case 'vlist':
      return d.value.map((r) => `${r.index}:${r.handle}`).join(', ');
    case 'key':
      return `${d.value.kty || 'key'} public key${d.value.n ? ` (${jwkBits(d.value.n)} bits)` : ''}`;
    case 'site':
      return 'site information';
    default:
      return typeof d.value === 'string' ? d.value : JSON.stringify(d.value);
  }
}

function checkboxes(legend, items, bits) {
  const boxes = items.map(([name, meaning], i) => {
    const box = h('input', { type: 'checkbox', name: name.toLowerCase().replace(/ /g, '-'), checked: bits[i] === '1' });
    return { box, row: h('label', { class: 'check' }, box, ` ${name}`, h('span', { class: 'meaning' }, ` — ${meaning}`)) };
  });
  const set = h('fieldset', { class: 'checks' }, h('legend', {}, legend), boxes.map((b) => b.row));
  return { set, bits: () => boxes.map((b) => (b.box.checked ? '1' : '0')).join('') };
}

/** `<locations><location href=.. weight=.. view=../></locations>` rows. */
function locationEditor(xml) {
  const rows = h('div', { class: 'loc-rows' });
  const addRow = (loc = {}) => {
    const href = h('input', { type: 'url', name: 'href', value: loc.href || '', required: true });
    const weight = h('input', { type: 'number', name: 'weight', min: '0', max: '1', step: '0.1', value: loc.weight ?? '1' });
    const view = h('input', { type: 'text', name: 'view', value: loc.view || '' });
    const row = h('fieldset', { class: 'loc' }, h('legend', {}, 'Location'), field('Address (href)', href), field('Weight (0–1)', weight), field('View (optional)', view));
    const remove = h('button', { type: 'button', class: 'secondary' }, 'Remove this location');
    remove.addEventListener('click', () => row.remove());
    row.append(remove);
    row.read = () => ({ href: href.value.trim(), weight: weight.value.trim(), view: view.value.trim() });
    rows.append(row);
    return href;
  };
  if (xml) {
    const doc = new DOMParser().parseFromString(xml, 'application/xml');
    for (const l of doc.querySelectorAll('location')) {
      addRow({ href: l.getAttribute('href'), weight: l.getAttribute('weight') ?? '1', view: l.getAttribute('view') });
    }
  }
  if (!rows.children.length) addRow();
  const add = h('button', { type: 'button', class: 'secondary' }, 'Add a location');
  add.addEventListener('click', () => addRow().focus());
  return {
    el: h('div', {}, rows, add),
    data: () => {
      const doc = document.implementation.createDocument(null, 'locations');
      let id = 0;
      for (const row of rows.children) {
        const l = row.read();
        if (!l.href) continue;
        const el = doc.createElement('location');
        el.setAttribute('id', String(id));
        id += 1;
        el.setAttribute('href', l.href);
        el.setAttribute('weight', l.weight || '1');
        if (l.view) el.setAttribute('view', l.view);
        doc.documentElement.append(el);
      }
      if (!id) throw new Error('A 10320/loc value needs at least one location address.');
      return { format: 'string', value: new XMLSerializer().serializeToString(doc) };
    },
  };
}

/** The data part of the form for a type; `.data()` gives the API's data JSON (maybe async). */
function dataEditor(type, current) {
  const d = current && current.data && typeof current.data === 'object' ? current.data : null;
  if (type === 'HS_ADMIN') {
    const v = d && d.format === 'admin' ? d.value : { handle: '', index: 300, permissions: '111111111111' };
    const handle = h('input', { type: 'text', name: 'admin-handle', value: v.handle, required: true });
    const index = h('input', { type: 'number', name: 'admin-index', value: String(v.index), required: true });
    const perms = checkboxes('What this administrator may do', ADMIN_PERMISSIONS, v.permissions);
    return {
      el: h('div', {}, field('Administrator handle', handle), field('Administrator index (0: any key of that handle)', index), perms.set),
      data: () => ({ format: 'admin', value: { handle: handle.value.trim(), index: parseInt(index.value, 10) || 0, permissions: perms.bits() } }),
    };
  }
  if (type === 'HS_VLIST') {
    const text = d && d.format === 'vlist' ? d.value.map((r) => `${r.index}:${r.handle}`).join('\n') : '';
    const area = h('textarea', { name: 'vlist', rows: '4', value: text });
    return {
      el: field('Members, one index:handle a line', area),
      data: () => ({
        format: 'vlist',
        value: area.value.split('\n').map((l) => l.trim()).filter(Boolean).map((l) => {
          const m = /^(\d+):(.+)$/.exec(l);
          if (!m) throw new Error(`“${l}” is not index:handle.`);
          return { index: parseInt(m[1], 10), handle: m[2] };
        }),
      }),
    };
  }
  if (type === 'HS_PUBKEY') {
    const text = d && d.format === 'key' ? JSON.stringify(d.value) : d && d.format === 'base64' ? d.value : '';
    const area = h('textarea', { name: 'pubkey', rows: '5', value: text });
    return {
      el: field('Public key', area, 'Paste a PEM public key (BEGIN PUBLIC KEY), a JWK, or base64 of Handle key data (pubkey.bin).'),
      data: async () => {
        const t = area.value.trim();
        if (t.startsWith('-----BEGIN')) return { format: 'key', value: await publicKeyJwk(t) };
        if (t.startsWith('{')) {
          try {
            return { format: 'key', value: JSON.parse(t) };
          } catch {
            throw new Error('The pasted JWK is not valid JSON.');
          }
        }
        return { format: 'base64', value: t.replace(/\s/g, '') };
      },
    };
  }
  if (type === '10320/loc') return locationEditor(d && d.format === 'string' ? d.value : '');
  if (type === 'HS_SECKEY') {
    const secret = h('input', { type: 'password', name: 'secret', autocomplete: 'new-password', required: true });
    return {
      el: field('Secret key', secret, 'Shown to nobody; saving sets it anew.'),
      data: () => {
        if (!secret.value) throw new Error('Enter the secret key.');
        return { format: 'string', value: secret.value };
      },
    };
  }
  const format = h('select', { name: 'format' }, ['string', 'hex', 'base64'].map((f) => h('option', { value: f }, f)));
  const stringy = d && ['string', 'hex', 'base64'].includes(d.format);
  format.value = stringy ? d.format : 'string';
  const long = stringy && d.value.length > 80;
  const input = long
    ? h('textarea', { name: 'data', rows: '4', value: d.value })
    : h('input', { type: type === 'EMAIL' ? 'email' : type === 'URL' ? 'url' : 'text', name: 'data', value: stringy ? d.value : '' });
  const plain = type === 'URL' || type === 'EMAIL';
  return {
    el: h('div', {}, plain ? null : field('Data format', format), field(plain ? (type === 'URL' ? 'Address (URL)' : 'Email address') : 'Data', input)),
    data: () => {
      const value = input.value;
      if (format.value === 'hex' && !/^([0-9a-fA-F]{2})*$/.test(value.replace(/\s/g, ''))) throw new Error('Hex data needs pairs of hex digits.');
      return { format: plain ? 'string' : format.value, value };
    },
  };
}

/**
 * A form for one value. `current`: the value being edited (or null); `onSave(value, oldIndex)`.
 * The type select switches the data editor.
 */
export function valueForm(current, { onSave, onCancel, usedIndexes = [], submitText = 'Save value' }) {
  const currentType = current ? current.type : 'URL';
  const known = KNOWN_TYPES.includes(currentType);
  const type = h('select', { name: 'type' }, [...KNOWN_TYPES, 'other'].map((t) => h('option', { value: t }, t === 'other' ? 'other type…' : t)));
  type.value = known ? currentType : 'other';
  const otherType = h('input', { type: 'text', name: 'othertype', value: known ? '' : currentType });
  const otherField = field('Type name', otherType);
  otherField.hidden = type.value !== 'other';
  let next = 1;
  while (usedIndexes.includes(next)) next += 1;
  const index = h('input', { type: 'number', name: 'index', min: '1', required: true, value: String(current ? current.index : next) });
  const ttl = h('input', { type: 'number', name: 'ttl', value: String(current && typeof current.ttl === 'number' ? current.ttl : 86400) });
  const perms = checkboxes('Who may read and change it', VALUE_PERMISSIONS, current && current.permissions ? current.permissions : '1110');
  const slot = h('div', { class: 'data' });
  let editor = dataEditor(type.value === 'other' ? otherType.value : type.value, current);
  slot.append(editor.el);
  type.addEventListener('change', () => {
    otherField.hidden = type.value !== 'other';
    editor = dataEditor(type.value === 'other' ? otherType.value : type.value, null);
    slot.replaceChildren(editor.el);
    // Secret keys are for administrators' eyes only.
    if (type.value === 'HS_SECKEY') perms.set.querySelector('[name=public-read]').checked = false;
  });
  const error = h('p', { class: 'form-error', role: 'alert', id: uid('err') });
  const save = h('button', { type: 'submit' }, submitText);
  const cancel = h('button', { type: 'button', class: 'secondary' }, 'Cancel');
  cancel.addEventListener('click', () => onCancel && onCancel());
  const form = h(
    'form',
    { class: 'card value-form', 'aria-label': current ? `Edit value ${current.index}` : 'New value' },
    h('div', { class: 'row' }, field('Index', index), field('Type', type), otherField, field('TTL (seconds)', ttl)),
    slot,
    perms.set,
    error,
    h('div', { class: 'actions' }, save, onCancel ? cancel : null),
  );
  form.read = async () => {
    const t = type.value === 'other' ? otherType.value.trim() : type.value;
    if (!t) throw new Error('Name the value type.');
    const i = parseInt(index.value, 10);
    if (!Number.isInteger(i) || i < 1) throw new Error('The index is a whole number from 1.');
    const seconds = parseInt(ttl.value, 10);
    if (!Number.isInteger(seconds)) throw new Error('The TTL is a whole number of seconds.');
    // Five characters: the API (as Java's) reads admin read only from strings of 5+.
    return { index: i, type: t, data: await editor.data(), ttl: seconds, permissions: `0${perms.bits()}` };
  };
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    error.textContent = '';
    save.disabled = true;
    try {
      await onSave(await form.read(), current ? current.index : null);
    } catch (e) {
      error.textContent = e.message;
      error.focus?.();
    } finally {
      save.disabled = false;
    }
  });
  return form;
}
