// Cairn's page: three views chosen by the query string (?token=T, &conversation=K,
// &archive=A), drawn from the JSON API of `cairn ui`. Text from the record only ever goes in
// through textContent.
'use strict';

const params = new URLSearchParams(location.search);
const TOKEN = params.get('token') || '';
const CONVERSATION = params.get('conversation');
const ARCHIVE = params.get('archive');
const view = document.getElementById('view');
const errorBox = document.getElementById('error');
const SVG = 'http://www.w3.org/2000/svg';

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') el.className = v;
    else if (k === 'text') el.textContent = v;
    else if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
  for (const c of children) if (c) el.append(c);
  return el;
}

function href(query) {
  return '?' + new URLSearchParams({ token: TOKEN, ...query }).toString();
}

async function api(path, query = {}, method = 'GET') {
  const response = await fetch(path + '?' + new URLSearchParams({ ...query, token: TOKEN }), { method });
  const text = await response.text();
  let body;
  try { body = JSON.parse(text); } catch { body = { error: text || response.statusText }; }
  if (!response.ok) throw new Error(body.error || `${response.status} ${response.statusText}`);
  return body;
}

function showError(error) {
  errorBox.textContent = String(error && error.message ? error.message : error);
  errorBox.classList.add('shown');
}

function clearError() {
  errorBox.textContent = '';
  errorBox.classList.remove('shown');
}

const when = (ms) => (ms ? new Date(ms).toLocaleString() : '');
const n = (x) => (x === null || x === undefined ? '–' : Number(x).toLocaleString('en-US'));

function crumbs(parts) {
  const nav = document.getElementById('crumbs');
  nav.replaceChildren();
  parts.forEach(([label, query], i) => {
    if (i) nav.append(' › ');
    nav.append(query ? h('a', { href: href(query), text: label }) : h('span', { text: label }));
  });
}

function render(...children) {
  view.replaceChildren(...children.flat(Infinity).filter((c) => c !== null && c !== undefined && c !== false));
  view.removeAttribute('data-loading');
  view.setAttribute('data-ready', 'true');
}

// 1. The home's conversations.
async function conversations() {
  crumbs([['Conversations']]);
  document.title = 'Cairn · conversations';
  const lines = await api('/api/conversations');
  const rows = lines.map((c) =>
    h('tr', { class: 'conversation', 'data-conversation': c.conversation },
      h('td', {}, h('a', { class: 'open', href: href({ conversation: c.conversation }), text: c.conversation })),
      h('td', { class: 'num compactions', text: n(c.compactions) }),
      h('td', { class: 'num', text: n(c.standing) }),
      h('td', { class: 'num', text: n(c.undos) }),
      h('td', { class: 'num tokens-now', text: n(c.tokens_now) }),
      h('td', { class: 'muted', text: when(c.last_at) })));
  render(
    h('h1', { text: 'Conversations' }),
    lines.length
      ? h('table', { id: 'conversations' },
          h('thead', {}, h('tr', {}, h('th', { text: 'Conversation' }), h('th', { class: 'num', text: 'Compactions' }),
            h('th', { class: 'num', text: 'Standing' }), h('th', { class: 'num', text: 'Undos' }),
            h('th', { class: 'num', text: 'Tokens now' }), h('th', { text: 'Last change' }))),
          h('tbody', {}, rows))
      : h('p', { id: 'no-conversations', class: 'muted', text: 'This home holds no conversation yet: `cairn compact` one.' }));
}

