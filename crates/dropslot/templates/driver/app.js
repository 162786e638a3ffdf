// dropslot driver app (CONTRACT §13): today's route, scans, proof of delivery, returns
// handed back to their merchants (§15), offline.
//
// - The sign-in link carries the driver token in the URL fragment; it is kept in this
//   phone's localStorage and removed from the address bar at once. Signing out forgets it
//   and everything kept here.
// - Every action is a record in an IndexedDB queue first (photos and signatures as Blobs),
//   then sent in order, one at a time, each with its own Idempotency-Key: a network that
//   drops an answer makes the app send again, and the server takes it once. The queue
//   survives a reload or a closed app.
// - An action the server refuses after the fact (the merchant deleted the parcel meanwhile)
//   is never retried over the change: it leaves the queue and is shown to the driver.
// - The route is read again every minute while the app is open (and after every action), so
//   a recipient's new instruction or a shipment moved to another day shows without a reload.
'use strict';

const API = '/scheduled-service/api/v1';
const TOKEN_KEY = 'ds_driver_token';
const POSITION_CONSENT = 'ds_driver_positions';
const REASONS = [
  'Nobody at the address',
  'Address not found',
  'Refused by the receiver',
  'No access to the building',
  'Parcel damaged',
  'Out of time today',
];
// Why a return could not be handed back to its merchant.
const RETURN_REASONS = [
  'Merchant closed',
  'Nobody to take the parcels',
  'Refused by the merchant',
  'Address not found',
  'Out of time today',
];
// How often the route is read again while the app is open (ms).
const READ_EVERY = 60000;
const FINAL = ['delivered', 'returned', 'cancelled', 'deleted'];

let token = null;
let day = null;
let loaded = new Set();
let conflicts = [];
let pending = [];
let online = true;
let notice = null;
let sheet = null;
let camera = null;
let taps = 0;
let watchId = null;
let lastPosition = 0;
let lastRead = 0;
// Actions the server has taken since the page loaded (`data-sent` on the body).
let sent = 0;
// What the page shows now, as a key: a render that would draw the same leaves it alone.
let drawn = null;

// Every tap on the page: a stop's actions report how many it took (`data-taps`).
document.addEventListener('pointerdown', () => { taps += 1; }, true);

// ---- small helpers ---------------------------------------------------------------------

