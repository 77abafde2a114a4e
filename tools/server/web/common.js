// The page's shared pieces: its state, the API key's header, and helpers that put text into the page as
// text (textContent), never as markup. The page is four classic scripts run in order (defer):
// common.js, transcript.js, live.js, then app.js, which starts it.
'use strict';

const $ = (id) => document.getElementById(id);

const state = {
  key: '',          // the API key, in memory only
  caps: null,       // /v1/models' capabilities of the loaded model
  model: '',
  audioUrl: null,   // the uploaded file, for the player
  words: [],        // [{start, end, el}] of the shown transcript, in time order
  downloads: [],    // object URLs to revoke
  upload: null,     // the request in flight
  live: null,       // the Listen session
  lastLive: null,   // the last one, its events and recording kept after Stop
};

function authHeaders() {
  return state.key ? { Authorization: 'Bearer ' + state.key } : {};
}

function text(el, value) {
  el.textContent = value;
  return el;
}

function element(tag, className, value) {
  const el = document.createElement(tag);
  if (className) el.className = className;
  if (value !== undefined) el.textContent = value;
  return el;
}

// 83.4 → "01:23.40"; an hour or more → "1:01:23.40".
function clock(seconds) {
  const s = Math.max(0, seconds);
  const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), r = s % 60;
  const mm = String(m).padStart(2, '0'), ss = r.toFixed(2).padStart(5, '0');
  return h > 0 ? `${h}:${mm}:${ss}` : `${mm}:${ss}`;
}
