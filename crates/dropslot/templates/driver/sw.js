// dropslot driver app: keeps the app's own files so it opens without a network. The driver
// API is never cached here (the app keeps its last route and its queue in IndexedDB).
'use strict';
const CACHE = 'dropslot-driver-__VERSION__';
const SHELL = ['/driver', '/driver/app.js', '/driver/app.css', '/driver/manifest.webmanifest', '/driver/icon.svg'];

self.addEventListener('install', (event) => {
  event.waitUntil(caches.open(CACHE).then((c) => c.addAll(SHELL)).then(() => self.skipWaiting()));
});

self.addEventListener('activate', (event) => {
  event.waitUntil(
    caches.keys()
      .then((keys) => Promise.all(keys.filter((k) => k.startsWith('dropslot-driver-') && k !== CACHE).map((k) => caches.delete(k))))
      .then(() => self.clients.claim()),
  );
});

// The app's files: from the network when it answers within 4 s (a new build is seen at
// once), else from the cache. Everything else (the API) goes to the network untouched.
self.addEventListener('fetch', (event) => {
  const url = new URL(event.request.url);
  if (event.request.method !== 'GET' || url.origin !== self.location.origin) return;
  const path = url.pathname === '/driver/' ? '/driver' : url.pathname;
  if (!SHELL.includes(path)) return;
  event.respondWith((async () => {
    const cache = await caches.open(CACHE);
    try {
      const ctl = new AbortController();
      const timer = setTimeout(() => ctl.abort(), 4000);
      const res = await fetch(path, {signal: ctl.signal, cache: 'no-store'});
      clearTimeout(timer);
      if (res.ok) {
        await cache.put(path, res.clone());
        return res;
      }
      return (await cache.match(path)) || res;
    } catch (_) {
      const kept = await cache.match(path);
      if (kept) return kept;
      return new Response('Offline, and this app was never opened here before.', {status: 503, headers: {'Content-Type': 'text/plain'}});
    }
  })());
});