/** An element with attributes (`on*` are listeners) and children (strings are text). */
function h(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else if (k === 'class') e.className = v;
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

function newKey() {
  const b = new Uint8Array(16);
  crypto.getRandomValues(b);
  return 'drv-' + Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
}

/** The words of an error envelope: its message and each field's messages. */
function errorText(json, status) {
  if (!json || typeof json !== 'object') return `The server answered ${status}.`;
  const parts = [json.message || `The server answered ${status}.`];
  for (const [path, msgs] of Object.entries(json.errors || {})) {
    parts.push(`${path}: ${[].concat(msgs).join(' ')}`);
  }
  return parts.join(' ');
}

function time(s) {
  // "2026-11-23 14:00" → "14:00"
  const m = /(\d\d:\d\d)/.exec(s || '');
  return m ? m[1] : s || '';
}

// ---- storage (IndexedDB) ---------------------------------------------------------------

let dbPromise = null;
function db() {
  if (!dbPromise) {
    dbPromise = new Promise((resolve, reject) => {
      const r = indexedDB.open('dropslot-driver', 1);
      r.onupgradeneeded = () => {
        r.result.createObjectStore('queue', {keyPath: 'seq', autoIncrement: true});
        r.result.createObjectStore('kv');
      };
      r.onsuccess = () => resolve(r.result);
      r.onerror = () => reject(r.error);
    });
  }
  return dbPromise;
}

async function run(store, mode, fn) {
  const d = await db();
  return new Promise((resolve, reject) => {
    const t = d.transaction(store, mode);
    const req = fn(t.objectStore(store));
    t.oncomplete = () => resolve(req ? req.result : undefined);
    t.onerror = () => reject(t.error);
    t.onabort = () => reject(t.error);
  });
}
const kvGet = (k) => run('kv', 'readonly', (s) => s.get(k));
const kvSet = (k, v) => run('kv', 'readwrite', (s) => s.put(v, k));
const queued = () => run('queue', 'readonly', (s) => s.getAll());
const enqueue = (a) => run('queue', 'readwrite', (s) => s.add(a));
const dequeue = (seq) => run('queue', 'readwrite', (s) => s.delete(seq));
const requeue = (a) => run('queue', 'readwrite', (s) => s.put(a));

// ---- the API ---------------------------------------------------------------------------

class Offline extends Error {}

/** One request; a network failure or no answer within 20 s is `Offline`. */
async function call(method, path, body, key) {
  const headers = {Authorization: 'Bearer ' + token};
  let payload;
  if (key) headers['Idempotency-Key'] = key;
  if (body instanceof Blob) {
    payload = body;
    headers['Content-Type'] = body.type;
  } else if (body !== undefined) {
    payload = JSON.stringify(body);
    headers['Content-Type'] = 'application/json';
  }
  const ctl = new AbortController();
  const timer = setTimeout(() => ctl.abort(), 20000);
  let res;
  try {
    res = await fetch(API + path, {method, headers, body: payload, signal: ctl.signal, cache: 'no-store'});
  } catch (_) {
    throw new Offline();
  } finally {
    clearTimeout(timer);
  }
  let json = null;
  try { json = await res.json(); } catch (_) { json = null; }
  if (res.status === 401) {
    // Keeps what is queued: it is sent once the driver signs in again on this phone.
    signOut('Your sign-in link is no longer valid: ask your dispatcher for a new one. What is waiting to be sent stays on this phone.', true);
  }
  return {status: res.status, json};
}

// ---- the route -------------------------------------------------------------------------

function stops() {
  return day ? day.routes.flatMap((r) => r.stops.map((s) => ({route: r, stop: s}))) : [];
}

/** Where a scanned or typed code is on today's routes (from the kept route, offline too). */
function locate(code) {
  for (const {route, stop} of stops()) {
    for (const sh of stop.shipments) {
      for (const p of sh.parcels) {
        if (p.pick_up_code === code || p.custom_code === code) return {route, stop, sh, parcel: p};
      }
    }
  }
  return null;
}

/** A shipment's status with this phone's unsent actions applied. */
function statusOf(sh) {
  const mine = pending.filter((a) => a.kind === 'move' && a.shipment === sh.unique_id);
  if (mine.length) return mine[mine.length - 1].to;
  if (pending.some((a) => a.kind === 'start') && !sh.moved_to && ['processing', 'to_attempt'].includes(sh.status)) return 'in_transit';
  return sh.status;
}

/** Whether a shipment's parcels go on the van at the depot: a drop-off waiting there, or a
 * return still to hand back. */
function loadable(stop, sh) {
  if (sh.moved_to) return false;
  const status = statusOf(sh);
  return stop.kind === 'return' ? status === 'return_scheduled' : stop.kind === 'drop_off' && ['processing', 'to_attempt'].includes(status);
}

/** Parcels still to load: the drop-offs waiting at the depot and the returns to hand back. */
function toLoad() {
  return stops().flatMap(({stop}) => stop.shipments.filter((sh) => loadable(stop, sh))).flatMap((sh) => sh.parcels);
}

/** A route of today with something left to do: positions are reported while it runs. */
function routeRunning() {
  return stops().some(({stop}) => stop.shipments.some((sh) => !sh.moved_to && !FINAL.includes(statusOf(sh)) && statusOf(sh) !== 'failed'));
}

async function refresh() {
  try {
    lastRead = Date.now();
    const r = await call('GET', '/driver/route');
    online = true;
    if (r.status === 200 && r.json && r.json.object) {
      day = r.json.object;
      await kvSet('day', day);
      loaded = new Set((await kvGet('loaded:' + day.date)) || []);
    }
  } catch (e) {
    if (!(e instanceof Offline)) throw e;
    online = false;
  }
  await render();
}

// ---- the queue -------------------------------------------------------------------------

let flushing = false;

/** Sends the queue in order, one action at a time, until it is empty or the network is gone. */
async function flush() {
  if (flushing || !token) return;
  flushing = true;
  let changed = false;
  try {
    for (;;) {
      const [a] = await queued();
      if (!a) break;
      const outcome = await send(a);
      if (outcome === 'retry') break;
      await dequeue(a.seq);
      if (outcome === 'done' && a.kind !== 'position') sent += 1;
      changed = true;
    }
  } finally {
    flushing = false;
  }
  if (changed) await refresh();
  else await render();
}

/** 'done', 'refused' (shown in `conflicts`) or 'retry' (offline, or the server busy). */
async function send(a) {
  try {
    const r = await deliver(a);
    online = true;
    if (r.status >= 200 && r.status < 300) return 'done';
    if (r.status === 429 && a.kind === 'position') return 'done';
    if (r.status === 401 || r.status === 429 || r.status >= 500) return 'retry';
    if (a.kind !== 'position') await refused(a, errorText(r.json, r.status));
    return 'refused';
  } catch (e) {
    if (!(e instanceof Offline)) throw e;
    online = false;
    return 'retry';
  }
}

/** One queued action to the server: its files first (each under its own key), then itself. */
async function deliver(a) {
  if (a.kind === 'move') {
    for (const f of a.files || []) {
      if (f.url) continue;
      const r = await call('POST', '/driver/proofs', f.blob, `${a.key}#${f.type}`);
      if (r.status !== 201) return r;
      f.url = r.json.object.url;
      await requeue(a);
    }
    const body = {to: a.to};
    if (a.reason) body.reason = a.reason;
    if (a.to === 'delivered') {
      body.proof_of_delivery = [{type: 'receiver_name', value: a.receiver}]
        .concat((a.files || []).map((f) => ({type: f.type, value: f.url})));
    }
    if (a.to === 'returned') body.proof_of_delivery = [{type: 'receiver_name', value: a.receiver}];
    return call('POST', `/driver/shipments/${encodeURIComponent(a.shipment)}/transitions`, body, a.key);
  }
  if (a.kind === 'start') return call('POST', '/driver/route/start', {scanned: a.scanned}, a.key);
  return call('POST', '/driver/positions', a.position, a.key);
}

async function refused(a, message) {
  const what = a.kind === 'start' ? 'Starting the route' : a.to === 'delivered' ? 'The delivery'
    : a.to === 'returned' ? 'The hand-back' : a.to === 'failed' ? 'The failed attempt' : 'The pick-up';
  conflicts.push({
    at: new Date().toISOString(),
    stop: a.stop || null,
    shipment: a.shipment || null,
    text: `${what} was not recorded: ${message}`,
  });
  await kvSet('conflicts', conflicts);
}

async function act(a) {
  a.key = newKey();
  a.queued_at = new Date().toISOString();
  await enqueue(a);
  pending = await queued();
  await render();
  flush();
}

// ---- actions ---------------------------------------------------------------------------

async function scanned(raw) {
  let code = String(raw || '').trim();
  // The label's QR code is the shipment's tracking URL.
  const url = /\/track\/([^/?#]+)\/?$/.exec(code);
  let found = null;
  if (url) {
    const tracking = decodeURIComponent(url[1]);
    const sh = stops().flatMap(({stop}) => stop.shipments).find((s) => s.unique_id === tracking);
    if (sh && sh.parcels.length === 1) code = sh.parcels[0].pick_up_code;
    else if (sh) {
      notice = {bad: true, text: `This QR code names shipment ${tracking} of ${sh.parcels.length} parcels: scan each parcel's barcode.`};
      return render();
    } else code = tracking;
  }
  if (!code) return;
  found = locate(code);
  if (online) {
    try {
      const r = await call('POST', '/driver/scans', {code});
      if (r.status === 404) found = null;
      else if (r.status === 422) {
        notice = {bad: true, text: errorText(r.json, r.status)};
        return render();
      } else if (r.status === 200 && !found) {
        // On the route since this phone last read it: read it again.
        await refresh();
        found = locate(r.json.object.pick_up_code);
      }
    } catch (e) {
      if (!(e instanceof Offline)) throw e;
      online = false;
    }
  }
  if (!found) {
    notice = {bad: true, text: `${code} is not on your route: leave this parcel out.`};
    return render();
  }
  const {stop, sh, parcel} = found;
  if (stop.kind === 'pick_up') {
    const status = statusOf(sh);
    if (status === 'scheduled' || status === 'to_pick_up') {
      notice = {bad: false, text: `Picked up at stop ${stop.seq}: ${parcel.pick_up_code}.`};
      return act({kind: 'move', to: 'picked_up', shipment: sh.unique_id, stop: stop.seq});
    }
    notice = {bad: false, text: `${parcel.pick_up_code} is ${status.replace(/_/g, ' ')} already.`};
    return render();
  }
  if (sh.moved_to) {
    notice = {bad: true, text: `${parcel.pick_up_code} was moved to ${movedText(sh.moved_to)}: leave it at the depot.`};
    return render();
  }
  if (!loadable(stop, sh)) {
    notice = {bad: false, text: `${parcel.pick_up_code} is for stop ${stop.seq} (${statusOf(sh).replace(/_/g, ' ')}).`};
    return render();
  }
  loaded.add(parcel.pick_up_code);
  await kvSet('loaded:' + day.date, [...loaded]);
  const verb = stop.kind === 'return' ? 'to hand back at' : 'for';
  notice = {bad: false, text: `Loaded ${parcel.pick_up_code} ${verb} stop ${stop.seq}.`};
  return render();
}

async function start() {
  const codes = toLoad().map((p) => p.pick_up_code);
  notice = {bad: false, text: 'Route started.'};
  await act({kind: 'start', scanned: codes});
  syncPositions();
}

function openSheet(kind, stop, sh) {
  closeCamera();
  // The tap that opened the sheet counts as the stop's first.
  sheet = {kind, stop: stop.seq, shipment: sh.unique_id, receiver: kind === 'handback' ? '' : stop.receiver,
    tapsAt: taps - 1, ret: stop.kind === 'return', reason: null, signed: false, photo: null, photoUrl: null};
  notice = null;
  render();
}

function closeSheet() {
  closeCamera();
  if (sheet && sheet.photoUrl) URL.revokeObjectURL(sheet.photoUrl);
  sheet = null;
}

async function confirmSheet() {
  const s = sheet;
  if (!s) return;
  const stop = document.querySelector(`[data-seq="${s.stop}"]`);
  if (s.kind === 'fail') {
    if (!s.reason) {
      s.error = 'Choose what happened.';
      return render();
    }
    const used = taps - s.tapsAt;
    closeSheet();
    if (stop) stop.dataset.taps = String(used);
    lastTaps[s.stop] = used;
    const what = s.ret ? 'could not hand back' : 'failed attempt recorded';
    notice = {bad: false, text: `Stop ${s.stop}: ${what} (${s.reason}).`};
    return act({kind: 'move', to: 'failed', reason: s.reason, shipment: s.shipment, stop: s.stop});
  }
  if (s.kind === 'handback') {
    s.receiver = ((document.getElementById('taker') || {}).value || '').trim();
    if (!s.receiver) {
      s.error = 'Type the name of who took the parcels.';
      return render();
    }
    const used = taps - s.tapsAt;
    closeSheet();
    lastTaps[s.stop] = used;
    notice = {bad: false, text: `Stop ${s.stop}: handed back to ${s.receiver}.`};
    return act({kind: 'move', to: 'returned', receiver: s.receiver, shipment: s.shipment, stop: s.stop});
  }
  const name = (document.getElementById('receiver') || {}).value || '';
  s.receiver = name.trim();
  if (!s.receiver || !s.signed) {
    s.error = !s.receiver ? "Type the receiver's name." : 'Ask the receiver to sign.';
    return render();
  }
  const signature = await new Promise((resolve) => s.pad.toBlob(resolve, 'image/png'));
  const files = [{type: 'signature', blob: signature}];
  if (s.photo) files.push({type: 'photo', blob: s.photo});
  const used = taps - s.tapsAt;
  closeSheet();
  lastTaps[s.stop] = used;
  notice = {bad: false, text: `Stop ${s.stop}: delivered to ${s.receiver}.`};
  return act({kind: 'move', to: 'delivered', receiver: s.receiver, files, shipment: s.shipment, stop: s.stop});
}

const lastTaps = {};

// ---- camera ----------------------------------------------------------------------------

function closeCamera() {
  if (camera) {
    camera.stream.getTracks().forEach((t) => t.stop());
    clearInterval(camera.timer);
    camera = null;
  }
}

async function openCamera(purpose) {
  closeCamera();
  try {
    const stream = await navigator.mediaDevices.getUserMedia({video: {facingMode: 'environment'}, audio: false});
    const video = h('video', {id: 'viewfinder', class: 'viewfinder', muted: true, playsinline: true, autoplay: true,
      'aria-label': purpose === 'scan' ? 'Camera: point it at a parcel barcode or QR code' : 'Camera: frame the parcel at the door'});
    video.srcObject = stream;
    camera = {purpose, stream, video, timer: null, last: null};
  } catch (e) {
    notice = {bad: true, text: `The camera is not available (${e.name || e}).` + (purpose === 'scan' ? ' Type the code instead.' : '')};
    return render();
  }
  await render();
  const video = camera.video;
  await video.play().catch(() => {});
  if (purpose === 'scan') {
    // eslint-disable-next-line no-undef
    const detector = new BarcodeDetector({formats: ['code_128', 'qr_code']});
    const c = camera;
    c.timer = setInterval(async () => {
      if (camera !== c || video.readyState < 2) return;
      let codes = [];
      try { codes = await detector.detect(video); } catch (_) { codes = []; }
      const value = codes.length ? codes[0].rawValue : null;
      if (value && value !== c.last) {
        c.last = value;
        await scanned(value);
      }
    }, 250);
  }
}

async function takePhoto() {
  if (!camera || !sheet) return;
  const video = camera.video;
  const canvas = document.createElement('canvas');
  canvas.width = video.videoWidth || 640;
  canvas.height = video.videoHeight || 480;
  canvas.getContext('2d').drawImage(video, 0, 0, canvas.width, canvas.height);
  const blob = await new Promise((resolve) => canvas.toBlob(resolve, 'image/jpeg', 0.85));
  closeCamera();
  setPhoto(blob);
}

function setPhoto(blob) {
  if (!sheet || !blob) return;
  if (sheet.photoUrl) URL.revokeObjectURL(sheet.photoUrl);
  sheet.photo = blob;
  sheet.photoUrl = URL.createObjectURL(blob);
  render();
}

// ---- positions -------------------------------------------------------------------------

function syncPositions() {
  const wanted = localStorage.getItem(POSITION_CONSENT) === 'yes' && routeRunning() && navigator.geolocation;
  if (wanted && watchId === null) {
    watchId = navigator.geolocation.watchPosition((p) => {
      // The phone's clock when the fix arrives (a fix is at most 15 s old: maximumAge).
      const now = Date.now();
      if (now - lastPosition < 30000) return;
      lastPosition = now;
      act({kind: 'position', position: {
        lat: p.coords.latitude,
        lng: p.coords.longitude,
        accuracy_m: Math.min(Math.max(p.coords.accuracy || 0, 0), 10000),
        at: new Date(now).toISOString(),
      }});
    }, () => {}, {enableHighAccuracy: true, maximumAge: 15000, timeout: 60000});
  } else if (!wanted && watchId !== null) {
    navigator.geolocation.clearWatch(watchId);
    watchId = null;
  }
}

// ---- rendering -------------------------------------------------------------------------

function signaturePad() {
  const pad = h('canvas', {id: 'signature', class: 'pad', role: 'img', tabindex: '0',
    'aria-label': 'Signature: the receiver signs here with a finger'});
  let drawing = false;
  let ctx = null;
  const point = (e) => {
    const r = pad.getBoundingClientRect();
    return [(e.clientX - r.left) * (pad.width / r.width), (e.clientY - r.top) * (pad.height / r.height)];
  };
  pad.addEventListener('pointerdown', (e) => {
    e.preventDefault();
    if (!ctx) {
      ctx = pad.getContext('2d');
      ctx.lineWidth = 3;
      ctx.lineCap = 'round';
      ctx.strokeStyle = '#111';
    }
    drawing = true;
    try { pad.setPointerCapture(e.pointerId); } catch (_) { /* a synthetic pointer */ }
    const [x, y] = point(e);
    ctx.beginPath();
    ctx.moveTo(x, y);
  });
  pad.addEventListener('pointermove', (e) => {
    if (!drawing) return;
    const [x, y] = point(e);
    ctx.lineTo(x, y);
    ctx.stroke();
    if (sheet) sheet.signed = true;
  });
  const end = () => { drawing = false; };
  pad.addEventListener('pointerup', end);
  pad.addEventListener('pointercancel', end);
  // A white background, so the PNG reads on any viewer.
  requestAnimationFrame(() => {
    const r = pad.getBoundingClientRect();
    pad.width = Math.max(Math.round(r.width), 200);
    pad.height = Math.max(Math.round(r.height), 100);
    const c = pad.getContext('2d');
    c.fillStyle = '#fff';
    c.fillRect(0, 0, pad.width, pad.height);
  });
  return pad;
}

function viewfinder() {
  if (!camera) return null;
  const scan = camera.purpose === 'scan';
  return h('div', {class: 'card'},
    camera.video,
    h('div', {class: 'buttons'},
      scan ? null : h('button', {type: 'button', id: 'shutter', onclick: takePhoto}, 'Take photo'),
      h('button', {type: 'button', class: 'secondary', onclick: () => { closeCamera(); render(); }}, scan ? 'Stop camera' : 'Cancel')));
}

function sheetView(stop) {
  const s = sheet;
  if (s.kind === 'fail') {
    const label = s.ret ? `Return not handed back at stop ${stop.seq}` : `Failed attempt at stop ${stop.seq}`;
    return h('div', {class: 'sheet', role: 'group', 'aria-label': label},
      h('h3', {}, 'What happened?'),
      h('div', {class: 'reasons'}, (s.ret ? RETURN_REASONS : REASONS).map((r) => h('button', {type: 'button', 'aria-pressed': s.reason === r ? 'true' : 'false',
        onclick: () => { s.reason = r; s.error = null; render(); }}, r))),
      s.error ? h('p', {class: 'alert', role: 'alert'}, s.error) : null,
      h('div', {class: 'buttons'},
        h('button', {type: 'button', class: 'danger', id: 'confirm', onclick: confirmSheet}, s.ret ? 'Confirm: not handed back' : 'Confirm failed attempt'),
        h('button', {type: 'button', class: 'link', onclick: () => { closeSheet(); render(); }}, 'Cancel')));
  }
  if (s.kind === 'handback') {
    return h('div', {class: 'sheet', role: 'group', 'aria-label': `Hand-back at stop ${stop.seq}`},
      h('label', {for: 'taker'}, 'Who took the parcels'),
      h('input', {type: 'text', id: 'taker', value: s.receiver, autocomplete: 'off', maxlength: '200'}),
      s.error ? h('p', {class: 'alert', role: 'alert'}, s.error) : null,
      h('div', {class: 'buttons'},
        h('button', {type: 'button', id: 'confirm', onclick: confirmSheet}, 'Confirm hand-back'),
        h('button', {type: 'button', class: 'link', onclick: () => { closeSheet(); render(); }}, 'Cancel')));
  }
  const canPhoto = !!(navigator.mediaDevices && navigator.mediaDevices.getUserMedia);
  return h('div', {class: 'sheet', role: 'group', 'aria-label': `Delivery at stop ${stop.seq}`},
    h('label', {for: 'receiver'}, "Receiver's name"),
    h('input', {type: 'text', id: 'receiver', value: s.receiver, autocomplete: 'off', maxlength: '200'}),
    h('p', {id: 'signature-label', class: 'muted'}, 'Signature'),
    s.pad || (s.pad = signaturePad()),
    s.photoUrl ? h('img', {class: 'preview', src: s.photoUrl, alt: 'Photo of the delivery'}) : null,
    camera && camera.purpose === 'photo' ? viewfinder() : null,
    s.error ? h('p', {class: 'alert', role: 'alert'}, s.error) : null,
    h('div', {class: 'buttons'},
      h('button', {type: 'button', id: 'confirm', onclick: confirmSheet}, 'Confirm delivery'),
      camera ? null : canPhoto
        ? h('button', {type: 'button', class: 'secondary', id: 'photo', onclick: () => openCamera('photo')}, s.photo ? 'Retake photo' : 'Add photo')
        : h('label', {class: 'secondary'}, 'Add photo',
          h('input', {type: 'file', id: 'photo-file', accept: 'image/jpeg,image/png', capture: 'environment',
            onchange: (e) => setPhoto(e.target.files[0])})),
      h('button', {type: 'button', class: 'link', onclick: () => { closeSheet(); render(); }}, 'Cancel')));
}

/** "Tue 24 Nov, 14:00 - 18:00" (another day) or "14:00 - 18:00 today". */
function movedText(m) {
  if (day && m.date === day.date) return `${m.slot} today`;
  const d = new Date(`${m.date}T12:00:00Z`);
  const named = isNaN(d) ? m.date : d.toLocaleDateString('en-CA', {weekday: 'short', day: 'numeric', month: 'short', timeZone: 'UTC'});
  return `${named}, ${m.slot}`;
}

function actions(stop, sh) {
  if (stop.kind === 'return') {
    return h('div', {class: 'buttons'},
      h('button', {type: 'button', class: 'deliver handback', onclick: () => openSheet('handback', stop, sh)}, 'Handed back'),
      h('button', {type: 'button', class: 'danger fail', onclick: () => openSheet('fail', stop, sh)}, 'Could not hand back'));
  }
  return h('div', {class: 'buttons'},
    h('button', {type: 'button', class: 'deliver', onclick: () => openSheet('deliver', stop, sh)}, 'Delivered'),
    h('button', {type: 'button', class: 'danger fail', onclick: () => openSheet('fail', stop, sh)}, 'Failed'));
}

function shipmentView(stop, sh) {
  const status = statusOf(sh);
  const waiting = pending.some((a) => a.kind === 'move' && a.shipment === sh.unique_id);
  const ready = stop.kind === 'return' ? status === 'return_scheduled' : stop.kind === 'drop_off' && status === 'in_transit';
  const canAct = ready && !sh.moved_to && !waiting;
  const open = sheet && sheet.shipment === sh.unique_id;
  return h('div', {class: 'shipment', 'data-shipment': sh.unique_id},
    sh.instruction ? h('p', {class: 'instruction'}, h('strong', {}, 'Instruction: '), sh.instruction) : null,
    h('p', {}, h('span', {class: 'mono'}, sh.unique_id), ' · ',
      h('span', {class: `status ${status}`}, status ? status.replace(/_/g, ' ') : 'withdrawn by the merchant'),
      waiting ? h('span', {class: 'pending'}, ' (waiting to send)') : null),
    sh.moved_to ? h('p', {class: 'moved'}, `Moved to ${movedText(sh.moved_to)}: no longer on this route. Leave it at the depot.`) : null,
    sh.note ? h('p', {}, h('strong', {}, 'Note: '), sh.note) : null,
    h('ul', {class: 'codes', 'aria-label': 'Parcels'}, sh.parcels.map((p) => h('li', {
      class: loaded.has(p.pick_up_code) && loadable(stop, sh) ? 'loaded mono' : 'mono',
    }, p.custom_code ? `${p.pick_up_code} · ${p.custom_code}` : p.pick_up_code))),
    open ? sheetView(stop) : canAct && !sheet ? actions(stop, sh) : null);
}

function stopView(stop) {
  const statuses = stop.shipments.filter((sh) => !sh.moved_to).map(statusOf);
  const finished = stop.kind === 'pick_up' ? ['picked_up', 'processing', 'in_transit', 'delivered']
    : stop.kind === 'return' ? ['returned', 'cancelled'] : ['delivered'];
  const done = statuses.length > 0 && statuses.every((s) => finished.includes(s));
  const failed = statuses.some((s) => s === 'failed');
  const changed = conflicts.some((c) => c.stop === stop.seq) || stop.shipments.some((sh) => sh.moved_to);
  const classes = ['card', 'stop', done ? 'done' : '', failed ? 'failed' : '', changed ? 'changed' : ''].join(' ').trim();
  const kind = stop.kind === 'pick_up' ? 'Pick-up' : stop.kind === 'return' ? 'Return' : 'Drop-off';
  return h('li', {class: classes, 'data-seq': stop.seq, 'data-taps': lastTaps[stop.seq] === undefined ? null : lastTaps[stop.seq]},
    h('h2', {}, `${stop.seq}. ${kind} · ${time(stop.window.from)}–${time(stop.window.to)}`),
    h('p', {}, 'ETA ', h('strong', {}, time(stop.eta)), ` · ${stop.parcels} parcel${stop.parcels === 1 ? '' : 's'}`),
    h('p', {}, stop.address),
    h('p', {}, stop.receiver, stop.phone ? [' · ', h('a', {href: 'tel:' + stop.phone.replace(/[^+\d]/g, '')}, stop.phone)] : null),
    h('div', {class: 'links'},
      h('a', {href: stop.navigation.maps, target: '_blank', rel: 'noopener'}, 'Directions'),
      h('a', {href: stop.navigation.geo}, 'Open in maps app')),
    stop.shipments.map((sh) => shipmentView(stop, sh)),
    stop.kind === 'pick_up' && statuses.some((s) => s === 'scheduled' || s === 'to_pick_up')
      ? h('p', {class: 'muted'}, 'Scan each parcel here to pick it up.') : null,
    stop.kind === 'return' && statuses.some((s) => s === 'return_scheduled')
      ? h('p', {class: 'muted'}, 'Hand these parcels back to the merchant and note who took them.') : null);
}

/** The scan field: one element for the page's life, so typing is never redrawn under the
 * driver's fingers (and a hardware scanner's keystrokes all land in it). */
let scanField = null;
function scanForm() {
  if (!scanField) {
    scanField = h('form', {class: 'scan', id: 'scan-form', onsubmit: (e) => {
      e.preventDefault();
      const input = document.getElementById('code');
      const v = input.value;
      input.value = '';
      scanned(v);
    }},
    h('div', {}, h('label', {for: 'code'}, 'Parcel code'),
      h('input', {type: 'text', id: 'code', autocomplete: 'off', autocapitalize: 'characters', spellcheck: 'false',
        enterkeyhint: 'done', inputmode: 'text', maxlength: '300'})),
    h('button', {type: 'submit', id: 'check'}, 'Check'));
  }
  const canDetect = 'BarcodeDetector' in window && navigator.mediaDevices;
  return h('div', {},
    scanField,
    canDetect ? h('div', {class: 'buttons'}, camera && camera.purpose === 'scan' ? null
      : h('button', {type: 'button', class: 'secondary', id: 'scan-camera', onclick: () => openCamera('scan')}, 'Scan with camera')) : null,
    camera && camera.purpose === 'scan' ? viewfinder() : null);
}

function routeView(route) {
  const km = (route.distance_m / 1000).toFixed(1);
  return h('section', {'aria-labelledby': 'route-' + route.id},
    h('h1', {id: 'route-' + route.id}, `Today's route · ${route.stops.length} stop${route.stops.length === 1 ? '' : 's'}`),
    h('p', {class: 'muted'}, `${time(route.start)}–${time(route.end)} · ${km} km`),
    h('ol', {class: 'stops', 'aria-label': 'Stops in order'}, route.stops.map(stopView)));
}

async function render() {
  pending = await queued();
  const main = document.getElementById('main');
  const sync = document.getElementById('sync');
  const waiting = pending.filter((a) => a.kind !== 'position').length;
  sync.className = online ? 'sync' : 'sync offline';
  sync.textContent = (online ? '' : 'Offline. ') + (waiting ? `${waiting} to send` : online ? 'All sent' : 'Nothing to send');
  document.body.dataset.sent = String(sent);
  if (!token) return;
  // Nothing changed since the last drawing: leave the page alone (a tap landing on a button
  // while it is redrawn would be lost).
  const state = JSON.stringify([online, pending.map((a) => a.seq), conflicts.length, notice, day, [...loaded],
    camera && camera.purpose, lastTaps, localStorage.getItem(POSITION_CONSENT),
    sheet && [sheet.shipment, sheet.kind, sheet.reason, sheet.error, sheet.photoUrl]]);
  if (state === drawn) return;
  drawn = state;
  // Typing in progress survives a re-render.
  const focused = document.activeElement && document.activeElement.id;
  const typed = {receiver: (document.getElementById('receiver') || document.getElementById('taker') || {}).value};
  if (sheet && typed.receiver !== undefined) sheet.receiver = typed.receiver;
  const out = [];
  if (conflicts.length) {
    out.push(h('section', {class: 'card changed', 'aria-labelledby': 'changed-h'},
      h('h2', {id: 'changed-h'}, 'Changed meanwhile'),
      h('ul', {id: 'conflicts'}, conflicts.map((c) => h('li', {}, c.stop ? `Stop ${c.stop}` : 'Route', c.shipment ? ` (${c.shipment})` : '', ': ', c.text))),
      h('button', {type: 'button', class: 'secondary', onclick: async () => { conflicts = []; await kvSet('conflicts', []); render(); }}, 'Seen')));
  }
  if (notice) out.push(h('p', {class: notice.bad ? 'alert' : 'notice', role: notice.bad ? 'alert' : 'status', id: 'notice'}, notice.text));
  if (!day) {
    out.push(h('p', {}, online ? 'Loading your route…' : 'Offline, and no route kept on this phone yet.'));
  } else if (!day.routes.length) {
    out.push(h('h1', {}, `No route for you on ${day.date}`), h('p', {}, 'Your dispatcher has not published one yet.'));
  } else {
    const load = toLoad();
    const picking = stops().some(({stop, route}) => stop.kind === 'pick_up' && stop.shipments.some((sh) => ['scheduled', 'to_pick_up'].includes(statusOf(sh))));
    if (load.length || picking) {
      const done = load.filter((p) => loaded.has(p.pick_up_code)).length;
      out.push(h('section', {class: 'card', 'aria-labelledby': 'load-h'},
        h('h2', {id: 'load-h'}, load.length ? 'Load the van' : 'Pick up at the merchants'),
        load.length ? h('p', {id: 'loaded-count'}, `${done} of ${load.length} parcels scanned`) : null,
        scanForm(),
        load.length ? h('div', {class: 'buttons'}, h('button', {type: 'button', id: 'start', disabled: done < load.length, onclick: start},
          done < load.length ? `Scan ${load.length - done} more to start` : 'Start route')) : null));
    }
    if (routeRunning()) {
      const on = localStorage.getItem(POSITION_CONSENT) === 'yes';
      out.push(h('div', {class: 'buttons'}, h('button', {type: 'button', class: 'secondary', id: 'share', 'aria-pressed': on ? 'true' : 'false',
        onclick: () => { localStorage.setItem(POSITION_CONSENT, on ? 'no' : 'yes'); syncPositions(); render(); }},
      on ? 'Sharing my position with dispatch' : 'Share my position with dispatch')));
    }
    out.push(...day.routes.map(routeView));
  }
  main.replaceChildren(...out);
  if (focused) {
    const f = document.getElementById(focused);
    if (f && f.focus) f.focus();
  }
  if (camera && camera.video.paused) camera.video.play().catch(() => {});
}

// ---- sign-in and out -------------------------------------------------------------------

function signInView(message) {
  drawn = null;
  document.getElementById('sign-out').hidden = true;
  const main = document.getElementById('main');
  main.replaceChildren(
    h('h1', {}, 'Sign in'),
    message ? h('p', {class: 'alert', role: 'alert'}, message) : null,
    h('p', {}, 'Open the sign-in link your dispatcher sent you on this phone, or paste it here.'),
    h('form', {id: 'sign-in', onsubmit: (e) => {
      e.preventDefault();
      const v = document.getElementById('link').value.trim();
      const m = /token=([^&\s]+)/.exec(v) || /^(ds_driver_\S+)$/.exec(v);
      if (!m) {
        signInView('That is not a dropslot driver sign-in link.');
        return;
      }
      location.hash = 'token=' + m[1];
      location.reload();
    }},
    h('label', {for: 'link'}, 'Sign-in link'),
    h('input', {type: 'text', id: 'link', autocomplete: 'off'}),
    h('div', {class: 'buttons'}, h('button', {type: 'submit'}, 'Sign in'))));
}

async function forget(keepQueue) {
  localStorage.removeItem(TOKEN_KEY);
  localStorage.removeItem(POSITION_CONSENT);
  if (keepQueue) return;
  if (dbPromise) {
    (await dbPromise).close();
    dbPromise = null;
  }
  await new Promise((resolve) => {
    const r = indexedDB.deleteDatabase('dropslot-driver');
    r.onsuccess = r.onerror = r.onblocked = () => resolve();
  });
}

async function signOut(message, keepQueue) {
  if (!token) return;
  token = null;
  day = null;
  closeSheet();
  closeCamera();
  if (watchId !== null) navigator.geolocation.clearWatch(watchId);
  watchId = null;
  await forget(keepQueue);
  signInView(message);
}

async function boot() {
  const m = /(?:^#|&)token=([^&]+)/.exec(location.hash);
  if (m) {
    localStorage.setItem(TOKEN_KEY, decodeURIComponent(m[1]));
    history.replaceState(null, '', location.pathname + location.search);
  }
  if ('serviceWorker' in navigator) {
    navigator.serviceWorker.register('/driver/sw.js', {scope: '/driver'}).catch(() => {});
  }
  token = localStorage.getItem(TOKEN_KEY);
  if (!token) return signInView(null);
  const out = document.getElementById('sign-out');
  out.hidden = false;
  out.addEventListener('click', async () => {
    const waiting = (await queued()).filter((a) => a.kind !== 'position').length;
    if (waiting && !confirm(`${waiting} action(s) are not sent yet. Signing out forgets them. Sign out?`)) return;
    signOut(null);
  });
  day = (await kvGet('day')) || null;
  if (day) loaded = new Set((await kvGet('loaded:' + day.date)) || []);
  conflicts = (await kvGet('conflicts')) || [];
  await render();
  await refresh();
  syncPositions();
  flush();
  window.addEventListener('online', () => flush());
  setInterval(() => {
    // A new instruction or a moved stop shows at the next read: one a minute while open.
    if (!sheet && !flushing && Date.now() - lastRead >= READ_EVERY) refresh();
    flush();
    syncPositions();
  }, 10000);
}

boot();
