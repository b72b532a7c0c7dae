// Browsing: the homed prefixes, a prefix's handles (paged, filtered), and
// search by value (reverse lookup, /hrls/handles).

import { administeredPrefixes, call } from './api.js';
import { h, field, page } from './dom.js';

const PAGE_SIZE = 50;

export function recordLink(handle) {
  return h('a', { href: `#/record/${encodeURIComponent(handle)}` }, handle);
}

export async function prefixesPage() {
  const prefixes = await administeredPrefixes();
  page(
    'Homed prefixes',
    h('p', {}, `You administer ${prefixes.length} prefix${prefixes.length === 1 ? '' : 'es'} of this server.`),
    h(
      'ul',
      { class: 'links' },
      prefixes.map((p) =>
        h(
          'li',
          {},
          h('a', { href: `#/handles/${encodeURIComponent(p)}` }, p),
          ' ',
          h('a', { class: 'secondary', href: `#/new?prefix=${encodeURIComponent(p)}` }, `New handle under ${p}`),
        ),
      ),
    ),
  );
}

function pager(base, pageNo, total, extra) {
  const last = Math.max(0, Math.ceil(total / PAGE_SIZE) - 1);
  const link = (n, text, rel) => {
    const q = new URLSearchParams(extra);
    q.set('page', String(n));
    return h('a', { href: `${base}?${q}`, rel }, text);
  };
  return h(
    'nav',
    { class: 'pager', 'aria-label': 'Pages' },
    pageNo > 0 ? link(pageNo - 1, '← Previous page', 'prev') : null,
    h('span', {}, `Page ${Math.min(pageNo, last) + 1} of ${last + 1}`),
    pageNo < last ? link(pageNo + 1, 'Next page →', 'next') : null,
  );
}

export async function listPage(prefix, query) {
  const pageNo = Math.max(0, parseInt(query.get('page') || '0', 10) || 0);
  const filter = (query.get('filter') || '').trim();
  const p = encodeURIComponent(prefix);
  let handles;
  let total;
  if (filter) {
    // The API lists without filtering: match the whole list here.
    const all = await call('GET', `/api/handles?prefix=${p}`);
    const needle = filter.toLowerCase();
    const matching = (all.handles || []).filter((x) => x.toLowerCase().includes(needle));
    total = matching.length;
    handles = matching.slice(pageNo * PAGE_SIZE, (pageNo + 1) * PAGE_SIZE);
  } else {
    const answer = await call('GET', `/api/handles?prefix=${p}&page=${pageNo}&pageSize=${PAGE_SIZE}`);
    total = parseInt(answer.totalCount, 10) || 0;
    handles = answer.handles || [];
  }
  const input = h('input', { type: 'search', name: 'filter', value: filter });
  const form = h(
    'form',
    { class: 'row', role: 'search' },
    field('Filter (part of the handle)', input),
    h('button', { type: 'submit' }, 'Filter'),
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const q = new URLSearchParams();
    if (input.value.trim()) q.set('filter', input.value.trim());
    location.hash = `#/handles/${p}${q.toString() ? `?${q}` : ''}`;
  });
  const first = total ? pageNo * PAGE_SIZE + 1 : 0;
  const base = `#/handles/${p}`;
  page(
    `Handles under ${prefix}`,
    h('p', {}, h('a', { href: `#/new?prefix=${p}` }, `New handle under ${prefix}`)),
    form,
    h(
      'p',
      { class: 'summary', role: 'status' },
      `${total} handle${total === 1 ? '' : 's'}${filter ? ` containing “${filter}”` : ''}` +
        (handles.length ? `, showing ${first}–${first + handles.length - 1}` : ''),
    ),
    h('ul', { class: 'links handles' }, handles.map((x) => h('li', {}, recordLink(x)))),
    total > PAGE_SIZE ? pager(base, pageNo, total, filter ? { filter } : {}) : null,
  );
}

const SEARCH_TYPES = ['URL', 'EMAIL', '10320/loc', 'DESC'];

export async function searchPage(query) {
  const type = h('select', { name: 'type' }, [...SEARCH_TYPES, 'other'].map((t) => h('option', { value: t }, t)));
  const other = h('input', { type: 'text', name: 'othertype', placeholder: 'e.g. CHECKSUM' });
  const otherField = field('Other value type', other);
  const pattern = h('input', { type: 'search', name: 'pattern', required: true, value: query.get('q') || '' });
  const prefix = h('input', { type: 'text', name: 'prefix', value: query.get('prefix') || '' });
  const givenType = query.get('type') || 'URL';
  if (SEARCH_TYPES.includes(givenType)) type.value = givenType;
  else {
    type.value = 'other';
    other.value = givenType;
  }
  otherField.hidden = type.value !== 'other';
  type.addEventListener('change', () => {
    otherField.hidden = type.value !== 'other';
  });
  const form = h(
    'form',
    { class: 'card', role: 'search' },
    field('Value type', type),
    otherField,
    field('Value pattern', pattern, '* matches any run of characters; case does not matter; only publicly readable values are searched. E.g. *example.org*'),
    field('Only under prefix (optional)', prefix),
    h('div', { class: 'actions' }, h('button', { type: 'submit' }, 'Search')),
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const q = new URLSearchParams({ type: type.value === 'other' ? other.value.trim() : type.value, q: pattern.value });
    if (prefix.value.trim()) q.set('prefix', prefix.value.trim());
    location.hash = `#/search?${q}`;
  });
  const results = h('section', { 'aria-label': 'Results' });
  const heading = page('Search by value', form, results);
  const term = query.get('q');
  if (!term) return heading;
  const t = givenType.trim();
  if (!t) throw new Error('Name the value type to search.');
  const pageNo = Math.max(0, parseInt(query.get('page') || '0', 10) || 0);
  const scope = query.get('prefix') ? `/${encodeURIComponent(query.get('prefix'))}` : '';
  const q = new URLSearchParams({ [t]: term, limit: String(PAGE_SIZE), page: String(pageNo) });
  const found = await call('GET', `/hrls/handles${scope}?${q}`);
  const list = Array.isArray(found) ? found : Object.keys(found || {});
  const next = new URLSearchParams(query);
  next.set('page', String(pageNo + 1));
  const prev = new URLSearchParams(query);
  prev.set('page', String(pageNo - 1));
  results.append(
    h('h2', {}, 'Results'),
    h('p', { role: 'status' }, list.length ? `${list.length} handle${list.length === 1 ? '' : 's'} on this page.` : 'No handle has a matching public value.'),
    h('ul', { class: 'links handles' }, list.map((x) => h('li', {}, recordLink(x)))),
    h(
      'nav',
      { class: 'pager', 'aria-label': 'Result pages' },
      pageNo > 0 ? h('a', { href: `#/search?${prev}` }, '← Previous page') : null,
      list.length === PAGE_SIZE ? h('a', { href: `#/search?${next}` }, 'Next page →') : null,
    ),
  );
  return heading;
}
