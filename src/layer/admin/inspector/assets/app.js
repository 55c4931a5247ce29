// codemode-proxy inspector. Plain script, no build step, no external
// resources. Everything it shows comes from /codemode/api/* and is put in
// the page as text (textContent), never as markup.
'use strict';

(() => {
  const API = '/codemode/api';
  const state = {
    executions: new Map(), // id -> summary
    denials: [],
    totals: null,
    status: null,
    selected: null,
    detailTimer: null,
  };

  // ---- Small helpers ----

  function el(tag, props, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(props || {})) {
      if (v === undefined || v === null) continue;
      if (k === 'class') e.className = v;
      else if (k === 'text') e.textContent = v;
      else if (k.startsWith('data-') || k === 'title' || k === 'colspan') e.setAttribute(k, v);
      else e[k] = v;
    }
    for (const c of children) if (c !== null && c !== undefined) e.append(c);
    return e;
  }

  function svg(tag, attrs) {
    const e = document.createElementNS('http://www.w3.org/2000/svg', tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    return e;
  }

  async function api(path) {
    const res = await fetch(API + path, { credentials: 'same-origin', headers: { accept: 'application/json' } });
    if (res.status === 401) {
      // The session ended (the proxy restarted with another token): ask again.
      location.reload();
      throw new Error('signed out');
    }
    if (!res.ok) throw new Error(`${path}: ${res.status}`);
    return res.json();
  }

  const num = (n) => (n === null || n === undefined ? '—' : Number(n).toLocaleString('en-US'));

  function bytes(n) {
    if (n === null || n === undefined) return '—';
    if (n < 1024) return `${n} B`;
    if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
    return `${(n / 1024 / 1024).toFixed(1)} MiB`;
  }

  function clock(ms) {
    if (!ms) return '—';
    const d = new Date(ms);
    const pad = (x, w = 2) => String(x).padStart(w, '0');
    return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
  }

  function span(ms) {
    if (ms === null || ms === undefined || ms < 0) return '—';
    if (ms < 1000) return `${ms} ms`;
    if (ms < 60000) return `${(ms / 1000).toFixed(1)} s`;
    return `${Math.floor(ms / 60000)} min ${Math.round((ms % 60000) / 1000)} s`;
  }

  const plural = (n, word) => `${num(n)} ${word}${n === 1 ? '' : 's'}`;

  const badge = (s) => el('span', { class: `state ${s}`, text: s });

  // ---- Status and totals ----

  function renderStatus() {
    const s = state.status;
    if (!s) return;
    const m = s.memory;
    document.getElementById('status').textContent =
      `v${s.version} · store ${s.store} · sandbox ${s.sandbox}` +
      (s.sandbox_worker_failures ? ` (${plural(s.sandbox_worker_failures, 'worker')} replaced)` : '') +
      ` · payloads ${m.payloads ? 'shown' : 'hidden'} · ` +
      `keeps ${plural(m.executions_kept, 'execution')}, ${plural(m.denials_kept, 'denial')} (${bytes(m.used_bytes)} of ${bytes(m.budget_bytes)})`;
    const note = document.getElementById('replica-note');
    note.hidden = !s.replica_note;
    note.textContent = s.replica_note || '';
    const scopes = document.getElementById('scopes');
    scopes.replaceChildren(...s.scopes.map((x) => el('option', { value: x })));
    const preset = document.querySelector('#dryrun select[name=preset]');
    const chosen = preset.value;
    preset.replaceChildren(el('option', { value: '', text: "the scope's binding" }),
      ...s.presets.map((p) => el('option', { value: p, text: p })));
    preset.value = chosen;
    preset.disabled = !s.client_select;
  }

  const CHARTS = [
    { title: 'Requests by mode', cols: ['requests_code', 'requests_both', 'requests_native'], labels: ['code', 'both', 'native'], fmt: num },
    { title: 'Tokens', cols: ['tokens_in', 'tokens_out'], labels: ['in', 'out'], fmt: num },
    { title: 'Model round trips saved', cols: ['round_trips_saved'], labels: [], fmt: num },
    { title: 'Context saved', cols: ['context_bytes_saved'], labels: [], fmt: bytes },
    { title: 'Denials', cols: ['denials_unknown_tool', 'denials_invalid_args', 'denials_one_program'], labels: ['unknown tool', 'invalid args', 'one program'], fmt: num },
  ];

  function renderTotals() {
    const t = state.totals;
    if (!t) return;
    const at = (c) => t.columns.indexOf(c) + 1;
    const rows = t.series;
    const t0 = rows[0][0];
    const t1 = Math.max(rows[rows.length - 1][0], t0 + 1);
    const cards = CHARTS.map((c) => {
      const total = c.cols.reduce((sum, col) => sum + (t.now[col] || 0), 0);
      const max = Math.max(1, ...rows.flatMap((r) => c.cols.map((col) => r[at(col)])));
      const chart = svg('svg', { viewBox: '0 0 200 46', preserveAspectRatio: 'none', role: 'img', 'aria-label': c.title });
      chart.append(svg('line', { class: 'axis', x1: 0, y1: 45, x2: 200, y2: 45 }));
      c.cols.forEach((col, i) => {
        const d = rows.map((r, k) => {
          const x = ((r[0] - t0) / (t1 - t0)) * 200;
          const y = 44 - (r[at(col)] / max) * 40;
          return `${k ? 'L' : 'M'}${x.toFixed(1)},${y.toFixed(1)}`;
        }).join(' ');
        chart.append(svg('path', { class: `s${i}`, d }));
      });
      const legend = el('div', { class: 'legend' },
        ...c.labels.map((l, i) => el('span', { class: `s${i}`, text: `${l} ${c.fmt(t.now[c.cols[i]])}` })));
      return el('div', { class: 'card' },
        el('div', { class: 'title', text: c.title }),
        el('div', { class: 'value', text: c.fmt(total) }),
        chart, legend);
    });
    document.getElementById('totals').replaceChildren(...cards);
  }

  function addTotalsPoint(update) {
    const t = state.totals;
    if (!t) return;
    t.now = update.now;
    const row = [update.at_ms, ...t.columns.map((c) => update.now[c])];
    const last = t.series[t.series.length - 1];
    // The last row of a fetched series is "now": replace it while it is recent.
    if (last && update.at_ms - last[0] < t.interval_ms / 2 && t.series.length > 1) t.series[t.series.length - 1] = row;
    else t.series.push(row);
    renderTotals();
  }

  // ---- Executions ----

  function toolsLine(e) {
    if (!e.tools.length) return e.call_count ? `${e.call_count} calls` : 'no tool calls';
    return e.tools.map((t) => (t.count > 1 ? `${t.name} ×${t.count}` : t.name)).join(', ');
  }

  function renderExecutions() {
    const list = [...state.executions.values()].sort((a, b) => Number(b.id) - Number(a.id));
    const rows = list.map((e) => {
      const took = e.ended_at_ms ? e.ended_at_ms - e.started_at_ms : Date.now() - e.started_at_ms;
      const tr = el('tr', { 'data-id': e.id, class: e.id === state.selected ? 'selected' : '' },
        el('td', { class: 'num', text: e.id }),
        el('td', {}, badge(e.state)),
        el('td', { class: 'program', title: e.first_line },
          el('code', { text: e.first_line || '(empty)' }),
          el('span', { class: 'sub', text: toolsLine(e) })),
        el('td', {}, e.scope, el('span', { class: 'sub', text: e.preset })),
        el('td', {}, e.dialect, el('span', { class: 'sub', text: e.model || '—' })),
        el('td', {}, clock(e.started_at_ms), el('span', { class: 'sub', text: `took ${span(took)}` })),
        el('td', { class: 'num', text: e.calls_waiting ? `${e.call_count} (${e.calls_waiting} out)` : num(e.call_count) }),
        el('td', { class: 'num' }, `${num(e.round_trips_saved)} trips`,
          el('span', { class: 'sub', text: bytes(e.context_bytes_saved) })));
      tr.addEventListener('click', () => select(e.id));
      return tr;
    });
    document.querySelector('#executions tbody').replaceChildren(...rows);
    document.getElementById('executions-empty').hidden = rows.length > 0;
  }

  function select(id) {
    state.selected = id;
    if (location.hash !== `#execution=${id}`) history.replaceState(null, '', `#execution=${id}`);
    renderExecutions();
    loadDetail();
  }

  async function loadDetail() {
    const id = state.selected;
    if (!id) return;
    try {
      renderDetail(await api(`/executions/${encodeURIComponent(id)}`));
    } catch (err) {
      document.getElementById('detail').replaceChildren(
        el('p', { class: 'empty', text: `Execution ${id} is no longer kept on this replica (${err.message}).` }));
    }
  }

  // An execution changes several times in a burst (running, waiting): read it once.
  function detailSoon() {
    clearTimeout(state.detailTimer);
    state.detailTimer = setTimeout(loadDetail, 150);
  }

  function payload(label, text, size) {
    if (text === undefined) return el('span', { class: 'hidden-payload', text: bytes(size) });
    if (text === null) return el('span', { class: 'hidden-payload', text: '—' });
    return el('details', {}, el('summary', { text: `${label} · ${bytes(size)}` }), el('pre', { text }));
  }

  function renderDetail(e) {
    const meta = [
      ['state', badge(e.state)], ['run_code call', el('code', { text: e.run_call_id })],
      ['scope', e.scope], ['preset', e.preset],
      ['dialect', e.dialect], ['model', e.model || '—'],
      ['started', clock(e.started_at_ms)], ['ended', clock(e.ended_at_ms)],
      ['took', span((e.ended_at_ms || Date.now()) - e.started_at_ms)], ['nested calls', num(e.call_count)],
      ['round trips saved', num(e.round_trips_saved)], ['context saved', bytes(e.context_bytes_saved)],
      ['console output', bytes(e.console_bytes)], ['result to the model', bytes(e.result_bytes)],
    ];
    const dl = el('dl', { class: 'meta' });
    for (const [k, v] of meta) dl.append(el('dt', { text: k }), el('dd', {}, v));

    const code = el('table', { class: 'code mono' });
    e.code.split('\n').forEach((line, i) => {
      code.append(el('tr', {}, el('td', { class: 'ln', text: String(i + 1) }), el('td', { class: 'src', text: line })));
    });

    const calls = el('table', { class: 'calls' },
      el('thead', {}, el('tr', {}, ...['#', 'tool', 'arguments', 'handed to the agent', 'result back', 'agent took', 'result']
        .map((h) => el('th', { text: h })))));
    const body = el('tbody');
    for (const c of e.calls) {
      const waited = c.handed_at_ms && c.result_at_ms ? c.result_at_ms - c.handed_at_ms : null;
      body.append(el('tr', { 'data-tool': c.tool },
        el('td', { class: 'num', text: String(c.n + 1) }),
        el('td', {}, el('code', { text: c.tool })),
        el('td', {}, payload('arguments', c.args, c.args_bytes)),
        el('td', { text: clock(c.handed_at_ms) }),
        el('td', { text: c.result_bytes === null ? 'waiting' : clock(c.result_at_ms) }),
        el('td', { class: 'num', text: span(waited) }),
        el('td', {}, c.result_bytes === null ? '—' : payload('result', c.result, c.result_bytes))));
    }
    calls.append(body);

    const parts = [
      el('h2', { text: `Execution ${e.id}` }), dl,
      el('h3', { text: 'Program' }), el('div', { class: 'codewrap' }, code),
      el('h3', { text: `Nested calls (${e.calls.length})` }),
      e.calls.length ? calls : el('p', { class: 'empty', text: 'The program called no tool.' }),
    ];
    if (e.console !== undefined) {
      parts.push(el('h3', { text: 'Console output' }), e.console ? el('pre', { class: 'mono', text: e.console }) : el('p', { class: 'empty', text: 'none' }));
      if (e.result !== null) parts.push(el('h3', { text: 'Result the model got' }), el('pre', { class: 'mono', text: e.result }));
    }
    const detail = document.getElementById('detail');
    detail.setAttribute('data-id', e.id);
    detail.replaceChildren(...parts);
  }

  // ---- Denials ----

  function renderDenials() {
    const rows = state.denials.map((d) => el('tr', {},
      el('td', { text: clock(d.at_ms) }),
      el('td', {}, el('code', { text: d.tool })),
      el('td', {}, el('code', { text: d.code })),
      el('td', { text: d.scope }), el('td', { text: d.preset }), el('td', { text: d.dialect }), el('td', { text: d.model || '—' }),
      el('td', { title: d.repair_detail }, el('span', { class: `repair ${d.repair}`, text: d.repair.replace('_', ' ') }))));
    document.querySelector('#denials tbody').replaceChildren(...rows);
    document.getElementById('denials-empty').hidden = rows.length > 0;
  }

  // ---- What the model sees ----

  const EXAMPLES = {
    chat: { model: 'gpt-4.1', messages: [{ role: 'user', content: 'Summarise notes.txt' }],
      tools: [{ type: 'function', function: { name: 'read', description: 'Read a file.',
        parameters: { type: 'object', properties: { path: { type: 'string', description: 'File path' } }, required: ['path'] } } }] },
    responses: { model: 'gpt-5', input: 'Summarise notes.txt', instructions: 'You are a coding agent.',
      tools: [{ type: 'function', name: 'read', description: 'Read a file.',
        parameters: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] } }] },
    messages: { model: 'claude-sonnet-4-5', max_tokens: 1024, system: 'You are a coding agent.',
      messages: [{ role: 'user', content: 'Summarise notes.txt' }],
      tools: [{ name: 'Read', description: 'Read a file.', input_schema: { type: 'object', properties: { file_path: { type: 'string' } }, required: ['file_path'] } }] },
  };

  async function dryRun(ev) {
    ev.preventDefault();
    const form = ev.target;
    const out = document.getElementById('dryrun-out');
    const headers = { 'content-type': 'application/json' };
    if (form.scope.value.trim()) headers['x-codemode-scope'] = form.scope.value.trim();
    if (form.preset.value) headers['x-codemode-preset'] = form.preset.value;
    const q = form.dialect.value ? `?dialect=${encodeURIComponent(form.dialect.value)}` : '';
    let res;
    let body;
    try {
      res = await fetch(`/codemode/dry-run${q}`, { method: 'POST', headers, body: form.body.value, credentials: 'same-origin' });
      body = await res.json();
    } catch (err) {
      out.replaceChildren(el('div', {}, el('p', { class: 'error', text: `The dry run failed: ${err.message}` })));
      return;
    }
    if (!res.ok) {
      const message = (body.error && body.error.message) || JSON.stringify(body);
      out.replaceChildren(el('div', {}, el('p', { class: 'error', text: `${res.status}: ${message}` })));
      return;
    }
    const sections = body.sections.filter((s) => s.text).map((s) =>
      el('details', { open: s.id !== 'tools:sdk' }, el('summary', { text: `${s.id} (order ${s.order})` }), el('pre', { text: s.text })));
    out.replaceChildren(el('div', {},
      el('p', {}, `dialect ${body.dialect} · scope ${body.scope} · preset ${body.preset} · mode ${body.mode}`),
      el('h3', { text: 'Tools on the wire' }),
      el('p', {}, ...(body.wire_tools.length ? body.wire_tools.map((t) => el('span', { class: 'chip', text: `${t.name} (${t.type})` })) : ['none'])),
      el('h3', { text: 'The SDK' }),
      body.sdk ? el('pre', { text: body.sdk }) : el('p', { class: 'empty', text: 'No SDK in this mode.' }),
      el('h3', { text: 'Sections' }), ...(sections.length ? sections : [el('p', { class: 'empty', text: 'none' })]),
      el('details', {}, el('summary', { text: 'The request sent upstream' }), el('pre', { text: JSON.stringify(body.request, null, 2) }))));
  }

  // ---- Live updates ----

  async function loadAll() {
    const [ex, de, to, st] = await Promise.all([api('/executions'), api('/denials'), api('/totals'), api('/status')]);
    state.executions = new Map(ex.executions.map((e) => [e.id, e]));
    state.denials = de.denials;
    state.totals = to;
    state.status = st;
    renderStatus();
    renderTotals();
    renderExecutions();
    renderDenials();
    if (state.selected) loadDetail();
  }

  function connect() {
    const live = document.getElementById('live');
    const events = new EventSource(`${API}/events`);
    events.addEventListener('open', () => {
      live.className = 'live';
      live.textContent = 'live';
      // Read the lists once listening, so no update falls between the two.
      loadAll().catch(() => {});
    });
    events.addEventListener('error', () => {
      live.className = 'live off';
      live.textContent = 'reconnecting';
      // A refused stream is not retried by the browser: a 401 (the session
      // ended) reloads to the form; anything else tries again shortly.
      if (events.readyState === EventSource.CLOSED) {
        setTimeout(() => api('/status').then(connect, () => setTimeout(connect, 5000)), 1000);
      }
    });
    events.addEventListener('execution', (m) => {
      const e = JSON.parse(m.data);
      state.executions.set(e.id, e);
      renderExecutions();
      if (e.id === state.selected) detailSoon();
    });
    events.addEventListener('denial', (m) => {
      state.denials.unshift(JSON.parse(m.data));
      state.denials.length = Math.min(state.denials.length, 500);
      renderDenials();
    });
    events.addEventListener('totals', (m) => {
      addTotalsPoint(JSON.parse(m.data));
      // What the inspector keeps moves on too.
      api('/status').then((s) => { state.status = s; renderStatus(); }, () => {});
    });
    events.addEventListener('resync', () => loadAll().catch(() => {}));
  }

  function showTab(name) {
    for (const b of document.querySelectorAll('nav button')) b.classList.toggle('active', b.dataset.tab === name);
    for (const t of document.querySelectorAll('.tab')) t.hidden = t.id !== `tab-${name}`;
  }

  document.addEventListener('DOMContentLoaded', () => {
    for (const b of document.querySelectorAll('nav button')) b.addEventListener('click', () => showTab(b.dataset.tab));
    const form = document.getElementById('dryrun');
    form.addEventListener('submit', dryRun);
    form.body.value = JSON.stringify(EXAMPLES.chat, null, 2);
    for (const b of document.querySelectorAll('[data-example]')) {
      b.addEventListener('click', () => {
        form.body.value = JSON.stringify(EXAMPLES[b.dataset.example], null, 2);
        form.dialect.value = '';
      });
    }
    const m = /^#execution=(\d+)$/.exec(location.hash);
    if (m) state.selected = m[1];
    connect();
    // The running programs' durations move on.
    setInterval(() => { if ([...state.executions.values()].some((e) => !e.ended_at_ms)) renderExecutions(); }, 1000);
  });
})();
