// The front desk page: shows each ringing call of this desk's locations as it rings.
//
// It reads GET /api/v1/popups/stream with fetch() and a streamed response body rather than
// EventSource, because EventSource cannot send the key in request headers, and a secret in a URL
// ends up in access logs. The key is entered once and kept in this browser's localStorage.
'use strict';

(() => {
  const STREAM = '/api/v1/popups/stream';
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
  });
  $('cancel').addEventListener('click', () => $('settings').close());
  $('forget').addEventListener('click', () => {
    localStorage.removeItem(STORAGE_KEY);
    settings = load();
    disconnect();
    setStatus('idle', 'Not set up');
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
        headers: { 'Client-ID': settings.clientId, 'Client-Secret': settings.secret, Accept: 'text/event-stream' },
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
        alive(ctl);
        setStatus('connected', 'Connected', `Listening for calls to ${settings.locations.join(', ')}`);
        break;
      case 'popup':
        showPopup(msg);
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

  tick();
  showWhere();
  refreshEmpty();
  connect();
})();