// Tokens before and after each compaction, as bars.
function chart(compactions) {
  const W = 760, H = 220, left = 64, bottom = 28, top = 12;
  const max = Math.max(1, ...compactions.flatMap((c) => [c.tokens_before, c.tokens_after]));
  const svg = s('svg', { id: 'chart', viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: 'img', 'aria-label': 'Tokens before and after each compaction' });
  const y = (v) => top + (H - top - bottom) * (1 - v / max);
  for (const f of [0, 0.5, 1]) {
    svg.append(s('line', { x1: left, x2: W - 8, y1: y(max * f), y2: y(max * f), stroke: '#d8dee4' }));
    const label = s('text', { x: left - 6, y: y(max * f) + 4, 'text-anchor': 'end', 'font-size': 11, fill: '#5f6b76' });
    label.textContent = Math.round(max * f).toLocaleString('en-US');
    svg.append(label);
  }
  const slot = (W - left - 8) / Math.max(1, compactions.length);
  const bar = Math.min(36, slot / 2.6);
  compactions.forEach((c, i) => {
    const x = left + slot * i + slot / 2;
    const faded = c.status !== 'committed' ? 0.35 : 1;
    const g = s('g', { class: 'bars', 'data-archive-id': c.archive_id, opacity: faded });
    const before = s('rect', { class: 'before', x: x - bar - 1, y: y(c.tokens_before), width: bar, height: y(0) - y(c.tokens_before), fill: '#9aa7b4' });
    const after = s('rect', { class: 'after', x: x + 1, y: y(c.tokens_after), width: bar, height: y(0) - y(c.tokens_after), fill: '#2f6fb3' });
    const t1 = s('title'); t1.textContent = `#${i + 1} before: ${n(c.tokens_before)} tokens`; before.append(t1);
    const t2 = s('title'); t2.textContent = `#${i + 1} after: ${n(c.tokens_after)} tokens (${c.status})`; after.append(t2);
    const label = s('text', { x, y: H - 10, 'text-anchor': 'middle', 'font-size': 11, fill: '#5f6b76' });
    label.textContent = `#${i + 1}${c.status === 'undone' ? ' (undone)' : c.status === 'failed' ? ' (failed)' : ''}`;
    g.append(before, after, label);
    svg.append(g);
  });
  return h('figure', { style: 'margin:0' }, svg,
    h('figcaption', { class: 'legend muted' },
      h('span', {}, h('i', { style: 'background:#9aa7b4' }), 'tokens before'),
      h('span', {}, h('i', { style: 'background:#2f6fb3' }), 'tokens after')));
}

function moment(m, index) {
  const at = h('span', { class: 'when', text: when(m.at) });
  if (m.kind === 'compaction') {
    return h('li', { class: `moment compaction ${m.status}`, 'data-archive-id': m.archive_id, 'data-status': m.status },
      at, h('b', { text: `Compaction #${index}` }), ' ',
      h('span', { class: `badge status status-${m.status}`, text: m.status }), ' ',
      h('span', { class: 'muted', text: m.purpose }), ' · ',
      h('span', { class: 'tokens', text: `${n(m.tokens_before)} → ${n(m.tokens_after)} tokens` }), ' · ',
      m.committed_by ? h('span', {}, 'by ', h('code', { class: 'committed-by', text: m.committed_by })) : h('span', { class: 'muted', text: 'nothing committed' }),
      ' · ', h('span', { class: 'muted replaced', text: `${n(m.replaced)} entries replaced` }), ' · ',
      h('a', { class: 'open-compaction', href: href({ conversation: CONVERSATION, archive: m.archive_id }), text: 'open' }));
  }
  if (m.kind === 'undo') {
    return h('li', { class: 'moment undo', 'data-undone': m.undone.join(' ') },
      at, h('b', { text: 'Undo' }), ' of ',
      m.undone.map((id, i) => [i ? ', ' : '', h('a', { href: href({ conversation: CONVERSATION, archive: id }) }, h('code', { text: id }))]),
      ' · ', h('span', { class: 'tokens', text: `${n(m.tokens_before)} → ${n(m.tokens_after)} tokens` }));
  }
  return h('li', { class: `moment pin ${m.pinned ? 'pinned' : 'unpinned'}`, 'data-ids': m.ids.join(' ') },
    at, h('b', { text: m.pinned ? 'Pinned' : 'Unpinned' }), ' ', m.ids.map((id, i) => [i ? ', ' : '', h('code', { text: id })]));
}

