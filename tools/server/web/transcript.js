// A finished transcript: segments with their times, words that seek the player and light up as they are
// played, speakers and their timeline, and the downloads (each the API's own body for its format).
'use strict';

const player = $('player');

function seek(seconds) {
  player.currentTime = seconds;
  player.play().catch(() => { /* a browser that will not play unasked still seeks */ });
}

function speakerClass(label, speakers) {
  if (!speakers.has(label)) speakers.set(label, speakers.size);
  return 'spk-' + (speakers.get(label) % 8);
}

// Which diarized segment (speaker) a time falls in.
function speakerAt(segments, t) {
  for (const s of segments) if (t >= s.start && t < s.end) return s.speaker;
  let best = null, gap = Infinity;
  for (const s of segments) {
    const d = Math.min(Math.abs(t - s.start), Math.abs(t - s.end));
    if (d < gap) gap = d, best = s.speaker;
  }
  return best;
}

function showResult(fileName, formats) {
  const verbose = JSON.parse(formats.verbose_json);
  const diarized = formats.diarized_json ? JSON.parse(formats.diarized_json) : null;
  const speakers = new Map();
  player.src = state.audioUrl;
  const meta = [`language: ${verbose.language}`, `duration: ${clock(verbose.duration)}`];
  if (diarized) meta.push(`speakers: ${new Set(diarized.segments.map((s) => s.speaker)).size}`);
  text($('result-meta'), meta.join(' · '));
  $('result-meta').dataset.language = verbose.language;

  const transcript = $('transcript');
  transcript.replaceChildren();
  transcript.classList.toggle('with-speakers', !!diarized);
  state.words = [];
  const words = verbose.words || [];
  let w = 0;
  const segments = verbose.segments || [];
  segments.forEach((segment, i) => {
    const row = element('div', 'segment');
    row.dataset.index = String(i);
    const time = element('button', 'time', `${clock(segment.start)} → ${clock(segment.end)}`);
    time.type = 'button';
    time.setAttribute('aria-label', `play from ${clock(segment.start)}`);
    time.addEventListener('click', () => seek(segment.start));
    const speaker = element('span', 'speaker');
    if (diarized) {
      const label = speakerAt(diarized.segments, (segment.start + segment.end) / 2);
      if (label !== null) {
        text(speaker, label);
        speaker.className = 'speaker ' + speakerClass(label, speakers);
      }
    }
    const body = element('span', 'text');
    // The segment's words where the model times them (those that start before the next segment does),
    // else its text.
    const next = i + 1 < segments.length ? segments[i + 1].start : Infinity;
    const first = w;
    while (w < words.length && (words[w].start < next || i + 1 === segments.length)) {
      const word = words[w++];
      if (w - 1 > first) body.append(' ');
      const span = element('span', 'word', word.word);
      span.dataset.start = String(word.start);
      span.dataset.end = String(word.end);
      span.addEventListener('click', () => seek(word.start));
      body.append(span);
      state.words.push({ start: word.start, end: word.end, el: span });
    }
    if (w === first) text(body, segment.text);
    row.append(time, speaker, body);
    transcript.append(row);
  });
  if (segments.length === 0) transcript.append(element('p', 'meta', '(no speech)'));

  drawTimeline(diarized, verbose.duration, speakers);
  offerDownloads(fileName, formats);
  $('result').hidden = false;
}

const SVG = 'http://www.w3.org/2000/svg';

function svg(tag, attributes) {
  const el = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attributes)) el.setAttribute(name, String(value));
  return el;
}

// One lane per speaker, a bar per diarized segment, and a playhead that follows the player.
function drawTimeline(diarized, duration, speakers) {
  const box = $('timeline-box'), timeline = $('timeline');
  timeline.replaceChildren();
  if (!diarized || !diarized.segments.length || !(duration > 0)) {
    box.hidden = true;
    return;
  }
  for (const s of diarized.segments) speakerClass(s.speaker, speakers);
  const width = 1000, label = 60, lane = 28, height = speakers.size * lane + 8;
  timeline.setAttribute('viewBox', `0 0 ${width} ${height}`);
  timeline.style.height = `${height}px`;
  const x = (t) => label + (width - label - 4) * Math.min(1, t / duration);
  for (const [name, index] of speakers) {
    const title = svg('text', { x: 4, y: 4 + index * lane + lane * 0.65, class: 'lane-label' });
    title.textContent = name;
    timeline.append(title);
  }
  for (const s of diarized.segments) {
    const bar = svg('rect', {
      x: x(s.start), y: 4 + speakers.get(s.speaker) * lane + 4, width: Math.max(2, x(s.end) - x(s.start)),
      height: lane - 8, rx: 3, class: 'turn ' + speakerClass(s.speaker, speakers),
    });
    const tip = svg('title', {});
    tip.textContent = `${s.speaker}: ${clock(s.start)} → ${clock(s.end)}`;
    bar.append(tip);
    bar.addEventListener('click', () => seek(s.start));
    timeline.append(bar);
  }
  const head = svg('line', { x1: label, x2: label, y1: 0, y2: height, class: 'playhead', id: 'playhead' });
  timeline.append(head);
  timeline.dataset.duration = String(duration);
  timeline.dataset.offset = String(label);
  box.hidden = false;
}

// The word being played is highlighted, and the playhead moves with the player.
function followPlayer() {
  const t = player.currentTime;
  for (const w of state.words) w.el.classList.toggle('now', t >= w.start && t < w.end);
  const head = $('playhead');
  if (head) {
    const duration = Number($('timeline').dataset.duration), label = Number($('timeline').dataset.offset);
    const x = label + (1000 - label - 4) * Math.min(1, t / duration);
    head.setAttribute('x1', String(x));
    head.setAttribute('x2', String(x));
  }
}
player.addEventListener('timeupdate', followPlayer);
player.addEventListener('seeked', followPlayer);

const DOWNLOADS = [
  ['text', 'txt', 'text/plain', 'text'],
  ['srt', 'srt', 'application/x-subrip', 'SRT subtitles'],
  ['vtt', 'vtt', 'text/vtt', 'WebVTT subtitles'],
  ['json', 'json', 'application/json', 'JSON'],
  ['verbose_json', 'verbose.json', 'application/json', 'verbose JSON'],
  ['diarized_json', 'diarized.json', 'application/json', 'diarized JSON'],
];

function offerDownloads(fileName, formats) {
  for (const url of state.downloads) URL.revokeObjectURL(url);
  state.downloads = [];
  const list = $('downloads');
  list.replaceChildren();
  const base = fileName.replace(/\.[^.]*$/, '') || 'transcript';
  for (const [format, extension, type, label] of DOWNLOADS) {
    if (!(format in formats)) continue;
    const url = URL.createObjectURL(new Blob([formats[format]], { type }));
    state.downloads.push(url);
    const link = element('a', '', label);
    link.href = url;
    link.download = `${base}.${extension}`;
    link.dataset.format = format;
    const item = element('li');
    item.append(link);
    list.append(item);
  }
}
