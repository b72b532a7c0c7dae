// Server status from /metrics (the figures `handled status` prints), with
// request rates computed between two readings; refreshed every few seconds
// while the page is open.

import { call } from './api.js';
import { h, page } from './dom.js';

const REFRESH_MS = 5000;
let previous = null;
let timer = null;

/** `name{labels} value` lines → {series: value}, plus per-name sums over labels. */
export function parseMetrics(text) {
  const out = new Map();
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const space = line.lastIndexOf(' ');
    const value = Number(line.slice(space + 1));
    if (space < 0 || Number.isNaN(value)) continue;
    const series = line.slice(0, space);
    out.set(series, value);
    const brace = series.indexOf('{');
    if (brace > 0) {
      const name = series.slice(0, brace);
      out.set(name, (out.get(name) || 0) + value);
    }
  }
  return out;
}

function byLabel(m, name, label) {
  const sums = new Map();
  const re = new RegExp(`${label}="([^"]*)"`);
  for (const [series, value] of m) {
    if (!series.startsWith(`${name}{`)) continue;
    const key = (re.exec(series) || [])[1] || '?';
    sums.set(key, (sums.get(key) || 0) + value);
  }
  return sums;
}

const n = (x, digits = 0) => x.toLocaleString('en', { maximumFractionDigits: digits, minimumFractionDigits: digits });

function table(caption, rows) {
  return h(
    'table',
    { class: 'figures' },
    h('caption', {}, caption),
    h('tbody', {}, rows.map(([k, v]) => h('tr', {}, h('th', { scope: 'row' }, k), h('td', {}, v)))),
  );
}

function render(m, rates) {
  const get = (k) => m.get(k) || 0;
  const sections = [
    table('Admission', [
      ['In flight', `${n(get('handled_admission_in_flight'))} of ${n(get('handled_admission_max_concurrent'))}`],
      ['Waiting', `${n(get('handled_admission_waiting'))} of ${n(get('handled_admission_queue_capacity'))}`],
      ['Admitted', n(get('handled_admission_admitted_total'))],
      ['Queued', n(get('handled_admission_queued_total'))],
      [
        'Rejected',
        `${n(get('handled_admission_rejected_total'))} (queue full ${n(get('handled_admission_rejected_total{reason="queue_full"}'))}, ` +
          `waited too long ${n(get('handled_admission_rejected_total{reason="queue_timeout"}'))}, ` +
          `would wait too long ${n(get('handled_admission_rejected_total{reason="queue_wait_predicted"}'))})`,
      ],
    ]),
    table('Requests', [
      ['Answered', n(get('handled_requests_total'))],
      ['Open connections', n(get('handled_open_connections'))],
      ...(rates
        ? [
            [`Rate (last ${n(rates.seconds, 1)} s)`, `${n(rates.total, 1)} per second`],
            ...[...rates.byTransport].map(([t, r]) => [`  ${t}`, `${n(r, 1)} per second`]),
          ]
        : [['Rate', 'shown from the next reading on']]),
    ]),
  ];
  if (m.has('handled_cache_hits_total')) {
    const hits = get('handled_cache_hits_total');
    const misses = get('handled_cache_misses_total');
    sections.push(
      table('Cache', [
        ['Size', `${n(get('handled_cache_bytes') / 1e6, 1)} of ${n(get('handled_cache_capacity_bytes') / 1e6, 1)} MB`],
        ['Entries', n(get('handled_cache_entries'))],
        ['Hit ratio', hits + misses > 0 ? `${n((100 * hits) / (hits + misses), 1)} %` : '—'],
        ['Evictions', n(get('handled_cache_evictions_total'))],
        ['Invalidations', n(get('handled_cache_invalidations_total'))],
      ]),
    );
  } else {
    sections.push(table('Cache', [['Cache', 'off']]));
  }
  const commits = get('handled_store_commits_total');
  sections.push(
    table('Store', [
      ['Commits', n(commits)],
      ['Fsyncs', n(get('handled_store_fsyncs_total'))],
      ['Writes per commit', n(commits > 0 ? get('handled_store_write_ops_total') / commits : 0, 1)],
      ['Largest group commit', n(get('handled_store_max_group_commit'))],
      ['Failed operations', n(get('handled_store_failed_ops_total'))],
    ]),
  );
  return sections;
}

async function reading() {
  const text = await call('GET', '/metrics', { text: true });
  return { at: performance.now(), m: parseMetrics(text) };
}

export async function statusPage() {
  clearTimeout(timer);
  const now = await reading();
  let rates = null;
  if (previous && now.at > previous.at) {
    const seconds = (now.at - previous.at) / 1000;
    const before = byLabel(previous.m, 'handled_requests_total', 'transport');
    const byTransport = new Map();
    for (const [t, v] of byLabel(now.m, 'handled_requests_total', 'transport')) {
      byTransport.set(t, Math.max(0, v - (before.get(t) || 0)) / seconds);
    }
    const total = [...byTransport.values()].reduce((a, b) => a + b, 0);
    rates = { seconds, total, byTransport };
  }
  previous = now;
  const grid = h('div', { class: 'grid', 'aria-live': 'off' }, render(now.m, rates));
  page('Server status', h('p', { class: 'hint' }, `From /metrics; refreshed every ${REFRESH_MS / 1000} seconds.`), grid);
  timer = setTimeout(() => {
    if (location.hash.startsWith('#/status')) {
      statusPage().catch(() => {});
    }
  }, REFRESH_MS);
}