// 2. One conversation's timeline.
async function timeline() {
  crumbs([['Conversations', {}], [CONVERSATION]]);
  document.title = `Cairn · ${CONVERSATION}`;
  const t = await api('/api/timeline', { conversation: CONVERSATION });
  const compactions = t.moments.filter((m) => m.kind === 'compaction');
  let k = 0;
  const items = t.moments.map((m) => moment(m, m.kind === 'compaction' ? ++k : 0));
  const standing = compactions.filter((c) => c.status === 'committed' && c.purpose !== 'handover');
  const undo = h('button', {
    id: 'undo', class: 'danger', disabled: standing.length === 0,
    title: standing.length ? `Takes back ${standing[standing.length - 1].archive_id}` : 'No standing compaction',
    onclick: async (event) => {
      const last = standing[standing.length - 1];
      if (!confirm(`Undo compaction ${last.archive_id}? The context gets its originals back; the undo is recorded.`)) return;
      event.target.disabled = true;
      try {
        await api('/api/undo', { conversation: CONVERSATION }, 'POST');
        clearError();
        await timeline();
      } catch (e) {
        showError(e);
        event.target.disabled = false;
      }
    },
  }, 'Undo last compaction');
  const pins = t.pinned_entries.map((p) =>
    h('li', { class: 'pin', 'data-id': p.id },
      h('code', { text: p.id }), ' ', h('span', { class: 'muted', text: p.preview ?? '(no longer in the context)' }), ' ',
      h('button', {
        class: 'unpin',
        onclick: async () => {
          try { await api('/api/pin', { conversation: CONVERSATION, id: p.id, pinned: 'false' }, 'POST'); clearError(); await timeline(); } catch (e) { showError(e); }
        },
      }, 'unpin')));
  render(
    h('h1', {}, 'Conversation ', h('code', { id: 'conversation', text: t.conversation })),
    h('p', { class: 'muted' }, `${n(compactions.length)} compactions · ${n(t.tokens_now)} tokens in the context now`),
    compactions.length ? chart(compactions) : null,
    h('p', {}, undo),
    h('h2', { text: 'Timeline' }),
    items.length ? h('ol', { id: 'moments', class: 'moments' }, items) : h('p', { class: 'muted', text: 'Nothing happened here yet.' }),
    h('h2', { text: 'Pinned entries' }),
    pins.length ? h('ul', { id: 'pins', class: 'pins' }, pins) : h('p', { id: 'pins', class: 'muted', text: 'None: pin an entry from a compaction\'s view (or `!pin` in a message).' }));
}

// What became of each entry a stage touched (the glossary's words), in the order a stage reads.
const PARTS = [
  ['elided', 'Elided', 'content set aside in an artifact; a placeholder took its place (its artifact:// URI recovers it)', '#8456c2'],
  ['summarized', 'Summarized', 'replaced entries a summary or checkpoint stands for now', '#c99a18'],
  ['summaries', 'Into', 'what the stage put in their place (the summary or checkpoint; the last resort\'s marker)', '#2f6fb3'],
  ['dropped', 'Dropped', 'taken out with nothing standing for them (the last resort)', '#c43c3c'],
  ['kept', 'Kept verbatim', 'unchanged: the protected head and what the stage\'s range carried as it was', '#4c9a5f'],
  ['tail', 'Kept verbatim: the tail', 'the verbatim tail after the range, never touched', '#3a8f8f'],
];
const ENTRY_CLASS = { summarized: 'summarized', summaries: 'summary', elided: 'elided', dropped: 'dropped', kept: 'kept', tail: 'tail' };

function artifactLink(uri) {
  return h('a', { class: 'artifact', href: `/artifact?${new URLSearchParams({ uri, conversation: CONVERSATION, token: TOKEN })}`, target: '_blank', rel: 'noreferrer', 'data-uri': uri, text: uri });
}

