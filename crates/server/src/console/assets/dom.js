// Building the page without markup strings: every text goes in as text,
// never parsed as HTML (no injection from handle data).

let counter = 0;

/** A fresh element id with a readable prefix. */
export function uid(prefix) {
  counter += 1;
  return `${prefix}-${counter}`;
}

/** h('button', {type: 'button', onclick: f}, 'text', child...) */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === false || v === null || v === undefined) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (k === 'value' || k === 'checked' || k === 'selected') el[k] = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : String(c));
  }
}

/** A labelled control: <div class="field"><label for=id>text</label>control hint</div>. */
export function field(label, control, hint) {
  if (!control.id) control.id = uid('f');
  const parts = [h('label', { for: control.id }, label), control];
  if (hint) {
    const hintId = uid('hint');
    control.setAttribute('aria-describedby', hintId);
    parts.push(h('p', { class: 'hint', id: hintId }, hint));
  }
  return h('div', { class: 'field' }, parts);
}

/** Replace an element's children. */
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

/** Say something in the message area (read out by screen readers). */
export function say(text, kind = 'error') {
  const box = document.getElementById('message');
  box.className = `message ${kind}`;
  box.textContent = text;
  if (kind === 'error') box.focus();
}

let pending = null;

/** Say something once the page being navigated to is shown (a hash change clears messages). */
export function sayNext(text) {
  pending = text;
}

/** Say what sayNext kept, once the new page is shown. */
export function sayPending() {
  if (pending) say(pending, 'info');
  pending = null;
}

export function unsay() {
  const box = document.getElementById('message');
  box.className = 'message';
  box.textContent = '';
}

/** The main area, emptied, with a heading that takes the focus (for screen readers). */
export function page(title, ...children) {
  const main = document.getElementById('main');
  const heading = h('h1', { tabindex: '-1' }, title);
  fill(main, heading, ...children);
  document.title = `${title} - handled admin console`;
  return heading;
}

export function b64encode(bytes) {
  let s = '';
  for (const b of new Uint8Array(bytes)) s += String.fromCharCode(b);
  return btoa(s);
}

export function b64decode(text) {
  const s = atob(text.replace(/[\s]/g, '').replace(/-/g, '+').replace(/_/g, '/'));
  const out = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i += 1) out[i] = s.charCodeAt(i);
  return out;
}
