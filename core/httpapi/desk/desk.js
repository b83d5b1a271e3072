// The front desk page: shows each ringing call of this desk's locations as it rings, today's
// calls with each call's timeline (Calls), and the callers to ring back (To call back).
//
// It reads GET /api/v1/popups/stream with fetch() and a streamed response body rather than
// EventSource, because EventSource cannot send the key in request headers, and a secret in a URL
// ends up in access logs. The key is entered once and kept in this browser's localStorage.
'use strict';

(() => {
  const STREAM = '/api/v1/popups/stream';
  const CALLS = '/api/v1/calls';
  const CALLBACKS = '/api/v1/callbacks';
  const SCOPE_CALLS_READ = 'org.calls.read';
  const SCOPE_CALLBACKS_WRITE = 'org.callbacks.write';
  const STORAGE_KEY = 'callwire.desk';
  const TO_HISTORY_MS = 60 * 1000;
  const MAX_HISTORY = 50;
  const MAX_BACKOFF_MS = 30 * 1000;
  const LOCATION = /^[a-z0-9][a-z0-9_-]{0,63}$/;

  const $ = (id) => document.getElementById(id);
  const timeFormat = new Intl.DateTimeFormat(undefined, {
    hour: '2-digit', minute: '2-digit', second: '2-digit', hourCycle: 'h23',
  });

  let settings = load();
  let controller = null;
  let retryTimer = 0;
  let watchdog = 0;
  let backoff = 0;
  let retryHint = 3000;
  let heartbeatMs = 15000;
  const seen = new Map(); // popup id -> time it arrived
  // lastEventId is the id of the last event read, sent back as Last-Event-ID on reconnect, as
  // EventSource would: the server then leaves that popup out of the calls ringing it replays.
  let lastEventId = '';

  // ---- settings ------------------------------------------------------------------------------

  function load() {
    try {
      const s = JSON.parse(localStorage.getItem(STORAGE_KEY) || '{}');
      return {
        clientId: typeof s.clientId === 'string' ? s.clientId : '',
        secret: typeof s.secret === 'string' ? s.secret : '',
        locations: Array.isArray(s.locations) && s.locations.length ? s.locations : ['main'],
      };
    } catch {
      return { clientId: '', secret: '', locations: ['main'] };
    }
  }

  function store(s) {
    localStorage.setItem(STORAGE_KEY, JSON.stringify(s));
  }

  function parseLocations(text) {
    const out = [];
    for (const part of text.split(',')) {
      const l = part.trim().toLowerCase();
      if (l === '') continue;
      if (!LOCATION.test(l)) return { error: `"${l}" is not a location name: use a-z, 0-9, "_" and "-".` };
      if (!out.includes(l)) out.push(l);
    }
    if (out.length > 32) return { error: 'At most 32 locations.' };
    return { locations: out.length ? out : ['main'] };
  }

  function openSettings(message) {
    $('client-id').value = settings.clientId;
    $('client-secret').value = settings.secret;
    $('locations').value = settings.locations.join(', ');
    showSettingsError(message);
    const d = $('settings');
    if (!d.open) d.showModal();
    (settings.clientId ? $('client-secret') : $('client-id')).focus();
  }

  function showSettingsError(message) {
    const e = $('settings-error');
    e.textContent = message || '';
    e.hidden = !message;
  }

  $('settings-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const clientId = $('client-id').value.trim();
    const secret = $('client-secret').value.trim();
    const parsed = parseLocations($('locations').value);
    if (!clientId || !secret) return showSettingsError('Enter both the Client ID and the Client secret.');
    if (parsed.error) return showSettingsError(parsed.error);
    settings = { clientId, secret, locations: parsed.locations };
    store(settings);
    $('settings').close();
    showWhere();
    connect();
    resetViews();
  });
  $('cancel').addEventListener('click', () => $('settings').close());
  $('forget').addEventListener('click', () => {
    localStorage.removeItem(STORAGE_KEY);
    settings = load();
    disconnect();
    setStatus('idle', 'Not set up');
    resetViews();
    openSettings();
  });
  $('open-settings').addEventListener('click', () => openSettings());

  // ---- connection ----------------------------------------------------------------------------

  function setStatus(state, text, detail) {
    const s = $('status');
    s.dataset.state = state;
    s.title = detail || '';
    $('status-text').textContent = text;
  }

  function showWhere() {
    $('where').textContent = settings.locations.join(', ');
  }

  function disconnect() {
    clearTimeout(retryTimer);
    clearTimeout(watchdog);
    if (controller) controller.abort();
    controller = null;
  }

  // retry schedules the next connection: the server's retry hint, doubled on each failure in a
  // row up to 30 seconds, with jitter so that a clinic's desks do not reconnect in step.
  function retry(reason, afterMs) {
    disconnect();
    backoff = backoff ? Math.min(backoff * 2, MAX_BACKOFF_MS) : retryHint;
    const wait = Math.max(afterMs || 0, backoff) * (0.8 + Math.random() * 0.4);
    const secs = Math.max(1, Math.round(wait / 1000));
    setStatus('reconnecting', `Reconnecting in ${secs}s`, reason);
    retryTimer = setTimeout(connect, wait);
  }

  // alive restarts the watchdog: a stream that sends nothing for two heartbeats is dead even if
  // the connection has not said so (a laptop lid closed, a proxy that dropped it).
  function alive(ctl) {
    clearTimeout(watchdog);
    watchdog = setTimeout(() => {
      if (controller === ctl) retry('No heartbeat from the server');
    }, heartbeatMs * 2 + 5000);
  }

  async function connect() {
    disconnect();
    if (!settings.clientId || !settings.secret) {
      setStatus('idle', 'Not set up');
      openSettings();
      return;
    }
    const ctl = new AbortController();
    controller = ctl;
    setStatus('connecting', 'Connecting…');
    let res;
    try {
      res = await fetch(`${STREAM}?locations=${encodeURIComponent(settings.locations.join(','))}`, {
        headers: {
          'Client-ID': settings.clientId, 'Client-Secret': settings.secret, Accept: 'text/event-stream',
          ...(lastEventId ? { 'Last-Event-ID': lastEventId } : {}),
        },
        cache: 'no-store',
        credentials: 'omit',
        signal: ctl.signal,
      });
    } catch (e) {
      if (controller === ctl) retry('Cannot reach the server');
      return;
    }
    if (!res.ok) {
      let message = `The server answered ${res.status}.`;
      try {
        const body = await res.json();
        if (body && body.message) message = body.message;
      } catch { /* not JSON */ }
      if (controller !== ctl) return;
      if (res.status === 401 || res.status === 403 || res.status === 400) {
        disconnect();
        setStatus('refused', res.status === 400 ? 'Check locations' : 'Key refused', message);
        openSettings(res.status === 400 ? message : `The key was refused: ${message}`);
        return;
      }
      retry(message, Number(res.headers.get('Retry-After')) * 1000);
      return;
    }
    alive(ctl);
    try {
      await read(res.body, ctl);
    } catch {
      /* the connection broke; reconnect below */
    }
    if (controller === ctl) retry('The connection ended');
  }

  // read parses the event stream (https://html.spec.whatwg.org/multipage/server-sent-events.html)
  // from the response body until it ends.
  async function read(body, ctl) {
    const reader = body.getReader();
    const decoder = new TextDecoder();
    let buffer = '';
    let ev = { type: '', data: [], id: '' };
    for (;;) {
      const { value, done } = await reader.read();
      if (done || controller !== ctl) return;
      alive(ctl);
      buffer += decoder.decode(value, { stream: true });
      let nl;
      while ((nl = buffer.search(/\r\n|\r|\n/)) >= 0) {
        if (buffer[nl] === '\r' && nl + 1 === buffer.length) break; // a CRLF may be split
        const line = buffer.slice(0, nl);
        buffer = buffer.slice(nl + (buffer.startsWith('\r\n', nl) ? 2 : 1));
        if (line === '') {
          if (ev.id) lastEventId = ev.id;
          if (ev.data.length) dispatch(ev.type || 'message', ev.data.join('\n'), ctl);
          ev = { type: '', data: [], id: '' };
          if (controller !== ctl) return;
          continue;
        }
        if (line.startsWith(':')) continue; // a comment: the heartbeat
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        let val = colon < 0 ? '' : line.slice(colon + 1);
        if (val.startsWith(' ')) val = val.slice(1);
        if (field === 'event') ev.type = val;
        else if (field === 'data') ev.data.push(val);
        else if (field === 'id') ev.id = val;
        else if (field === 'retry' && /^\d+$/.test(val)) retryHint = Number(val);
      }
    }
  }

  function dispatch(type, data, ctl) {
    let msg;
    try {
      msg = JSON.parse(data);
    } catch {
      return;
    }
    switch (type) {
      case 'ready':
        backoff = 0;
        if (msg.heartbeatMs > 0) heartbeatMs = msg.heartbeatMs;
        if (Array.isArray(msg.scopes)) setScopes(msg.scopes);
        alive(ctl);
        setStatus('connected', 'Connected', `Listening for calls to ${settings.locations.join(', ')}`);
        // The server sends the popups of the calls ringing now next (showPopup drops those
        // shown already); the lists are read afresh.
        if (readsCalls() || view === 'callbacks') scheduleCallbacks(0);
        if (view === 'calls') scheduleCalls(0);
        break;
      case 'popup':
        showPopup(msg);
        if (view === 'calls') scheduleCalls(1500);
        break;
      case 'callbacks':
        scheduleCallbacks(CALLBACKS_GATHER_MS);
        if (view === 'calls') scheduleCalls(1000);
        break;
      case 'error':
        disconnect();
        setStatus('refused', 'Key refused', msg.message);
        openSettings(`The server ended the connection: ${msg.message || 'the key was refused'}`);
        break;
    }
  }

  // ---- calls ---------------------------------------------------------------------------------

  // formatNumber spaces an E.164 number for reading aloud: +44 20 7123 4567.
  function formatNumber(n) {
    if (!/^\+[1-9]\d{2,14}$/.test(n)) return n;
    const d = n.slice(1);
    const two = ['20', '27', '30', '31', '32', '33', '34', '36', '39', '40', '41', '43', '44', '45', '46',
      '47', '48', '49', '51', '52', '53', '54', '55', '56', '57', '58', '60', '61', '62', '63', '64', '65',
      '66', '81', '82', '84', '86', '90', '91', '92', '93', '94', '95', '98'];
    let cc = d.slice(0, 3);
    if (d[0] === '1' || d[0] === '7') cc = d[0];
    else if (two.includes(d.slice(0, 2))) cc = d.slice(0, 2);
    const rest = d.slice(cc.length);
    let groups;
    if (cc === '44' && rest.length === 10) {
      groups = rest[0] === '2' ? [rest.slice(0, 2), rest.slice(2, 6), rest.slice(6)] : [rest.slice(0, 4), rest.slice(4)];
    } else if (cc === '1' && rest.length === 10) {
      groups = [rest.slice(0, 3), rest.slice(3, 6), rest.slice(6)];
    } else {
      groups = [];
      let i = 0;
      while (rest.length - i > 4) {
        groups.push(rest.slice(i, i + 3));
        i += 3;
      }
      groups.push(rest.slice(i));
    }
    return `+${cc} ${groups.join(' ')}`;
  }

  function partyLabel(p) {
    if (!p) return '';
    if (p.kind === 'anonymous') return 'Withheld number';
    if (p.number) return formatNumber(p.number);
    if (p.extension) return `Extension ${p.extension}`;
    return p.name || '';
  }

  // describe says who is calling: the one matched client's name, else the name the phone network
  // gave, else the number. A withheld number says so.
  function describe(p) {
    const from = p.from || {};
    const clients = Array.isArray(p.clients) ? p.clients : [];
    const number = from.number ? formatNumber(from.number) : '';
    if (from.kind === 'anonymous') return { caller: 'Withheld number', number: 'The caller hid their number', anonymous: true };
    if (clients.length === 1 && clients[0].name) return { caller: clients[0].name, number };
    if (from.name) return { caller: from.name, number };
    if (number) return { caller: number, number: '' };
    if (from.extension) return { caller: `Extension ${from.extension}`, number: '' };
    return { caller: 'Unknown caller', number: '', anonymous: true };
  }

  function lookupNote(p) {
    switch (p.lookup) {
      case 'no_match': return 'Not in your client list';
      case 'failed': return 'Client list did not answer';
      case 'skipped': return p.from && p.from.kind === 'anonymous' ? 'No number to look up' : '';
      default: return '';
    }
  }

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function when(p) {
    const t = new Date(p.occurredAt || p.publishedAt);
    return timeFormat.format(Number.isNaN(t.getTime()) ? new Date() : t);
  }

  function showPopup(p) {
    if (!p || typeof p !== 'object') return;
    if (p.id && seen.has(p.id)) return; // a repeat of a ringing already shown
    if (p.id) seen.set(p.id, Date.now());
    const who = describe(p);
    const clients = Array.isArray(p.clients) ? p.clients : [];
    const card = $('card-template').content.firstElementChild.cloneNode(true);
    if (who.anonymous) card.classList.add('anonymous');
    card.querySelector('.caller').textContent = who.caller;
    card.querySelector('.number').textContent = who.number;
    card.querySelector('.time').textContent = when(p);

    const box = card.querySelector('.clients');
    if (clients.length) {
      box.append(el('span', 'label', clients.length === 1 ? 'Matched client' : `${clients.length} matching clients`));
      for (const c of clients) {
        const chip = el('span', 'client', c.name || 'Unnamed');
        if (c.externalId) chip.append(el('span', 'ref', c.externalId));
        box.append(chip);
      }
    } else {
      const note = lookupNote(p);
      if (note) box.append(el('span', 'note', note));
    }
    const meta = card.querySelector('.meta');
    const to = partyLabel(p.to);
    if (to) meta.append(el('span', '', `To ${to}`));
    for (const l of p.locations || []) meta.append(el('span', 'tag', l));

    $('ringing').prepend(card);
    refreshEmpty();
    ringTitle(who.caller);
    setTimeout(() => toHistory(card, p, who, clients), TO_HISTORY_MS);
  }

  function toHistory(card, p, who, clients) {
    card.classList.add('leaving');
    refreshStrip();
    setTimeout(() => {
      card.remove();
      const row = el('li');
      row.append(el('span', 'h-time', when(p)), el('span', 'h-caller', who.caller),
        el('span', 'h-number', who.anonymous ? '' : who.number || ''),
        el('span', 'h-clients', clients.map((c) => c.name).filter(Boolean).join(', ') || lookupNote(p)));
      const list = $('history');
      list.prepend(row);
      while (list.children.length > MAX_HISTORY) list.lastElementChild.remove();
      refreshEmpty();
      ringTitle();
    }, 800);
    for (const [id, t] of seen) if (Date.now() - t > 10 * TO_HISTORY_MS) seen.delete(id);
  }

  function refreshEmpty() {
    $('ringing-empty').hidden = $('ringing').children.length > 0;
    $('history-empty').hidden = $('history').children.length > 0;
    refreshStrip();
  }

  // ringTitle names the newest ringing caller in the tab title, so a desk in a background tab
  // still shows who is calling.
  function ringTitle(caller) {
    const first = $('ringing').querySelector('.caller');
    const name = caller || (first && first.textContent);
    document.title = name ? `☎ ${name} · Front desk` : 'Front desk';
  }

  // tick shows the time, and runs again just after the next second begins.
  function tick() {
    $('clock').textContent = timeFormat.format(new Date());
    setTimeout(tick, 1005 - (Date.now() % 1000));
  }

  // ---- the call history: Calls and To call back ---------------------------------------------
  //
  // Both views read the history API with the desk's key (GET /api/v1/calls, /api/v1/calls/{id},
  // /api/v1/callbacks), which takes org.calls.read; dismissing takes org.callbacks.write. The
  // stream's "callbacks" event says the list may have changed; bursts are gathered into one read.

  const CALLBACKS_GATHER_MS = 150;
  const CALLS_PAGE = 100;
  const CALLBACKS_PAGE = 200;
  const VIEWS = ['ringing', 'calls', 'callbacks'];

  let view = 'ringing';
  let scopes = null; // the key's scopes, from the stream's ready event; null until known
  let orgZone = '';  // the organization's time zone, from the calls page; '' until known
  let callsNext = null;
  let callsSeq = 0;
  let callsTimer = 0;
  let openCallId = '';
  let callbacksTimer = 0;
  let callbacksBusy = false;
  let callbacksAgain = false;
  let callbacksSeq = 0;
  let callbacksItems = [];
  let callbacksNext = null;

  function viewFromHash() {
    const v = location.hash.replace(/^#/, '');
    return VIEWS.includes(v) ? v : 'ringing';
  }

  function showView(v, push) {
    view = v;
    for (const name of VIEWS) {
      $(`view-${name}`).hidden = name !== v;
      const tab = $(`tab-${name}`);
      if (name === v) tab.setAttribute('aria-current', 'page');
      else tab.removeAttribute('aria-current');
    }
    if (push !== false) history.replaceState(null, '', v === 'ringing' ? location.pathname : `#${v}`);
    refreshStrip();
    if (v === 'calls') scheduleCalls(0);
    if (v === 'callbacks') scheduleCallbacks(0);
  }

  for (const name of VIEWS) $(`tab-${name}`).addEventListener('click', () => showView(name));
  window.addEventListener('hashchange', () => showView(viewFromHash(), false));
  $('ringing-strip').addEventListener('click', () => showView('ringing'));

  // refreshStrip names the ringing callers above the other views, so that a desk reading its
  // history still sees who is calling.
  function refreshStrip() {
    const cards = [...$('ringing').querySelectorAll('.card:not(.leaving) .caller')];
    const n = cards.length;
    const count = $('ringing-count');
    count.textContent = String(n);
    count.hidden = n === 0;
    $('tab-ringing').classList.toggle('alerting', n > 0);
    const strip = $('ringing-strip');
    strip.hidden = n === 0 || view === 'ringing';
    if (n > 0) {
      const first = cards[0].textContent;
      $('ringing-strip-text').textContent = n === 1 ? `Ringing: ${first}` : `Ringing: ${first} and ${n - 1} more`;
    }
  }

  function setScopes(list) {
    scopes = list.filter((x) => typeof x === 'string');
    renderCallbacks();
  }

  function readsCalls() {
    return Array.isArray(scopes) && scopes.includes(SCOPE_CALLS_READ);
  }

  function canDismiss() {
    return Array.isArray(scopes) && scopes.includes(SCOPE_CALLBACKS_WRITE);
  }

  // resetViews forgets what the previous key read.
  function resetViews() {
    scopes = null;
    orgZone = '';
    openCallId = '';
    callsNext = null;
    $('calls-list').replaceChildren();
    $('calls-day').textContent = '';
    $('call-detail').hidden = true;
    $('view-calls').classList.remove('with-detail');
    callbacksItems = [];
    callbacksNext = null;
    showNotice('callbacks-message', '');
    renderCallbacks();
    if (view === 'callbacks') scheduleCallbacks(0);
    if (view === 'calls') scheduleCalls(0);
  }

  // api sends a request with the desk's key and returns {status, body, retryAfter}; status 0
  // when the server could not be reached.
  async function api(path, method) {
    let res;
    try {
      res = await fetch(path, {
        method: method || 'GET',
        headers: { 'Client-ID': settings.clientId, 'Client-Secret': settings.secret, Accept: 'application/json' },
        cache: 'no-store',
        credentials: 'omit',
      });
    } catch {
      return { status: 0, body: null };
    }
    let body = null;
    try {
      body = await res.json();
    } catch { /* not JSON */ }
    return { status: res.status, body, retryAfter: Number(res.headers.get('Retry-After')) || 0 };
  }

  // refusal turns a failed answer into the sentence the page shows instead of the view, and
  // says whether the view must give way to it (the key may not read it at all).
  function refusal(r, what) {
    const message = r.body && typeof r.body.message === 'string' ? r.body.message : '';
    const missing = r.body && Array.isArray(r.body.missingScopes) ? r.body.missingScopes : [];
    switch (r.status) {
      case 0: return { text: 'Cannot reach the server. Trying again when the desk reconnects.' };
      case 401: return { text: `The key was refused: ${message || 'check it under Settings'}.`, blocks: true };
      case 403:
        if (missing.includes(SCOPE_CALLBACKS_WRITE)) {
          return { text: 'This desk\u2019s key cannot dismiss callers: that needs the scope org.callbacks.write. Ask your clinic administrator for a key that has it.' };
        }
        return {
          text: `This desk\u2019s key cannot read ${what}: that needs the scope org.calls.read, besides org.popups.read for the popups. ` +
            'Ask your clinic administrator for a key that has it, and enter it under Settings.',
          blocks: true,
        };
      case 501: return { text: 'This server keeps no to-call-back list yet.', blocks: true };
      case 503: return { text: 'The call history is unavailable for a moment; trying again shortly.' };
      default: return { text: message || `The server answered ${r.status}.` };
    }
  }

  function showNotice(id, text, kind) {
    const n = $(id);
    n.textContent = text || '';
    n.hidden = !text;
    n.dataset.kind = kind || 'info';
  }

  // ---- time, in the organization's zone ----

  const formats = new Map();
  function format(opts) {
    const key = orgZone + JSON.stringify(opts);
    let f = formats.get(key);
    if (!f) {
      try {
        f = new Intl.DateTimeFormat(undefined, orgZone ? { ...opts, timeZone: orgZone } : opts);
      } catch {
        f = new Intl.DateTimeFormat(undefined, opts); // a zone this browser does not know
      }
      formats.set(key, f);
    }
    return f;
  }

  // dayOf is the date of t in the organization's zone, as YYYY-MM-DD.
  function dayOf(t) {
    let parts;
    try {
      parts = new Intl.DateTimeFormat('en-CA', { timeZone: orgZone || undefined, year: 'numeric', month: '2-digit', day: '2-digit' }).formatToParts(t);
    } catch {
      parts = new Intl.DateTimeFormat('en-CA', { year: 'numeric', month: '2-digit', day: '2-digit' }).formatToParts(t);
    }
    const get = (type) => (parts.find((p) => p.type === type) || {}).value;
    return `${get('year')}-${get('month')}-${get('day')}`;
  }

  function parseTime(v) {
    const t = new Date(v);
    return typeof v === 'string' && !Number.isNaN(t.getTime()) ? t : null;
  }

  function clock(v, seconds) {
    const t = parseTime(v);
    if (!t) return '';
    return format(seconds ? { hour: '2-digit', minute: '2-digit', second: '2-digit', hourCycle: 'h23' }
      : { hour: '2-digit', minute: '2-digit', hourCycle: 'h23' }).format(t);
  }

  // brief says a time briefly: the clock today, else the day and the clock.
  function brief(v) {
    const t = parseTime(v);
    if (!t) return '';
    if (dayOf(t) === dayOf(new Date())) return clock(v);
    return format({ weekday: 'short', day: 'numeric', month: 'short', hour: '2-digit', minute: '2-digit', hourCycle: 'h23' }).format(t);
  }

  function seconds(n) {
    if (typeof n !== 'number' || !Number.isFinite(n) || n < 0) return '';
    const s = Math.round(n);
    const h = Math.floor(s / 3600);
    const m = Math.floor((s % 3600) / 60);
    const pad = (x) => String(x).padStart(2, '0');
    return h ? `${h}:${pad(m)}:${pad(s % 60)}` : `${m}:${pad(s % 60)}`;
  }

  // renderRows shows items in list, one row each from make, and leaves the rows as they are when
  // the items (and extra) have not changed: a list read again after a notice then does not
  // move a row, or a button, from under the receptionist's pointer.
  function renderRows(list, items, make, extra) {
    const key = JSON.stringify([orgZone, extra === undefined ? null : extra, items]);
    if (list.dataset.key === key && list.children.length === items.length) return;
    list.dataset.key = key;
    list.replaceChildren(...items.map((it) => make(it)));
  }

  // ---- Calls ----

  const OUTCOMES = {
    answered: 'Answered', missed: 'Missed', voicemail: 'Voicemail', not_answered: 'Not answered', in_progress: 'In progress',
  };
  const DIRECTIONS = { inbound: 'In', outbound: 'Out', internal: 'Internal' };

  function scheduleCalls(delay) {
    clearTimeout(callsTimer);
    callsTimer = setTimeout(() => loadCalls(false), delay);
  }

  for (const id of ['filter-direction', 'filter-outcome']) $(id).addEventListener('change', () => scheduleCalls(0));
  $('filter-number').addEventListener('input', () => scheduleCalls(400));
  $('filter-number').addEventListener('keydown', (ev) => {
    if (ev.key === 'Enter') scheduleCalls(0);
  });
  $('calls-refresh').addEventListener('click', () => scheduleCalls(0));
  $('calls-more').addEventListener('click', () => loadCalls(true));
  $('detail-close').addEventListener('click', closeCall);

  function callsQuery(day, cursor) {
    const q = new URLSearchParams({ from: day, until: day, limit: String(CALLS_PAGE) });
    const dir = $('filter-direction').value;
    const outcome = $('filter-outcome').value;
    const number = $('filter-number').value.trim();
    if (dir) q.set('direction', dir);
    if (outcome) q.set('outcome', outcome);
    if (number) q.set('number', number);
    if (cursor) q.set('cursor', cursor);
    return q;
  }

  async function loadCalls(more) {
    if (!settings.clientId || !settings.secret) return;
    if (more && !callsNext) return;
    const seq = ++callsSeq;
    const day = dayOf(new Date());
    const r = await api(`${CALLS}?${callsQuery(day, more ? callsNext : '')}`);
    if (seq !== callsSeq) return; // a newer read was started meanwhile
    if (r.status !== 200 || !r.body || !Array.isArray(r.body.items)) {
      const why = refusal(r, 'the call history');
      showNotice('calls-message', why.text, why.blocks ? 'blocked' : 'error');
      $('calls-filters').hidden = !!why.blocks;
      $('calls-body').hidden = !!why.blocks;
      if (why.blocks) {
        closeCall();
        $('calls-day').textContent = '';
      }
      if (r.status === 503) scheduleCalls(Math.max(r.retryAfter * 1000, 3000));
      return;
    }
    const zone = typeof r.body.timeZone === 'string' ? r.body.timeZone : '';
    if (zone !== orgZone) {
      orgZone = zone;
      formats.clear();
      // "Today" is the organization's: ask again when its date is not the browser's.
      if (dayOf(new Date()) !== day) return loadCalls(false);
    }
    showNotice('calls-message', '');
    $('calls-filters').hidden = false;
    $('calls-body').hidden = false;
    const t = new Date();
    $('calls-day').textContent = `${format({ weekday: 'long', day: 'numeric', month: 'long' }).format(t)} \u00b7 times in ${orgZone || 'UTC'}`;
    const list = $('calls-list');
    const items = r.body.items.filter((c) => c && typeof c === 'object');
    if (more) {
      for (const c of items) list.append(callRow(c));
    } else {
      renderRows(list, items, callRow);
    }
    callsNext = typeof r.body.next === 'string' ? r.body.next : null;
    $('calls-more').hidden = !callsNext;
    $('calls-empty').hidden = list.children.length > 0;
  }

  // otherParty is the party a front desk names a call by: the caller of an inbound call, the
  // number dialled of an outbound one.
  function otherParty(c) {
    return c.direction === 'outbound' ? c.to : c.from;
  }

  function partyName(p, clients) {
    const cs = Array.isArray(clients) ? clients : [];
    if (p && p.kind === 'anonymous') return 'Withheld number';
    if (cs.length === 1 && cs[0] && cs[0].name) return String(cs[0].name);
    if (p && p.name) return String(p.name);
    return partyLabel(p) || 'Unknown';
  }

  function callRow(c) {
    const row = el('li', 'row call');
    row.tabIndex = 0;
    row.setAttribute('role', 'button');
    row.dataset.id = String(c.id || '');
    if (row.dataset.id === openCallId) row.classList.add('selected');
    const p = otherParty(c) || null;
    const name = partyName(p, c.crmClients);
    const number = p && p.number ? formatNumber(String(p.number)) : '';
    const dir = el('span', `dir dir-${DIRECTIONS[c.direction] ? c.direction : 'unknown'}`, DIRECTIONS[c.direction] || String(c.direction || ''));
    const who = el('div', 'who');
    who.append(el('p', 'row-title', name));
    const sub = [];
    if (number && number !== name) sub.push(number);
    if (c.direction === 'inbound' && c.to) sub.push(`to ${partyLabel(c.to)}`);
    if (c.direction !== 'inbound' && c.from) sub.push(`from ${partyLabel(c.from)}`);
    who.append(el('p', 'row-sub', sub.join(' \u00b7 ')));
    const outcome = OUTCOMES[c.outcome] ? c.outcome : 'unknown';
    const facts = el('div', 'row-facts');
    facts.append(el('span', `outcome outcome-${outcome}`, OUTCOMES[c.outcome] || String(c.outcome || '')));
    const len = c.outcome === 'answered' && typeof c.talkTime === 'number' ? seconds(c.talkTime) : seconds(c.duration);
    const extra = [];
    if (len) extra.push(len);
    if (c.answeredBy) extra.push(`by ${c.answeredBy}`);
    facts.append(el('span', 'row-extra', extra.join(' \u00b7 ')));
    if (Array.isArray(c.recordings) && c.recordings.length) facts.append(el('span', 'rec', 'Recording'));
    row.append(el('span', 'row-time', clock(c.startedAt)), dir, who, facts);
    const open = () => openCall(row.dataset.id);
    row.addEventListener('click', open);
    row.addEventListener('keydown', (ev) => {
      if (ev.key === 'Enter' || ev.key === ' ') {
        ev.preventDefault();
        open();
      }
    });
    return row;
  }

  function closeCall() {
    openCallId = '';
    $('call-detail').hidden = true;
    $('view-calls').classList.remove('with-detail');
    for (const r of $('calls-list').querySelectorAll('.selected')) r.classList.remove('selected');
  }

  async function openCall(id) {
    if (!id) return;
    openCallId = id;
    for (const r of $('calls-list').children) r.classList.toggle('selected', r.dataset.id === id);
    const r = await api(`${CALLS}/${encodeURIComponent(id)}`);
    if (openCallId !== id) return;
    if (r.status !== 200 || !r.body) {
      const why = refusal(r, 'the call history');
      showNotice('calls-message', r.status === 404 ? 'That call is no longer in the history.' : why.text, 'error');
      return;
    }
    showCall(r.body);
  }

  function fact(dl, term, value) {
    if (!value) return;
    dl.append(el('dt', '', term), el('dd', '', value));
  }

  function showCall(c) {
    const p = otherParty(c) || null;
    const name = partyName(p, c.crmClients);
    $('detail-title').textContent = name;
    const dirWord = { inbound: 'Inbound call', outbound: 'Outbound call', internal: 'Internal call' }[c.direction] || 'Call';
    $('detail-sub').textContent = `${dirWord} \u00b7 ${OUTCOMES[c.outcome] || String(c.outcome || '')} \u00b7 ${brief(c.startedAt)}`;
    const dl = $('detail-facts');
    dl.replaceChildren();
    fact(dl, 'From', partyLabel(c.from));
    fact(dl, 'To', partyLabel(c.to));
    fact(dl, 'Started', clock(c.startedAt, true));
    fact(dl, 'Answered', c.answeredAt ? `${clock(c.answeredAt, true)}${c.answeredBy ? ` by ${c.answeredBy}` : ''}` : '');
    fact(dl, 'Ended', clock(c.endedAt, true));
    fact(dl, 'Duration', seconds(c.duration));
    fact(dl, 'Talk time', seconds(c.talkTime));
    fact(dl, 'Ended as', c.disposition ? String(c.disposition).replace(/_/g, ' ') : '');
    fact(dl, 'SIP', c.sipCode ? `${c.sipCode}${c.sipReason ? ` ${c.sipReason}` : ''}` : '');
    const clients = Array.isArray(c.crmClients) ? c.crmClients.filter((x) => x && x.name) : [];
    fact(dl, 'Clients', clients.map((x) => (x.externalId ? `${x.name} (${x.externalId})` : x.name)).join(', '));
    fact(dl, 'Locations', Array.isArray(c.locations) ? c.locations.join(', ') : '');
    fact(dl, 'Reported by', c.provider ? String(c.provider) : '');

    const recs = $('detail-recordings');
    recs.replaceChildren();
    for (const rec of Array.isArray(c.recordings) ? c.recordings : []) {
      const box = el('figure', 'recording');
      const caption = ['Recording'];
      if (typeof rec.duration === 'number') caption.push(seconds(rec.duration));
      if (rec.mimeType) caption.push(String(rec.mimeType));
      box.append(el('figcaption', '', caption.join(' \u00b7 ')));
      let url = null;
      try {
        url = new URL(String(rec.url));
      } catch { /* not a URL */ }
      if (url && (url.protocol === 'https:' || url.protocol === 'http:')) {
        const audio = document.createElement('audio');
        audio.controls = true;
        audio.preload = 'none';
        audio.src = url.href;
        box.append(audio);
      } else {
        box.append(el('p', 'hint', 'This recording has no address the page can play.'));
      }
      recs.append(box);
    }

    const tl = $('detail-timeline');
    tl.replaceChildren();
    for (const e of Array.isArray(c.events) ? c.events : []) {
      if (e && typeof e === 'object') tl.append(timelineEntry(e));
    }
    $('call-detail').hidden = false;
    $('view-calls').classList.add('with-detail');
  }

  const EVENT_NAMES = {
    call_received: 'Rang', call_placed: 'Dialled', call_missed: 'Missed', call_answered: 'Answered',
    call_ended: 'Ended', call_hold: 'On hold', call_transferred: 'Transferred', call_recorded: 'Recorded',
    call_transcribed: 'Transcribed',
  };

  function eventDetail(e) {
    const out = [];
    switch (e.type) {
      case 'call_received':
      case 'call_placed':
        if (e.call && e.call.from) out.push(`from ${partyLabel(e.call.from)}`);
        if (e.call && e.call.to) out.push(`to ${partyLabel(e.call.to)}`);
        break;
      case 'call_answered':
        if (e.answeredBy) out.push(`by ${e.answeredBy}`);
        break;
      case 'call_ended':
        if (e.disposition) out.push(String(e.disposition).replace(/_/g, ' '));
        if (typeof e.talkTime === 'number') out.push(`talk ${seconds(e.talkTime)}`);
        if (typeof e.duration === 'number') out.push(`total ${seconds(e.duration)}`);
        if (e.answeredElsewhere) out.push('answered elsewhere');
        if (e.sipCode) out.push(`SIP ${e.sipCode}${e.sipReason ? ` ${e.sipReason}` : ''}`);
        break;
      case 'call_hold':
        out.push(e.released ? 'taken off hold' : 'put on hold');
        break;
      case 'call_transferred':
        if (e.to) out.push(`to ${partyLabel(e.to)}`);
        if (e.mode) out.push(String(e.mode));
        break;
      case 'call_recorded':
        if (typeof e.duration === 'number') out.push(seconds(e.duration));
        break;
      case 'call_transcribed':
        if (e.language) out.push(String(e.language));
        break;
    }
    return out.join(' \u00b7 ');
  }

  function timelineEntry(e) {
    const li = el('li', `tl tl-${EVENT_NAMES[e.type] ? e.type : 'other'}`);
    li.append(el('span', 'tl-time', clock(e.occurredAt, true)));
    const body = el('div', 'tl-body');
    const head = el('p', 'tl-head');
    head.append(el('strong', '', EVENT_NAMES[e.type] || String(e.type || 'Event')));
    const detail = eventDetail(e);
    if (detail) head.append(el('span', 'tl-detail', ` ${detail}`));
    body.append(head);
    if (e.type === 'call_transcribed' && e.text) body.append(el('p', 'tl-text', String(e.text)));
    const meta = [String(e.type || '')];
    if (e.provider) meta.push(String(e.provider));
    if (typeof e.sequence === 'number' && e.sequence) meta.push(`sequence ${e.sequence}`);
    if (e.receivedAt) meta.push(`received ${clock(e.receivedAt, true)}`);
    if (e.dedupeKey) meta.push(`key ${e.dedupeKey}`);
    if (e.providerEventId) meta.push(`event ${e.providerEventId}`);
    body.append(el('p', 'tl-meta', meta.join(' \u00b7 ')));
    li.append(body);
    return li;
  }

  // ---- To call back ----

  // scheduleCallbacks reads the list after delay, once for however many asks come meanwhile;
  // an ask during a read reads once more after it.
  function scheduleCallbacks(delay) {
    if (callbacksTimer) {
      if (delay > 0) return;
      clearTimeout(callbacksTimer);
    }
    callbacksTimer = setTimeout(() => {
      callbacksTimer = 0;
      loadCallbacks(false);
    }, delay);
  }

  $('callbacks-more').addEventListener('click', () => loadCallbacks(true));

  async function loadCallbacks(more) {
    if (!settings.clientId || !settings.secret) return;
    if (callbacksBusy) {
      callbacksAgain = true;
      return;
    }
    callbacksBusy = true;
    const seq = ++callbacksSeq;
    try {
      const q = new URLSearchParams({ state: 'open', limit: String(CALLBACKS_PAGE) });
      if (more && callbacksNext) q.set('cursor', callbacksNext);
      const r = await api(`${CALLBACKS}?${q}`);
      if (seq !== callbacksSeq) return;
      if (r.status !== 200 || !r.body || !Array.isArray(r.body.items)) {
        const why = refusal(r, 'the to-call-back list');
        showNotice('callbacks-message', why.text, why.blocks ? 'blocked' : 'error');
        $('callbacks-list').hidden = !!why.blocks;
        $('callbacks-empty').hidden = true;
        $('callbacks-more').hidden = true;
        if (why.blocks) {
          callbacksItems = [];
          setCallbacksCount(null);
        }
        if (r.status === 503) setTimeout(() => scheduleCallbacks(0), Math.max(r.retryAfter * 1000, 3000));
        return;
      }
      showNotice('callbacks-message', '');
      $('callbacks-list').hidden = false;
      const items = r.body.items.filter((x) => x && typeof x === 'object');
      callbacksItems = more ? callbacksItems.concat(items) : items;
      callbacksNext = typeof r.body.next === 'string' ? r.body.next : null;
      renderCallbacks();
    } finally {
      callbacksBusy = false;
      if (callbacksAgain) {
        callbacksAgain = false;
        scheduleCallbacks(0);
      }
    }
  }

  function setCallbacksCount(n) {
    const c = $('callbacks-count');
    c.textContent = n === null ? '' : (callbacksNext ? `${n}+` : String(n));
    c.hidden = !n;
  }

  function renderCallbacks() {
    const list = $('callbacks-list');
    renderRows(list, callbacksItems, callbackRow, canDismiss());
    $('callbacks-empty').hidden = list.hidden || callbacksItems.length > 0 || !$('callbacks-message').hidden;
    $('callbacks-more').hidden = !callbacksNext;
    setCallbacksCount(callbacksItems.length);
  }

  function callbackRow(it) {
    const row = el('li', 'row callback');
    row.dataset.number = String(it.number || '');
    const number = formatNumber(String(it.number || ''));
    const name = it.name ? String(it.name) : number;
    const who = el('div', 'who');
    who.append(el('p', 'row-title', name));
    const sub = [];
    if (name !== number) sub.push(number);
    const missed = Number(it.missedCount) || 1;
    sub.push(missed === 1 ? `missed ${brief(it.lastMissedAt)}` : `missed ${missed} times, last ${brief(it.lastMissedAt)}, first ${brief(it.firstMissedAt)}`);
    who.append(el('p', 'row-sub', sub.join(' \u00b7 ')));
    const facts = el('div', 'row-facts');
    if (it.voicemail) facts.append(el('span', 'outcome outcome-voicemail', 'Left a voicemail'));
    else facts.append(el('span', 'outcome outcome-missed', missed === 1 ? 'Missed' : `Missed \u00d7${missed}`));
    for (const l of Array.isArray(it.locations) ? it.locations : []) facts.append(el('span', 'tag', String(l)));
    const actions = el('div', 'row-actions');
    const calls = el('button', 'btn btn-ghost-dark', 'Calls');
    calls.type = 'button';
    calls.title = 'Today\u2019s calls with this number';
    calls.addEventListener('click', () => {
      $('filter-number').value = String(it.number || '');
      $('filter-direction').value = '';
      $('filter-outcome').value = '';
      showView('calls');
    });
    actions.append(calls);
    if (canDismiss()) {
      const dismiss = el('button', 'btn btn-primary dismiss', 'Dismiss');
      dismiss.type = 'button';
      dismiss.title = 'Take this caller off the list without calling back';
      dismiss.addEventListener('click', () => dismissCallback(it.number, dismiss));
      actions.append(dismiss);
    }
    row.append(el('span', 'row-time', clock(it.lastMissedAt)), who, facts, actions);
    return row;
  }

  async function dismissCallback(number, button) {
    button.disabled = true;
    const r = await api(`${CALLBACKS}/${encodeURIComponent(String(number))}/dismiss`, 'POST');
    if (r.status === 403) {
      const why = refusal(r, 'the to-call-back list');
      if (r.body && Array.isArray(r.body.missingScopes) && r.body.missingScopes.includes(SCOPE_CALLBACKS_WRITE)) {
        scopes = (scopes || []).filter((x) => x !== SCOPE_CALLBACKS_WRITE);
      }
      renderCallbacks();
      showNotice('callbacks-message', why.text, 'error');
      return;
    }
    if (r.status !== 200 && r.status !== 404) {
      button.disabled = false;
      showNotice('callbacks-message', refusal(r, 'the to-call-back list').text, 'error');
      return;
    }
    // Dismissed, or closed meanwhile by a call back: either way, read the list again.
    callbacksItems = callbacksItems.filter((x) => x.number !== number);
    renderCallbacks();
    scheduleCallbacks(0);
  }

  tick();
  showWhere();
  refreshEmpty();
  showView(viewFromHash(), false);
  connect();
})();