function entry(e, part, pinned) {
  const uris = (e.uris || []).map(artifactLink);
  const pin = (part === 'kept' || part === 'tail') && !pinned.has(e.id)
    ? h('button', {
        class: 'pin', title: 'Keep this entry verbatim through every compaction',
        onclick: async (event) => {
          try { await api('/api/pin', { conversation: CONVERSATION, id: e.id, pinned: 'true' }, 'POST'); clearError(); event.target.replaceWith(h('span', { class: 'badge pinned', text: 'pinned' })); } catch (err) { showError(err); }
        },
      }, 'pin')
    : pinned.has(e.id) ? h('span', { class: 'badge pinned', style: 'float:right', text: 'pinned' }) : null;
  return h('div', { class: `entry ${ENTRY_CLASS[part]}`, 'data-id': e.id, 'data-part': part, 'data-tokens': e.tokens },
    pin,
    h('div', { class: 'meta' }, h('b', { text: e.role }), ` · ${e.origin} · turn ${e.turn} · ${n(e.tokens)} tokens · `, h('code', { text: e.id })),
    h('pre', { text: e.preview }),
    e.placeholder != null
      ? h('div', { class: 'placeholder', 'data-tokens-after': e.tokens_after }, h('span', { class: 'muted', text: `now ${n(e.tokens_after)} tokens: ` }), h('code', { text: e.placeholder }))
      : null,
    uris.length ? h('div', { class: 'uris' }, uris) : null);
}

// The first SHOWN entries of a part; a button shows the rest.
const SHOWN = 25;
function entries(list, part, pinned) {
  const first = list.slice(0, SHOWN).map((e) => entry(e, part, pinned));
  if (list.length <= SHOWN) return first;
  const more = h('button', {
    class: 'more', 'data-part': part,
    onclick: () => more.replaceWith(...list.slice(SHOWN).map((e) => entry(e, part, pinned))),
  }, `show the other ${n(list.length - SHOWN)} entries`);
  return [...first, more];
}

