// One handle record: its values, editing them one at a time, adding and
// removing values, deleting the handle; and creating a new handle.

import { administeredPrefixes, call, handlePath } from './api.js';
import { h, field, page, say, sayNext } from './dom.js';
import { describeData, valueForm } from './values.js';

function permissionsText(p) {
  const bits = p || '1110';
  const who = [];
  if (bits[2] === '1') who.push('public read');
  if (bits[3] === '1') who.push('public write');
  if (bits[0] === '1') who.push('admin read');
  if (bits[1] === '1') who.push('admin write');
  return who.join(', ') || 'nobody';
}

/** A button that asks again in place before doing something that cannot be undone. */
function confirmButton(text, question, action) {
  const wrap = h('span', { class: 'confirm' });
  const first = h('button', { type: 'button', class: 'danger' }, text);
  const reset = () => wrap.replaceChildren(first);
  first.addEventListener('click', () => {
    const yes = h('button', { type: 'button', class: 'danger' }, `Yes, ${text.toLowerCase()}`);
    const no = h('button', { type: 'button', class: 'secondary' }, 'No, keep it');
    yes.addEventListener('click', action);
    no.addEventListener('click', () => {
      reset();
      first.focus();
    });
    wrap.replaceChildren(h('span', { role: 'alert' }, question), ' ', yes, ' ', no);
    no.focus();
  });
  reset();
  return wrap;
}

export async function recordPage(handle) {
  const path = `/api/handles/${handlePath(handle)}`;
  const record = await call('GET', `${path}?publicOnly=false`);
  const values = (record.values || []).slice().sort((a, b) => a.index - b.index);
  const used = values.map((v) => v.index);
  const editorSlot = h('div', { class: 'editor' });
  const reload = async (message) => {
    await recordPage(handle);
    if (message) say(message, 'info');
  };

  const putValue = async (value, oldIndex) => {
    const moved = oldIndex !== null && oldIndex !== value.index;
    // Same index: replace it; a new index must not overwrite another value.
    const overwrite = oldIndex !== null && !moved;
    await call('PUT', `${path}?index=${value.index}&overwrite=${overwrite}`, { body: [value] });
    if (moved) await call('DELETE', `${path}?index=${oldIndex}`);
    await reload(`Saved value ${value.index} of ${handle}.`);
  };
  const openEditor = (value, opener) => {
    const form = valueForm(value, {
      usedIndexes: used,
      submitText: value ? `Save value ${value.index}` : 'Add value',
      onSave: putValue,
      onCancel: () => {
        editorSlot.replaceChildren();
        opener.focus();
      },
    });
    editorSlot.replaceChildren(h('h2', {}, value ? `Edit value ${value.index} (${value.type})` : 'Add a value'), form);
    form.querySelector('input, select, textarea').focus();
  };

  const rows = values.map((v) => {
    const edit = h('button', { type: 'button', 'aria-label': `Edit value ${v.index} (${v.type})` }, 'Edit');
    edit.addEventListener('click', () => openEditor(v, edit));
    const remove = confirmButton('Remove', `Remove value ${v.index}?`, async () => {
      try {
        await call('DELETE', `${path}?index=${v.index}`);
        await reload(`Removed value ${v.index} of ${handle}.`);
      } catch (e) {
        say(e.message);
      }
    });
    return h(
      'tr',
      {},
      h('td', { 'data-label': 'Index' }, String(v.index)),
      h('td', { 'data-label': 'Type' }, v.type),
      h('td', { 'data-label': 'Data', class: 'data-cell' }, describeData(v)),
      h('td', { 'data-label': 'TTL' }, typeof v.ttl === 'number' ? `${v.ttl} s` : `until ${v.ttl}`),
      h('td', { 'data-label': 'Access' }, permissionsText(v.permissions)),
      h('td', { 'data-label': 'Changed' }, v.timestamp || ''),
      h('td', { class: 'row-actions' }, edit, ' ', remove),
    );
  });
  const add = h('button', { type: 'button' }, 'Add a value');
  add.addEventListener('click', () => openEditor(null, add));
  const deleteHandle = confirmButton('Delete handle', `Delete ${handle} and all its values?`, async () => {
    try {
      await call('DELETE', path);
      const prefix = handle.split('/')[0];
      sayNext(`Deleted ${handle}.`);
      location.hash = `#/handles/${encodeURIComponent(prefix)}`;
    } catch (e) {
      say(e.message);
    }
  });
  page(
    handle,
    h(
      'table',
      { class: 'values' },
      h('caption', {}, `${values.length} value${values.length === 1 ? '' : 's'}`),
      h('thead', {}, h('tr', {}, ['Index', 'Type', 'Data', 'TTL', 'Access', 'Changed'].map((c) => h('th', { scope: 'col' }, c)), h('th', { scope: 'col' }, h('span', { class: 'visually-hidden' }, 'Actions')))),
      h('tbody', {}, rows),
    ),
    h('div', { class: 'actions' }, add, ' ', deleteHandle),
    editorSlot,
  );
}