// 3. One compaction, before and after.
async function compaction() {
  crumbs([['Conversations', {}], [CONVERSATION, { conversation: CONVERSATION }], [`compaction ${ARCHIVE}`]]);
  document.title = `Cairn · ${ARCHIVE}`;
  const [c, t] = await Promise.all([api('/api/compaction', { conversation: CONVERSATION, archive: ARCHIVE }), api('/api/timeline', { conversation: CONVERSATION })]);
  const pinned = new Set([...(t.pinned || []), ...(c.pinned || [])]);
  const facts = [
    ['Status', h('span', { class: `badge status status-${c.status}`, id: 'status', text: c.status })],
    ['Purpose', c.purpose],
    ['When', when(c.at)],
    ['Committed by', c.committed_by ? h('code', { text: c.committed_by }) : 'nothing (the context stayed as it was)'],
    ['Tokens', h('span', { id: 'tokens', text: `${n(c.tokens_before)} → ${n(c.tokens_after)}` })],
    c.committed_by ? ['Replaced', h('span', { id: 'replaced', text: `${n(c.replaced)} entries (their originals set aside in the archive)` })] : null,
    c.rejected ? ['Rejected', c.rejected] : null,
    c.over_window ? ['Over the window', c.over_window] : null,
    c.pinned && c.pinned.length ? ['Pinned', c.pinned.join(', ')] : null,
    c.pins_refused && c.pins_refused.length ? ['Pins refused', c.pins_refused.join('; ')] : null,
  ].filter(Boolean);
  const step = (st, i) =>
    h('tr', { class: 'step', 'data-outcome': st.outcome, 'data-plugin': st.plugin, 'data-stage': st.stage || '' },
      h('td', { class: 'num', text: i + 1 }),
      h('td', {}, h('code', { text: st.plugin }), st.stage ? h('span', { class: 'muted', text: ` (${st.stage})` }) : null),
      h('td', { class: 'outcome', text: st.outcome }),
      h('td', { class: 'num', text: `${n(st.millis)} ms` }),
      h('td', { class: 'num', text: st.tokens_after == null ? '–' : n(st.tokens_after) }),
      h('td', { class: 'message' }, st.message || '',
        st.note ? h('div', { class: 'muted note', text: st.note }) : null,
        st.refused && st.refused.length ? h('div', { class: 'muted refused', text: `refused: ${st.refused.join(', ')}` }) : null));
  const stageView = (sv) => {
    const total = sv.tokens_before || 1;
    const kinds = PARTS.filter(([k]) => k !== 'summaries');
    const bar = h('div', { class: 'parts-bar', title: 'The stage\'s tokens before, by what became of them' },
      kinds.filter(([k]) => sv[k].tokens > 0).map(([k, label, , color]) =>
        h('div', { style: `width:${(100 * sv[k].tokens) / total}%;background:${color}`, title: `${label}: ${n(sv[k].tokens)} tokens` })));
    const by = sv.committed_by ? [' by ', h('code', { text: sv.committed_by })] : [];
    const said = { committed: 'committed', skipped: 'skipped', 'nothing-committed': 'nothing committed' }[sv.status] || sv.status;
    const parts = PARTS.filter(([k]) => sv[k].count > 0 || sv[k].tokens > 0).map(([k, label, help]) => {
      const after = sv[k].tokens_after != null ? ` → ${n(sv[k].tokens_after)}` : '';
      return h('section', { class: 'part', id: `part-${sv.stage}-${k}`, 'data-part': k, 'data-tokens': sv[k].tokens, 'data-count': sv[k].count, 'data-tokens-after': sv[k].tokens_after ?? '' },
        h('h3', {}, `${label} `, h('span', { class: 'tokens', text: `${n(sv[k].count)} entries · ${n(sv[k].tokens)}${after} tokens` })),
        h('p', { class: 'muted', text: help }),
        sv[k].entries.length ? entries(sv[k].entries, k, pinned) : null);
    });
    return h('section', { class: `stage ${sv.status}`, 'data-stage': sv.stage, 'data-status': sv.status, 'data-tokens-before': sv.tokens_before, 'data-tokens-after': sv.tokens_after },
      h('h2', {}, `Stage ${sv.stage}: `, h('span', { class: `badge status status-${sv.status}`, text: said }), ...by, ' ',
        h('span', { class: 'tokens', text: `${n(sv.tokens_before)} → ${n(sv.tokens_after)} tokens` })),
      sv.note ? h('p', { class: 'muted stage-note', text: sv.note }) : null,
      sv.status === 'committed' ? [bar, parts] : null,
      sv.steps.length
        ? h('table', { class: 'stage-steps' }, h('tbody', {}, sv.steps.map((st, i) => step(st, i))))
        : null);
  };
  const adjusted = c.adjusted
    ? h('p', { id: 'adjusted', class: 'muted', text: `After the stages, ${c.adjusted.tokens > 0 ? '+' : ''}${n(c.adjusted.tokens)} tokens: ${c.adjusted.why}.` })
    : null;
  render(
    h('h1', { 'data-archive-id': c.archive_id }, 'Compaction ', h('code', { text: c.archive_id })),
    h('table', { id: 'facts' }, h('tbody', {}, facts.map(([k, v]) => h('tr', {}, h('th', { text: k }), h('td', {}, v))))),
    h('h2', { text: 'Steps' }),
    h('table', { id: 'steps' },
      h('thead', {}, h('tr', {}, h('th', { class: 'num', text: '#' }), h('th', { text: 'Plugin' }), h('th', { text: 'Outcome' }),
        h('th', { class: 'num', text: 'Time' }), h('th', { class: 'num', text: 'Tokens after' }), h('th', { text: 'Message' }))),
      h('tbody', {}, c.steps.map(step))),
    c.status === 'failed' ? h('p', { class: 'muted', text: 'No step\'s outcome was committed: nothing was replaced.' }) : null,
    c.stages.length ? h('p', { class: 'muted', text: 'Stage by stage: each starts where the one before it ended; its parts add up to its tokens before and after.' }) : null,
    c.stages.map(stageView),
    adjusted,
    c.artifacts && c.artifacts.length
      ? h('section', { id: 'artifacts', class: 'artifacts' },
          h('h2', {}, 'Artifacts ', h('span', { class: 'tokens', text: `${n(c.artifacts.length)} set aside` })),
          h('p', { class: 'muted', text: 'The elided originals, set aside in the archive: each opens byte for byte (what `cairn artifact URI` prints).' }),
          h('div', { class: 'artifact-list' }, c.artifacts.map(artifactLink)))
      : null);
}

(async () => {
  try {
    if (CONVERSATION && ARCHIVE) await compaction();
    else if (CONVERSATION) await timeline();
    else await conversations();
  } catch (e) {
    render(h('p', { class: 'muted', text: 'Could not load this view.' }));
    view.setAttribute('data-failed', 'true');
    showError(e);
  }
})();