export async function newHandlePage(query) {
  const prefixes = await administeredPrefixes();
  const prefix = h('select', { name: 'prefix' }, prefixes.map((p) => h('option', { value: p }, p)));
  if (query.get('prefix') && prefixes.includes(query.get('prefix'))) prefix.value = query.get('prefix');
  const suffix = h('input', { type: 'text', name: 'suffix' });
  const mint = h('input', { type: 'checkbox', name: 'mint' });
  const suffixField = field('Suffix', suffix);
  mint.addEventListener('change', () => {
    suffixField.hidden = mint.checked;
  });
  const create = h('button', { type: 'button' }, 'Create handle');
  let submit = async () => {};
  const url = valueForm(
    { index: 1, type: 'URL', data: { format: 'string', value: '' }, ttl: 86400 },
    { onSave: () => submit(), submitText: '' },
  );
  const admin = valueForm(
    { index: 100, type: 'HS_ADMIN', data: { format: 'admin', value: { handle: `${prefix.value}/ADMIN`, index: 300, permissions: '111111111111' } }, ttl: 86400 },
    { onSave: () => submit(), submitText: '' },
  );
  // One button for the whole page (forms cannot nest); Enter in any field also creates.
  for (const f of [url, admin]) f.querySelector('.actions').remove();
  const withUrl = h('input', { type: 'checkbox', name: 'with-url', checked: true });
  withUrl.addEventListener('change', () => {
    url.hidden = !withUrl.checked;
  });
  submit = async () => {
    create.disabled = true;
    try {
      if (!mint.checked && !suffix.value.trim()) throw new Error('Give a suffix, or let the server mint one.');
      const values = [];
      if (withUrl.checked) values.push(await url.read());
      values.push(await admin.read());
      const name = `${prefix.value}/${mint.checked ? '' : suffix.value.trim()}`;
      const q = mint.checked ? 'mintNewSuffix=true' : 'overwrite=false';
      const done = await call('PUT', `/api/handles/${handlePath(name)}?${q}`, { body: { values } });
      sayNext(`Created ${done.handle}.`);
      location.hash = `#/record/${encodeURIComponent(done.handle)}`;
    } catch (e) {
      say(e.message);
    } finally {
      create.disabled = false;
    }
  };
  create.addEventListener('click', () => submit());
  const form = h(
    'form',
    { class: 'card', 'aria-label': 'Handle name' },
    h('div', { class: 'row' }, field('Prefix', prefix), suffixField),
    h('label', { class: 'check' }, mint, ' Mint a new suffix (the server picks a unique one)'),
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    submit();
  });
  page(
    'New handle',
    form,
    h('h2', {}, 'Its first values'),
    h('label', { class: 'check' }, withUrl, ' With a URL value'),
    url,
    h('p', { class: 'hint' }, 'An HS_ADMIN value says who may change the handle later.'),
    admin,
    h('div', { class: 'actions' }, create),
  );
}
